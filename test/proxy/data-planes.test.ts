// One routing suite, run against both data planes: the Node proxy alone, and HAProxy with Node behind it.
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { Agent, createServer, request as httpRequest, type IncomingHttpHeaders, type OutgoingHttpHeaders, type RequestListener, type Server } from 'node:http';
import { connect, createServer as createTcpServer, type AddressInfo, type Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, it } from 'node:test';
import { WebSocket, WebSocketServer } from 'ws';
import { badGatewayPage, notFoundPage, renderPage, startingPage, unavailablePage } from '../../src/proxy/pages.js';
import type { Upstream } from '../../src/proxy/routing-table.js';
import { PLANES, startPlane, type PlaneUnderTest } from '../helpers/planes.js';

const DOMAIN = 'apps.test';

interface Answer {
  status: number;
  headers: IncomingHttpHeaders;
  body: Buffer;
}

function send(port: number, host: string, options: { method?: string; path?: string; headers?: OutgoingHttpHeaders; body?: Buffer } = {}): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: '127.0.0.1', port, method: options.method ?? 'GET', path: options.path ?? '/', headers: { ...options.headers, host }, agent: false });
    req.setTimeout(20_000, () => req.destroy(new Error('no answer within 20 s')));
    req.on('error', reject);
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('error', reject);
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }));
    });
    req.end(options.body);
  });
}

/** Writes raw bytes on a fresh connection and reads until the server closes it. */
function raw(port: number, data: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port });
    const chunks: Buffer[] = [];
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error('the connection stayed open for 20 s'));
    }, 20_000);
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    socket.on('error', () => undefined);
    socket.once('close', () => {
      clearTimeout(timer);
      resolve(Buffer.concat(chunks).toString('latin1'));
    });
    socket.write(data);
  });
}

function sha256(data: Buffer): string {
  return createHash('sha256').update(data).digest('hex');
}

for (const kind of PLANES) {
  describe(`data plane: ${kind}`, () => {
    let plane: PlaneUnderTest;
    const servers: Server[] = [];

    async function upstream(handler: RequestListener): Promise<{ server: Server; upstream: Upstream }> {
      const server = createServer(handler);
      server.listen(0, '127.0.0.1');
      await once(server, 'listening');
      servers.push(server);
      return { server, upstream: { host: '127.0.0.1', port: (server.address() as AddressInfo).port } };
    }
    function live(subdomain: string, to: Upstream): void {
      plane.table.set(subdomain, { kind: 'app', deploymentId: `dep-${subdomain}`, state: 'live', upstreams: [to] });
    }
    /** The route change reaches HAProxy through its runtime API a moment after the table changes. */
    async function settled(): Promise<void> {
      await plane.haproxy?.drain({ host: '0.0.0.0', port: 1 }, 1000);
    }

    before(async () => {
      plane = await startPlane(kind, DOMAIN);
    });
    after(async () => {
      await plane.close();
      for (const server of servers) {
        server.closeAllConnections();
        server.close();
      }
    });

    it('answers 404 and 503 pages with exactly the Node plane bodies, and other hosts reach the API', async () => {
      const missing = await send(plane.port, `nothing.${DOMAIN}:${plane.port}`);
      assert.equal(missing.status, 404);
      assert.equal(missing.body.toString(), renderPage(notFoundPage(`nothing.${DOMAIN}`)));
      assert.equal(missing.headers['content-type'], 'text/html; charset=utf-8');
      assert.equal(missing.headers['cache-control'], 'no-store');

      plane.table.set('resting', { kind: 'app', deploymentId: 'dep-resting', state: 'stopped' });
      await settled();
      const stopped = await send(plane.port, `resting.${DOMAIN}`);
      assert.equal(stopped.status, 503);
      assert.equal(stopped.body.toString(), renderPage(unavailablePage(`resting.${DOMAIN}`, 'the app is stopped')));

      assert.equal((await send(plane.port, 'localhost')).body.toString(), 'api');
    });

    it('a starting app (recovery after a restart) answers 503 starting with Retry-After, {error, message} to JSON clients', async () => {
      plane.table.set('waking', { kind: 'app', deploymentId: 'dep-waking', state: 'starting' });
      await settled();
      const page = await send(plane.port, `waking.${DOMAIN}`);
      assert.equal(page.status, 503);
      assert.equal(page.headers['retry-after'], '5');
      assert.equal(page.body.toString(), renderPage(startingPage(`waking.${DOMAIN}`)));
      const json = await send(plane.port, `waking.${DOMAIN}`, { headers: { accept: 'application/json' } });
      assert.equal(json.status, 503);
      assert.equal(json.headers['content-type'], 'application/json; charset=utf-8');
      assert.deepEqual(JSON.parse(json.body.toString()), { error: 'app_starting', message: startingPage(`waking.${DOMAIN}`).detail });

      // Once its release is healthy, the same host is served.
      const { upstream: to } = await upstream((_req, res) => res.end('awake'));
      live('waking', to);
      await settled();
      assert.equal((await send(plane.port, `waking.${DOMAIN}`)).body.toString(), 'awake');
    });

    it('a host with several replicas spreads requests over all of them; a replica taken off the route gets none', async () => {
      const replicas = await Promise.all(['r0', 'r1', 'r2'].map((name) => upstream((_req, res) => res.end(name))));
      const route = (n: number) => ({ kind: 'app' as const, deploymentId: 'dep-many', state: 'live' as const, upstreams: replicas.slice(0, n).map((r) => r.upstream) });
      plane.table.set('many', route(3));
      await settled();
      const seen = new Map<string, number>();
      for (let i = 0; i < 60; i++) {
        const body = (await send(plane.port, `many.${DOMAIN}`)).body.toString();
        seen.set(body, (seen.get(body) ?? 0) + 1);
      }
      assert.deepEqual([...seen.keys()].sort(), ['r0', 'r1', 'r2'], `every replica served: ${JSON.stringify([...seen])}`);
      plane.table.set('many', route(2));
      await settled();
      for (let i = 0; i < 30; i++) assert.notEqual((await send(plane.port, `many.${DOMAIN}`)).body.toString(), 'r2');
      // Back to one replica: every request goes to it.
      plane.table.set('many', route(1));
      await settled();
      for (let i = 0; i < 10; i++) assert.equal((await send(plane.port, `many.${DOMAIN}`)).body.toString(), 'r0');
    });

    it('proxies method, path, query, headers and a 1 MiB body both ways, keeping Host', async () => {
      const { upstream: to } = await upstream((req, res) => {
        const chunks: Buffer[] = [];
        req.on('data', (chunk: Buffer) => chunks.push(chunk));
        req.on('end', () => {
          const body = Buffer.concat(chunks);
          res.setHeader('x-echo', JSON.stringify({ method: req.method, url: req.url, host: req.headers.host, custom: req.headers['x-custom'], sha: sha256(body) }));
          res.end(body);
        });
      });
      live('echo', to);
      await settled();
      const body = randomBytes(1024 * 1024);
      const res = await send(plane.port, `Echo.${DOMAIN}:${plane.port}`, { method: 'PUT', path: '/a/b?c=d&e', headers: { 'x-custom': 'kept', 'content-type': 'application/octet-stream' }, body });
      assert.equal(res.status, 200);
      assert.deepEqual(JSON.parse(String(res.headers['x-echo'])), { method: 'PUT', url: '/a/b?c=d&e', host: `Echo.${DOMAIN}:${plane.port}`, custom: 'kept', sha: sha256(body) });
      assert.equal(sha256(res.body), sha256(body));
    });

    it('keeps its connection to an app open between a visitor’s requests', async () => {
      const appSockets = new Set<Socket>();
      const { upstream: to } = await upstream((req, res) => {
        appSockets.add(req.socket);
        res.end('kept');
      });
      live('kept', to);
      await settled();
      const agent = new Agent({ keepAlive: true, maxSockets: 1 });
      const visitorSockets = new Set<Socket>();
      try {
        for (let i = 0; i < 5; i++) {
          const answer = await new Promise<string>((resolve, reject) => {
            const req = httpRequest({ host: '127.0.0.1', port: plane.port, path: `/${i}`, headers: { host: `kept.${DOMAIN}` }, agent });
            req.setTimeout(20_000, () => req.destroy(new Error('no answer within 20 s')));
            req.on('socket', (socket: Socket) => visitorSockets.add(socket));
            req.on('error', reject);
            req.on('response', (res) => {
              let body = '';
              res.setEncoding('utf8');
              res.on('data', (chunk: string) => (body += chunk));
              res.on('end', () => resolve(body));
            });
            req.end();
          });
          assert.equal(answer, 'kept');
        }
      } finally {
        agent.destroy();
      }
      assert.equal(visitorSockets.size, 1, 'the visitor sent its five requests on one connection');
      // One connection from the edge to the app served all five: none was opened per request.
      assert.equal(appSockets.size, 1);
    });

    it('serves a custom domain as its deployment’s subdomain, and follows its route', async () => {
      const { upstream: first } = await upstream((_req, res) => res.end('first'));
      const { upstream: second } = await upstream((_req, res) => res.end('second'));
      live('shop', first);
      plane.table.setHost('www.shop.example', { subdomain: 'shop', deploymentId: 'dep-shop' });
      await settled();
      assert.equal((await send(plane.port, 'www.shop.example')).body.toString(), 'first');
      live('shop', second);
      await settled();
      assert.equal((await send(plane.port, 'WWW.shop.example:80')).body.toString(), 'second');
      plane.table.deleteHost('www.shop.example');
      await settled();
      assert.equal((await send(plane.port, 'www.shop.example')).body.toString(), 'api');
    });

    it('sets X-Forwarded-For/Proto/Host itself and drops the visitor’s own', async () => {
      const { upstream: to } = await upstream((req, res) => res.end(JSON.stringify(req.headers)));
      live('fwd', to);
      await settled();
      const res = await send(plane.port, `fwd.${DOMAIN}`, {
        headers: { 'x-forwarded-for': '6.6.6.6', 'x-forwarded-proto': 'gopher', 'x-forwarded-host': 'evil.example', forwarded: 'for=6.6.6.6', 'x-real-ip': '6.6.6.6' },
      });
      const headers = JSON.parse(res.body.toString()) as IncomingHttpHeaders;
      assert.equal(headers['x-forwarded-for'], '127.0.0.1');
      assert.equal(headers['x-forwarded-proto'], 'http');
      assert.equal(headers['x-forwarded-host'], `fwd.${DOMAIN}`);
      assert.equal(headers['forwarded'], undefined);
      assert.equal(headers['x-real-ip'], undefined);
    });

    it('refuses two Host headers with a 400 validation_error, never reaching an app', async () => {
      let reached = 0;
      const { upstream: to } = await upstream((_req, res) => {
        reached += 1;
        res.end('app');
      });
      live('twohosts', to);
      await settled();
      const answer = await raw(plane.port, `GET / HTTP/1.1\r\nHost: twohosts.${DOMAIN}\r\nHost: other.${DOMAIN}\r\nConnection: close\r\n\r\n`);
      assert.match(answer, /^HTTP\/1\.1 400 /);
      // Behind HAProxy too: its parser would refuse the pair with its built-in page, so the head goes
      // to Node raw, whose request guard answers (the real server's page for app hosts:
      // test/e2e/edge-refusals.test.ts).
      assert.equal(answer.slice(answer.indexOf('\r\n\r\n') + 4), JSON.stringify({ error: 'validation_error', message: 'the request has more than one Host header' }));
      assert.equal(reached, 0);
    });

    it('passes a WebSocket through to the app', async () => {
      const { server } = await upstream((_req, res) => res.end('plain'));
      const wss = new WebSocketServer({ server });
      wss.on('connection', (ws) => ws.on('message', (data) => ws.send(`echo:${String(data)}`)));
      live('ws', { host: '127.0.0.1', port: (server.address() as AddressInfo).port });
      await settled();
      const ws = new WebSocket(`ws://127.0.0.1:${plane.port}/chat`, { headers: { host: `ws.${DOMAIN}` } });
      try {
        await once(ws, 'open');
        ws.send('hello');
        const [reply] = (await Promise.race([once(ws, 'message'), sleep(10_000).then(() => [undefined])])) as [Buffer | undefined];
        assert.equal(String(reply), 'echo:hello');
      } finally {
        ws.terminate();
        for (const client of wss.clients) client.terminate();
      }
    });

    it('answers an app’s broken answer (HTTP/1.1 099) with the 502 page, and keeps serving', async () => {
      const tcp = createTcpServer((socket: Socket) => {
        socket.on('error', () => undefined);
        socket.once('data', () => socket.end('HTTP/1.1 099 Weird\r\nContent-Length: 2\r\n\r\nok'));
      });
      tcp.listen(0, '127.0.0.1');
      await once(tcp, 'listening');
      try {
        live('evil', { host: '127.0.0.1', port: (tcp.address() as AddressInfo).port });
        await settled();
        const res = await send(plane.port, `evil.${DOMAIN}`);
        assert.equal(res.status, 502);
        assert.equal(res.body.toString(), renderPage(badGatewayPage(`evil.${DOMAIN}`)));
        assert.equal((await send(plane.port, 'localhost')).body.toString(), 'api');
      } finally {
        tcp.close();
      }
    });

    it('answers an app that refuses the connection with the 502 page, while an app’s own 503 passes as it is', async () => {
      const probe = createTcpServer();
      probe.listen(0, '127.0.0.1');
      await once(probe, 'listening');
      const closedPort = (probe.address() as AddressInfo).port;
      await new Promise((resolve) => probe.close(resolve));
      live('refusing', { host: '127.0.0.1', port: closedPort });
      const { upstream: busy } = await upstream((_req, res) => {
        res.writeHead(503, { 'content-type': 'text/plain' });
        res.end('busy, says the app');
      });
      live('busy', busy);
      await settled();
      const refused = await send(plane.port, `refusing.${DOMAIN}`);
      assert.equal(refused.status, 502);
      assert.equal(refused.body.toString(), renderPage(badGatewayPage(`refusing.${DOMAIN}`)));
      assert.equal(refused.headers['x-slipway-answer'], undefined);
      const own = await send(plane.port, `busy.${DOMAIN}`);
      assert.equal(own.status, 503);
      assert.equal(own.body.toString(), 'busy, says the app');
    });

    it('switches a host to a new upstream: the in-flight request finishes on the old one, drain waits for it, none fails', async () => {
      let releaseSlow: () => void = () => {};
      const slowHeld = new Promise<void>((resolve) => (releaseSlow = resolve));
      const { upstream: oldUp } = await upstream((req, res) => {
        if (req.url === '/slow') void slowHeld.then(() => res.end('old-slow'));
        else res.end('old');
      });
      const { upstream: newUp } = await upstream((_req, res) => res.end('new'));
      live('switch', oldUp);
      await settled();
      const pidBefore = plane.haproxy?.pid;
      const slow = send(plane.port, `switch.${DOMAIN}`, { path: '/slow' });
      await sleep(200);
      live('switch', newUp);
      let drained = false;
      const draining = plane.drain(oldUp, 10_000).then(() => (drained = true));
      await settled();
      assert.equal((await send(plane.port, `switch.${DOMAIN}`)).body.toString(), 'new');
      await sleep(200);
      assert.equal(drained, false, 'drain resolved while a request was in flight');
      releaseSlow();
      assert.equal((await slow).body.toString(), 'old-slow');
      await draining;
      if (plane.haproxy !== undefined) assert.equal(plane.haproxy.pid, pidBefore, 'HAProxy was restarted or reloaded');
    });

    if (kind === 'haproxy') {
      it('HAProxy killed with SIGKILL is started again with every route', async () => {
        const { upstream: to } = await upstream((_req, res) => res.end('survivor'));
        live('survivor', to);
        await settled();
        const pid = plane.haproxy?.pid;
        assert.ok(pid !== undefined);
        process.kill(pid, 'SIGKILL');
        const deadline = Date.now() + 15_000;
        let served = '';
        while (Date.now() < deadline) {
          const res = await send(plane.port, `survivor.${DOMAIN}`).catch(() => undefined);
          if (res?.status === 200) {
            served = res.body.toString();
            break;
          }
          await sleep(100);
        }
        assert.equal(served, 'survivor');
        assert.notEqual(plane.haproxy?.pid, pid);
        // Changes after the restart go through the runtime API of the new process.
        const { upstream: next } = await upstream((_req, res) => res.end('after'));
        const pidAfter = plane.haproxy?.pid;
        live('survivor', next);
        await settled();
        assert.equal((await send(plane.port, `survivor.${DOMAIN}`)).body.toString(), 'after');
        assert.equal(plane.haproxy?.pid, pidAfter);
      });
    }
  });
}
