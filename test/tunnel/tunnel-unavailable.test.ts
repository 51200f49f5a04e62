// Tunnels whose local app is unavailable: 502 pages when it refuses or answers nonsense, 503 while no client is connected, 404 after the grace period.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import type { IncomingMessage } from 'node:http';
import { createServer as createTcpServer, type AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import WebSocket from 'ws';
import { freePort } from '../helpers/net.js';
import { startLocalApp, type LocalApp } from '../helpers/tunnel-app.js';
import { DOMAIN, startClient, startStack, waitFor, type Stack } from '../helpers/tunnel-stack.js';
import { visit, visitorAgent } from '../helpers/tunnel-visitors.js';

let app: LocalApp;
before(async () => {
  app = await startLocalApp();
});
after(async () => {
  visitorAgent.destroy();
  await app.close();
});

// Visitors are served through the front door's raw pipe (the public port, HAProxy's hand-off) and
// through the HTTP server (the Node plane's TLS port): the same behaviour either way.
// Behind HAProxy, a tunnel's visitors always reach Node through the front door (there is no TLS port of Node's own).
const VISITOR_PATHS = [['raw pipe', false, 'node'], ['HTTP server', true, 'node'], ['raw pipe', false, 'haproxy']] as const;
for (const [path, httpOnly, plane] of VISITOR_PATHS) {
  describe(`tunnel: unavailable apps (${path}, ${plane} data plane)`, () => {
    let stack: Stack;
    let key: string;
    before(async () => {
      stack = await startStack({ plane, graceMs: 600, httpOnly });
      key = stack.authority.addKey('user-a').key;
    });
    after(() => stack.close());
  
    it('answers 502 with a page while the local app refuses connections', async () => {
      const client = startClient(stack, { apiKey: key, port: await freePort(), subdomain: 'down' });
      await client.connected();
      const page = await visit(stack.port, 'down', '/');
      assert.equal(page.status, 502);
      assert.match(String(page.headers['content-type']), /text\/html/);
      assert.match(page.body.toString(), /Bad gateway/);
      const upgrade = new WebSocket(`ws://127.0.0.1:${stack.port}/`, { headers: { host: `down.${DOMAIN}` } });
      const [, res] = (await once(upgrade, 'unexpected-response')) as [unknown, IncomingMessage];
      assert.equal(res.statusCode, 502);
      upgrade.on('error', () => {});
      upgrade.terminate();
      await client.stop();
    });
  
    it('answers 502 when the local app answers a status Node cannot pass on (099), and keeps serving', async () => {
      const evil = createTcpServer((socket) => {
        socket.on('error', () => {});
        socket.once('data', () => socket.end('HTTP/1.1 099 Weird\r\nContent-Length: 2\r\n\r\nok'));
      });
      evil.listen(0, '127.0.0.1');
      await once(evil, 'listening');
      const client = startClient(stack, { apiKey: key, port: (evil.address() as AddressInfo).port, subdomain: 'weird' });
      await client.connected();
      try {
        for (let i = 0; i < 2; i++) {
          const page = await visit(stack.port, 'weird', '/');
          assert.equal(page.status, 502);
          assert.match(page.body.toString(), /Bad gateway/);
        }
      } finally {
        await client.stop();
        evil.close();
      }
    });
  
    it('answers 503 while no client is connected, then 404 once the grace period ends', async () => {
      const client = startClient(stack, { apiKey: key, port: app.port, subdomain: 'away' });
      await client.connected();
      assert.equal((await visit(stack.port, 'away', '/hello')).status, 200);
      await client.stop();
      await waitFor(() => stack.table.get('away')?.state === 'disconnected', 2000, 'route disconnected');
      const page = await visit(stack.port, 'away', '/hello');
      assert.equal(page.status, 503);
      assert.match(page.body.toString(), /no tunnel client is connected/);
      assert.equal(stack.server.list('user-a')[0]?.state, 'disconnected');
      await waitFor(() => stack.table.get('away') === undefined, 3000, 'route released');
      assert.equal((await visit(stack.port, 'away', '/hello')).status, 404);
      assert.equal(stack.authority.claims.has('away'), false);
    });
  });
}
