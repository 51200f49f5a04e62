// Integration tests for the embedded app proxy over real loopback sockets.
import { createHash, randomBytes } from 'node:crypto';
import { once } from 'node:events';
import {
  createServer,
  request as httpRequest,
  type IncomingHttpHeaders,
  type IncomingMessage,
  type OutgoingHttpHeaders,
  type RequestListener,
  type Server,
  type ServerResponse,
} from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import assert from 'node:assert/strict';
import { afterEach, describe, it } from 'node:test';
import { WebSocket, WebSocketServer } from 'ws';
import { AppProxy } from '../../src/proxy/app-proxy.js';
import { RoutingTable, type StreamTarget, type Upstream } from '../../src/proxy/routing-table.js';

const DOMAIN = 'apps.test';

interface Response {
  status: number;
  headers: IncomingHttpHeaders;
  body: Buffer;
}

interface RequestOptions {
  host: string;
  path?: string;
  method?: string;
  headers?: OutgoingHttpHeaders;
  body?: Buffer;
}

/** Everything a test started, closed in afterEach. */
const cleanups: Array<() => void> = [];

afterEach(() => {
  for (const cleanup of cleanups.splice(0).reverse()) cleanup();
});

async function listen(server: Server): Promise<number> {
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  cleanups.push(() => {
    server.closeAllConnections();
    server.close();
  });
  return (server.address() as AddressInfo).port;
}

async function startUpstream(handler: RequestListener): Promise<{ server: Server; upstream: Upstream }> {
  const server = createServer(handler);
  const port = await listen(server);
  return { server, upstream: { host: '127.0.0.1', port } };
}

/** An upstream that answers with a JSON description of the request it received. */
function startEchoUpstream(): Promise<{ server: Server; upstream: Upstream }> {
  return startUpstream((req, res) => {
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({ method: req.method, url: req.url, headers: req.headers }));
  });
}

/** A front server that gives the proxy the first chance, like the real one in front of Fastify. */
async function startFront(proxy: AppProxy): Promise<number> {
  const server = createServer((req, res) => {
    if (!proxy.handleRequest(req, res)) res.end('api');
  });
  server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    if (!proxy.handleUpgrade(req, socket, head)) socket.destroy();
  });
  return listen(server);
}

function makeProxy(table: RoutingTable, upstreamTimeoutMs?: number): AppProxy {
  const proxy = new AppProxy({ table, publicProtocol: 'https', upstreamTimeoutMs });
  cleanups.push(() => proxy.close());
  return proxy;
}

async function setup(): Promise<{ table: RoutingTable; proxy: AppProxy; port: number }> {
  const table = new RoutingTable(DOMAIN);
  const proxy = makeProxy(table);
  const port = await startFront(proxy);
  return { table, proxy, port };
}

function live(upstream: Upstream): { kind: 'app'; deploymentId: string; state: 'live'; upstreams: Upstream[] } {
  return { kind: 'app', deploymentId: `dep-${upstream.port}`, state: 'live', upstreams: [upstream] };
}

function send(port: number, options: RequestOptions): Promise<Response> {
  return new Promise((resolve, reject) => {
    const req = httpRequest({
      host: '127.0.0.1',
      port,
      method: options.method ?? 'GET',
      path: options.path ?? '/',
      headers: { ...options.headers, host: options.host },
      agent: false,
    });
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

async function sendJson(port: number, options: RequestOptions): Promise<{ status: number; json: EchoBody }> {
  const res = await send(port, options);
  return { status: res.status, json: JSON.parse(res.body.toString('utf8')) as EchoBody };
}

interface EchoBody {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
}

/** A port on loopback that refuses connections (was just bound, then closed). */
async function refusedPort(): Promise<number> {
  const server = createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const port = (server.address() as AddressInfo).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

function sha256(data: Buffer): string {
  return createHash('sha256').update(data).digest('hex');
}

describe('AppProxy routing', () => {
  it('routes by Host, ignoring the port and letter case, and keeps the original Host', async () => {
    const { table, port } = await setup();
    const { upstream } = await startEchoUpstream();
    table.set('web', live(upstream));

    const res = await sendJson(port, { host: 'WEB.Apps.Test:1234', path: '/hello' });
    assert.equal(res.status, 200);
    assert.equal(res.json.url, '/hello');
    assert.equal(res.json.headers.host, 'WEB.Apps.Test:1234');
  });

  it('returns false for hosts that are not app hosts, so the API serves them', async () => {
    const { table, port } = await setup();
    const { upstream } = await startEchoUpstream();
    table.set('web', live(upstream));

    for (const host of ['localhost', `127.0.0.1:${port}`, DOMAIN, `a.web.${DOMAIN}`, 'web.other.test']) {
      const res = await send(port, { host });
      assert.equal(res.body.toString(), 'api', host);
    }
  });

  it('answers 404 naming an unknown app, with the host HTML-escaped', async () => {
    const { port } = await setup();
    const res = await send(port, { host: `nope.${DOMAIN}` });
    assert.equal(res.status, 404);
    assert.equal(res.headers['content-type'], 'text/html; charset=utf-8');
    assert.equal(res.headers['cache-control'], 'no-store');
    assert.match(res.body.toString(), /nope\.apps\.test/);

    const escaped = await send(port, { host: `x<b>.${DOMAIN}` });
    assert.equal(escaped.status, 404);
    assert.ok(!escaped.body.toString().includes('x<b>'));
    assert.match(escaped.body.toString(), /x&#60;b&#62;\.apps\.test/);
  });

  it('answers 503 for stopped, failed and starting apps and for a disconnected tunnel', async () => {
    const { table, port } = await setup();
    table.set('stopped', { kind: 'app', deploymentId: 'd1', state: 'stopped' });
    table.set('failed', { kind: 'app', deploymentId: 'd2', state: 'failed' });
    table.set('starting', { kind: 'app', deploymentId: 'd3', state: 'starting' });
    table.set('tun', { kind: 'tunnel', tunnelId: 't1', state: 'disconnected' });

    for (const name of ['stopped', 'failed', 'starting']) {
      const res = await send(port, { host: `${name}.${DOMAIN}` });
      assert.equal(res.status, 503, name);
      assert.equal(res.headers['cache-control'], 'no-store');
      assert.match(res.body.toString(), new RegExp(`${name}\\.apps\\.test`));
    }
    const tunnel = await send(port, { host: `tun.${DOMAIN}` });
    assert.equal(tunnel.status, 503);
    assert.match(tunnel.body.toString(), /no tunnel client is connected/);
  });

  it('a starting app says so, with Retry-After; a JSON client gets {error, message} for every refusal', async () => {
    const { table, port } = await setup();
    table.set('starting', { kind: 'app', deploymentId: 'd3', state: 'starting' });
    table.set('stopped', { kind: 'app', deploymentId: 'd1', state: 'stopped' });

    const page = await send(port, { host: `starting.${DOMAIN}`, headers: { accept: 'text/html,application/json;q=0.9' } });
    assert.equal(page.status, 503);
    assert.equal(page.headers['content-type'], 'text/html; charset=utf-8');
    assert.equal(page.headers['retry-after'], '5');
    assert.match(page.body.toString(), /503 App starting/);
    assert.match(page.body.toString(), /starting\.apps\.test is starting/);

    const json = await send(port, { host: `starting.${DOMAIN}`, headers: { accept: 'application/json' } });
    assert.equal(json.status, 503);
    assert.equal(json.headers['content-type'], 'application/json; charset=utf-8');
    assert.equal(json.headers['retry-after'], '5');
    assert.deepEqual(JSON.parse(json.body.toString()), { error: 'app_starting', message: 'starting.apps.test is starting. Try again in a few seconds.' });

    const stopped = await send(port, { host: `stopped.${DOMAIN}`, headers: { accept: 'application/vnd.api+json' } });
    assert.equal(stopped.status, 503);
    assert.equal(stopped.headers['retry-after'], undefined);
    assert.equal(JSON.parse(stopped.body.toString()).error, 'app_unavailable');
    const unknown = await send(port, { host: `nope.${DOMAIN}`, headers: { accept: 'application/json' } });
    assert.equal(unknown.status, 404);
    assert.equal(JSON.parse(unknown.body.toString()).error, 'app_not_found');
  });

  it('answers 502 when the upstream refuses the connection', async () => {
    const { table, port } = await setup();
    table.set('web', live({ host: '127.0.0.1', port: await refusedPort() }));
    const res = await send(port, { host: `web.${DOMAIN}` });
    assert.equal(res.status, 502);
    assert.equal(res.headers['content-type'], 'text/html; charset=utf-8');
  });

  it('answers 504 when the upstream accepts but never responds in time', async () => {
    const table = new RoutingTable(DOMAIN);
    const proxy = makeProxy(table, 200);
    const port = await startFront(proxy);
    const { upstream } = await startUpstream(() => {
      // never answers
    });
    table.set('web', live(upstream));
    const res = await send(port, { host: `web.${DOMAIN}` });
    assert.equal(res.status, 504);
    assert.equal(proxy.inFlight(upstream), 0);
  });
});

describe('AppProxy forwarding', () => {
  it('streams a 20 MiB body both ways intact', async () => {
    const { table, port } = await setup();
    const { upstream } = await startUpstream((req, res) => {
      res.writeHead(200, { 'content-type': 'application/octet-stream' });
      req.pipe(res);
    });
    table.set('web', live(upstream));

    const body = randomBytes(20 * 1024 * 1024);
    const res = await send(port, { host: `web.${DOMAIN}`, method: 'POST', body });
    assert.equal(res.status, 200);
    assert.equal(res.body.length, body.length);
    assert.equal(sha256(res.body), sha256(body));
  });

  it('adds X-Forwarded-* and removes hop-by-hop headers in both directions', async () => {
    const { table, port } = await setup();
    const { upstream } = await startUpstream((req, res) => {
      res.setHeader('content-type', 'application/json');
      res.setHeader('connection', 'keep-alive, x-resp-hop');
      res.setHeader('x-resp-hop', 'gone');
      res.setHeader('proxy-authenticate', 'Basic');
      res.setHeader('x-resp-keep', 'kept');
      res.setHeader('set-cookie', ['a=1', 'b=2']);
      res.end(JSON.stringify({ method: req.method, url: req.url, headers: req.headers }));
    });
    table.set('web', live(upstream));

    const host = `web.${DOMAIN}:${port}`;
    const res = await send(port, {
      host,
      headers: {
        connection: 'keep-alive, x-hop',
        'x-hop': 'gone',
        'keep-alive': 'timeout=5',
        'proxy-authorization': 'Basic c2VjcmV0',
        te: 'trailers',
        'x-forwarded-for': '10.0.0.1',
        'x-forwarded-proto': 'http',
        'x-keep': 'kept',
      },
    });
    const seen = (JSON.parse(res.body.toString()) as EchoBody).headers;
    assert.equal(seen['x-forwarded-for'], '127.0.0.1');
    assert.equal(seen['x-forwarded-proto'], 'https');
    assert.equal(seen['x-forwarded-host'], host);
    assert.equal(seen.host, host);
    assert.equal(seen['x-keep'], 'kept');
    for (const name of ['x-hop', 'keep-alive', 'proxy-authorization', 'te']) assert.equal(seen[name], undefined, name);

    assert.equal(res.headers['x-resp-keep'], 'kept');
    assert.deepEqual(res.headers['set-cookie'], ['a=1', 'b=2']);
    assert.equal(res.headers['x-resp-hop'], undefined);
    assert.equal(res.headers['proxy-authenticate'], undefined);
  });

  it('preserves the method, path and query string', async () => {
    const { table, port } = await setup();
    const { upstream } = await startEchoUpstream();
    table.set('web', live(upstream));
    const res = await sendJson(port, { host: `web.${DOMAIN}`, method: 'DELETE', path: '/a/b%20c?x=1&y=%2F&x=2' });
    assert.equal(res.json.method, 'DELETE');
    assert.equal(res.json.url, '/a/b%20c?x=1&y=%2F&x=2');
  });

  it('reuses keep-alive connections to the upstream', async () => {
    const { table, port } = await setup();
    const { server, upstream } = await startEchoUpstream();
    let connections = 0;
    server.on('connection', () => (connections += 1));
    table.set('web', live(upstream));
    for (let i = 0; i < 5; i += 1) assert.equal((await send(port, { host: `web.${DOMAIN}` })).status, 200);
    assert.equal(connections, 1);
  });

  it('destroys the upstream request at once when the visitor aborts mid-response', async () => {
    const { table, proxy, port } = await setup();
    let upstreamClosed!: Promise<unknown>;
    const { upstream } = await startUpstream((_req, res) => {
      upstreamClosed = once(res, 'close');
      res.writeHead(200);
      res.write('first chunk');
      // ...and never finishes.
    });
    table.set('web', live(upstream));

    const req = httpRequest({ host: '127.0.0.1', port, headers: { host: `web.${DOMAIN}` }, agent: false });
    req.on('error', () => {});
    req.end();
    const [res] = (await once(req, 'response')) as [IncomingMessage];
    res.on('error', () => {});
    await once(res, 'data');
    assert.equal(proxy.inFlight(upstream), 1);
    req.destroy();
    await upstreamClosed;
    await waitFor(() => proxy.inFlight(upstream) === 0);
  });

  it('breaks the visitor response when the upstream dies mid-body', async () => {
    const { table, port } = await setup();
    const { upstream } = await startUpstream((_req, res) => {
      res.writeHead(200, { 'content-length': '1000' });
      res.write('partial');
      setTimeout(() => res.socket?.destroy(), 20);
    });
    table.set('web', live(upstream));
    await assert.rejects(send(port, { host: `web.${DOMAIN}` }));
  });
});

describe('AppProxy WebSocket upgrades', () => {
  it('passes a WebSocket through to the upstream and echoes messages', async () => {
    const { table, proxy, port } = await setup();
    const { server, upstream } = await startUpstream((_req, res) => res.end('not a socket'));
    const wss = new WebSocketServer({ server });
    cleanups.push(() => wss.close());
    let upgradeHeaders: IncomingHttpHeaders | undefined;
    let upgradeUrl: string | undefined;
    wss.on('connection', (socket, req) => {
      upgradeHeaders = req.headers;
      upgradeUrl = req.url;
      socket.on('message', (data, isBinary) => socket.send(data, { binary: isBinary }));
    });
    table.set('web', live(upstream));

    const client = new WebSocket(`ws://127.0.0.1:${port}/chat?room=1`, { headers: { host: `web.${DOMAIN}` } });
    cleanups.push(() => client.terminate());
    await once(client, 'open');
    assert.equal(upgradeUrl, '/chat?room=1');
    assert.equal(upgradeHeaders?.host, `web.${DOMAIN}`);
    assert.equal(upgradeHeaders?.['x-forwarded-for'], '127.0.0.1');
    assert.equal(upgradeHeaders?.['x-forwarded-proto'], 'https');
    assert.equal(proxy.inFlight(upstream), 1);

    const replies: string[] = [];
    client.on('message', (data: Buffer) => replies.push(data.toString()));
    for (const text of ['one', 'two', 'x'.repeat(100_000)]) client.send(text);
    await waitFor(() => replies.length === 3);
    assert.deepEqual(replies.slice(0, 2), ['one', 'two']);
    assert.equal(replies[2]?.length, 100_000);

    client.close();
    await once(client, 'close');
    await waitFor(() => proxy.inFlight(upstream) === 0);
  });

  it('refuses an upgrade to an unknown app with a 404 response', async () => {
    const { port } = await setup();
    const client = new WebSocket(`ws://127.0.0.1:${port}/`, { headers: { host: `nope.${DOMAIN}` } });
    client.on('error', () => {});
    const [, res] = (await once(client, 'unexpected-response')) as [unknown, IncomingMessage];
    assert.equal(res.statusCode, 404);
    res.resume();
    client.terminate();
  });

  it('answers a raw 502 when the upstream refuses the upgrade connection', async () => {
    const { table, port } = await setup();
    table.set('web', live({ host: '127.0.0.1', port: await refusedPort() }));
    const client = new WebSocket(`ws://127.0.0.1:${port}/`, { headers: { host: `web.${DOMAIN}` } });
    client.on('error', () => {});
    const [, res] = (await once(client, 'unexpected-response')) as [unknown, IncomingMessage];
    assert.equal(res.statusCode, 502);
    res.resume();
    client.terminate();
  });
});

describe('AppProxy release switches', () => {
  it('replicas: a busy replica is passed over for an idle one, and a refused replica is retried on another', async () => {
    const { table, port } = await setup();
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    let arrived!: () => void;
    const slowArrived = new Promise<void>((resolve) => (arrived = resolve));
    const { upstream: slow } = await startUpstream((_req, res) => {
      arrived();
      void held.then(() => res.end('slow'));
    });
    const { upstream: fast } = await startUpstream((_req, res) => res.end('fast'));
    table.set('web', { kind: 'app', deploymentId: 'dep-many', state: 'live', upstreams: [slow, fast] });
    // All idle: the first request takes the first replica (a fresh proxy's turn starts there); while
    // it is held there, every other request goes to the idle one.
    const first = send(port, { host: `web.${DOMAIN}` });
    await slowArrived;
    for (let i = 0; i < 5; i++) assert.equal((await send(port, { host: `web.${DOMAIN}` })).body.toString(), 'fast');
    release();
    assert.equal((await first).body.toString(), 'slow');

    const refused = { host: '127.0.0.1', port: await refusedPort() };
    table.set('web', { kind: 'app', deploymentId: 'dep-many', state: 'live', upstreams: [refused, fast] });
    for (let i = 0; i < 6; i++) assert.equal((await send(port, { host: `web.${DOMAIN}` })).body.toString(), 'fast');

    // A live route with no upstream at all (never published so) answers 503 rather than failing.
    table.set('web', { kind: 'app', deploymentId: 'dep-many', state: 'live', upstreams: [] });
    assert.equal((await send(port, { host: `web.${DOMAIN}` })).status, 503);
  });

  it('drain() waits for an in-flight slow request, then resolves', async () => {
    const { table, proxy, port } = await setup();
    let received!: () => void;
    const arrived = new Promise<void>((resolve) => (received = resolve));
    let finish!: () => void;
    const { upstream } = await startUpstream((_req, res) => {
      finish = () => res.end('slow');
      received();
    });
    table.set('web', live(upstream));

    const pending = send(port, { host: `web.${DOMAIN}` });
    await arrived;
    assert.equal(proxy.inFlight(upstream), 1);
    // The request is held until the test ends it, so the order is decided by events, not by a timer.
    let drained = false;
    const draining = proxy.drain(upstream, 30_000).then(() => {
      drained = true;
    });
    await new Promise((resolve) => setTimeout(resolve, 200));
    assert.equal(drained, false, 'drain resolved before the request finished');
    finish();
    await draining;
    assert.equal(proxy.inFlight(upstream), 0);
    const res = await pending;
    assert.equal(res.body.toString(), 'slow');
  });

  it('drain() gives up after its timeout', async () => {
    const { table, proxy, port } = await setup();
    const { upstream } = await startUpstream((_req, res) => {
      res.writeHead(200);
      res.write('streaming forever');
    });
    table.set('web', live(upstream));
    const req = httpRequest({ host: '127.0.0.1', port, headers: { host: `web.${DOMAIN}` }, agent: false });
    req.on('error', () => {});
    req.end();
    await once(req, 'response');
    const started = Date.now();
    await proxy.drain(upstream, 100);
    assert.ok(Date.now() - started >= 90);
    assert.equal(proxy.inFlight(upstream), 1);
    req.destroy();
  });

  it('completes a long request on the old upstream while new requests go to the new one', async () => {
    const { table, proxy, port } = await setup();
    let received!: () => void;
    const arrived = new Promise<void>((resolve) => (received = resolve));
    const old = await startUpstream((_req, res) => {
      received();
      setTimeout(() => res.end('old'), 300);
    });
    const next = await startUpstream((_req, res) => res.end('new'));
    table.set('web', live(old.upstream));

    const long = send(port, { host: `web.${DOMAIN}` });
    await arrived;
    table.set('web', live(next.upstream));
    const fresh = await send(port, { host: `web.${DOMAIN}` });
    assert.equal(fresh.body.toString(), 'new');
    assert.equal(proxy.inFlight(old.upstream), 1);

    await proxy.drain(old.upstream, 5_000);
    const finished = await long;
    assert.equal(finished.status, 200);
    assert.equal(finished.body.toString(), 'old');
  });

  it('retries a refused request once against the upstream the route switched to meanwhile', async () => {
    const table = new RoutingTable(DOMAIN);
    const proxy = makeProxy(table);
    const next = await startUpstream((req, res) => {
      res.end(`new got ${req.method} ${req.url}`);
    });
    table.set('web', live({ host: '127.0.0.1', port: await refusedPort() }));
    // The switch lands after the request was dispatched to the old (dead) upstream.
    const front = createServer((req, res) => {
      assert.ok(proxy.handleRequest(req, res));
      table.set('web', live(next.upstream));
    });
    const port = await listen(front);
    const res = await send(port, { host: `web.${DOMAIN}`, method: 'POST', path: '/x', body: Buffer.from('payload') });
    assert.equal(res.status, 200);
    assert.equal(res.body.toString(), 'new got POST /x');
  });
});

describe('AppProxy tunnels', () => {
  it('delegates requests and upgrades of a connected tunnel to its target', async () => {
    const { table, port } = await setup();
    const calls: string[] = [];
    const target: StreamTarget = {
      handleRequest(req: IncomingMessage, res: ServerResponse) {
        calls.push(`request ${req.url}`);
        res.end('from tunnel');
      },
      handleUpgrade(req: IncomingMessage, socket: Duplex) {
        calls.push(`upgrade ${req.url}`);
        socket.end('HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: test\r\n\r\n');
      },
      handleConnection(socket) {
        // Only the front door hands whole connections over; the AppProxy never does.
        calls.push('connection');
        socket.destroy();
      },
    };
    table.set('tun', { kind: 'tunnel', tunnelId: 't1', state: 'connected', target });

    const res = await send(port, { host: `tun.${DOMAIN}`, path: '/r' });
    assert.equal(res.body.toString(), 'from tunnel');

    const req = httpRequest({
      host: '127.0.0.1',
      port,
      path: '/u',
      headers: { host: `tun.${DOMAIN}`, connection: 'Upgrade', upgrade: 'test' },
      agent: false,
    });
    req.end();
    const [upgraded, socket] = (await once(req, 'upgrade')) as [IncomingMessage, Duplex];
    socket.destroy();
    assert.equal(upgraded.statusCode, 101);
    assert.deepEqual(calls, ['request /r', 'upgrade /u']);
  });
});

async function waitFor(condition: () => boolean, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}
