// Tunnels through each data plane's public port: a visitor's keep-alive requests reach the local app, and a tunnel that goes away is answered by Slipway.
import assert from 'node:assert/strict';
import http from 'node:http';
import net, { type AddressInfo, type Socket } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { eventually } from '../helpers/apps.js';
import { PLANES } from '../helpers/planes.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { runTunnelClient } from '../../src/tunnel/tunnel-client.js';

const DOMAIN = 'tunnels.test';

/** One GET through `agent` to the public port, as `host`; resolves with the status, the body and the visitor's socket. */
function get(port: number, host: string, agent: http.Agent | false, headers: http.OutgoingHttpHeaders = {}): Promise<{ status: number; body: string; socket: Socket }> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, path: '/', headers: { ...headers, host }, agent });
    req.setTimeout(20_000, () => req.destroy(new Error('no answer within 20 s')));
    req.on('error', reject);
    req.on('response', (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body, socket: req.socket as Socket }));
    });
    req.end();
  });
}

for (const plane of PLANES) describe(`tunnels through the public port (${plane} data plane)`, () => {
  let s: TestServer;
  let local: http.Server;
  const seen: Array<{ rawHeaders: string[]; socket: Socket }> = [];
  const stop = new AbortController();
  let subdomain: string;

  before(async () => {
    s = await startTestServer({ SLIPWAY_DOMAIN: DOMAIN, SLIPWAY_DATA_PLANE: plane });
    assert.equal(s.server.dataPlane, plane);
    local = http.createServer((req, res) => {
      if (req.url === '/download') {
        // 32 MiB, written as fast as the visitor takes it.
        const block = Buffer.alloc(64 * 1024, 0x62);
        let left = 512;
        res.setHeader('content-length', String(left * block.length));
        const pump = (): void => {
          while (left > 0) {
            left--;
            if (!res.write(block)) return void res.once('drain', pump);
          }
          res.end();
        };
        pump();
        return;
      }
      seen.push({ rawHeaders: req.rawHeaders, socket: req.socket });
      res.end('from the laptop\n');
    });
    await new Promise<void>((resolve) => local.listen(0, '127.0.0.1', () => resolve()));
    const user = await s.newUser('tunnel-edge');
    const connected = new Promise<string>((resolve) => {
      void runTunnelClient({
        serverUrl: s.url,
        apiKey: user.apiKey,
        port: (local.address() as AddressInfo).port,
        subdomain: `edge-${process.pid}`,
        signal: stop.signal,
        onEvent: (event) => {
          if (event.type === 'connected') resolve(event.subdomain);
        },
      }).catch(() => undefined);
    });
    subdomain = await Promise.race([connected, new Promise<never>((_, reject) => setTimeout(() => reject(new Error('the tunnel did not connect')), 30_000))]);
  });
  after(async () => {
    stop.abort();
    local.closeAllConnections();
    local.close();
    await s.close();
  });

  test('a visitor’s requests reach the local app with their headers, several over one connection', async () => {
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const visitorSockets = new Set<Socket>();
    seen.length = 0;
    try {
      // The route reaches the edge a moment after the tunnel connects: the first answer may come from the HTTP path.
      await eventually(async () => ((await get(s.port, `${subdomain}.${DOMAIN}`, false)).status === 200 ? true : undefined), 10_000, 'the tunnel’s host to answer');
      seen.length = 0;
      for (let i = 0; i < 3; i++) {
        const answer = await get(s.port, `${subdomain}.${DOMAIN}`, agent, { 'X-Mixed-Case': `yes-${i}` });
        assert.equal(answer.status, 200);
        assert.equal(answer.body, 'from the laptop\n');
        visitorSockets.add(answer.socket);
      }
    } finally {
      agent.destroy();
    }
    assert.equal(visitorSockets.size, 1);
    assert.equal(seen.length, 3);
    for (const [i, request] of seen.entries()) {
      // Header names are case-insensitive: HAProxy's HTTP path sends them in lower case.
      const at = request.rawHeaders.findIndex((name) => name.toLowerCase() === 'x-mixed-case');
      assert.notEqual(at, -1, `the header arrived as ${JSON.stringify(request.rawHeaders)}`);
      assert.equal(request.rawHeaders[at + 1], `yes-${i}`);
    }
  });

  test('visitors who abort downloads after the first chunk leave the tunnel serving: the next requests get 200', async () => {
    const host = `${subdomain}.${DOMAIN}`;
    await eventually(async () => ((await get(s.port, host, false)).status === 200 ? true : undefined), 10_000, 'the tunnel’s host to answer');
    // Twenty visitors at once, each gone after its first chunk (some with a reset, some with a FIN).
    const aborted = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        new Promise<string>((resolve, reject) => {
          const visitor = net.connect(s.port, '127.0.0.1');
          visitor.setTimeout(20_000, () => reject(new Error('no first chunk within 20 s')));
          visitor.on('error', () => undefined);
          visitor.write(`GET /download HTTP/1.1\r\nHost: ${host}\r\n\r\n`);
          visitor.once('data', (chunk: Buffer) => {
            if (i % 2 === 0) visitor.resetAndDestroy();
            else visitor.end();
            resolve(chunk.subarray(0, 12).toString('latin1'));
          });
        }),
      ),
    );
    for (const head of aborted) assert.equal(head, 'HTTP/1.1 200');
    const agent = new http.Agent({ keepAlive: true, maxSockets: 4 });
    try {
      const answers = [];
      for (let i = 0; i < 5; i++) answers.push(await get(s.port, host, false));
      answers.push(...(await Promise.all(Array.from({ length: 5 }, () => get(s.port, host, agent)))));
      for (const answer of answers) {
        assert.equal(answer.status, 200, answer.body);
        assert.equal(answer.body, 'from the laptop\n');
      }
    } finally {
      agent.destroy();
    }
  });

  test('a kept-alive visitor connection that served another tunnel is served on for this one, after aborted downloads', async () => {
    // A black-box client pools connections by address (127.0.0.1:port), whatever the Host: one
    // connection carries an API call, another tunnel's request, then this tunnel's. Behind HAProxy
    // the requests to hosts under the domain share one connection to Node, first routed to the
    // other tunnel: Node refused the next host with a 400 (the Node plane routed the visitor
    // connection on its first, API, request and served all of them).
    const host = `${subdomain}.${DOMAIN}`;
    const other = new AbortController();
    const otherConnected = new Promise<string>((resolve) => {
      void s.newUser('tunnel-edge-other').then((user) =>
        runTunnelClient({
          serverUrl: s.url,
          apiKey: user.apiKey,
          port: (local.address() as AddressInfo).port,
          subdomain: `edge-other-${process.pid}`,
          signal: other.signal,
          onEvent: (event) => {
            if (event.type === 'connected') resolve(event.subdomain);
          },
        }).catch(() => undefined),
      );
    });
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    try {
      const otherHost = `${await Promise.race([otherConnected, new Promise<never>((_, reject) => setTimeout(() => reject(new Error('the other tunnel did not connect')), 30_000))])}.${DOMAIN}`;
      await eventually(async () => ((await get(s.port, otherHost, false)).status === 200 ? true : undefined), 10_000, 'the other tunnel’s host to answer');
      const aborted = await Promise.all(
        Array.from({ length: 20 }, () =>
          new Promise<string>((resolve, reject) => {
            const visitor = net.connect(s.port, '127.0.0.1');
            visitor.setTimeout(20_000, () => reject(new Error('no first chunk within 20 s')));
            visitor.on('error', () => undefined);
            visitor.write(`GET /download HTTP/1.1\r\nHost: ${host}\r\nConnection: keep-alive\r\n\r\n`);
            visitor.once('data', (chunk: Buffer) => {
              visitor.destroy();
              resolve(chunk.subarray(0, 12).toString('latin1'));
            });
          }),
        ),
      );
      for (const head of aborted) assert.equal(head, 'HTTP/1.1 200');
      const sockets = new Set<Socket>();
      const api = await get(s.port, `127.0.0.1:${s.port}`, agent);
      sockets.add(api.socket);
      const first = await get(s.port, otherHost, agent);
      assert.equal(first.status, 200, first.body);
      sockets.add(first.socket);
      for (let i = 0; i < 10; i++) {
        const answer = await get(s.port, host, agent);
        assert.equal(answer.status, 200, answer.body);
        assert.equal(answer.body, 'from the laptop\n');
        sockets.add(answer.socket);
      }
      assert.equal(sockets.size, 1, 'every request went over one visitor connection');
    } finally {
      agent.destroy();
      other.abort();
    }
  });

  test('once the tunnel is gone, its host is answered by Slipway (503), not left hanging', async () => {
    stop.abort();
    await eventually(async () => {
      const answer = await get(s.port, `${subdomain}.${DOMAIN}`, false);
      assert.equal(answer.status, 503);
      assert.match(answer.body, new RegExp(`${subdomain}\\.${DOMAIN.replace('.', '\\.')}`));
      return true;
    }, 15_000, 'a 503 for the gone tunnel');
  });
});
