// Tunnels across failures: an app closing or timing out its connections, the server restarting, a link dropping under an upload or going dead (heartbeats).
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, request, type IncomingMessage } from 'node:http';
import { createServer as createTcpServer, type AddressInfo, type Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, it } from 'node:test';
import { PLANES } from '../helpers/planes.js';
import { patternStream, startLocalApp, type LocalApp } from '../helpers/tunnel-app.js';
import { DOMAIN, FakeAuthority, startClient, startStack, waitFor } from '../helpers/tunnel-stack.js';
import { MiB, startBlackholeProxy, visit, visitorAgent } from '../helpers/tunnel-visitors.js';

let app: LocalApp;
before(async () => {
  app = await startLocalApp();
});
after(async () => {
  visitorAgent.destroy();
  await app.close();
});

for (const plane of PLANES) describe(`tunnel: the app's connections and link failures (${plane} data plane)`, () => {
  it('keeps serving when the app closes idle kept-alive connections on its own', async () => {
    // A bare HTTP/1.1 app without a Keep-Alive hint that drops connections idle for 100 ms.
    let connections = 0;
    const bare = createTcpServer((socket) => {
      connections++;
      socket.setTimeout(100, () => socket.destroy());
      let buffered = '';
      socket.on('data', (chunk: Buffer) => {
        buffered += chunk.toString('latin1');
        while (buffered.includes('\r\n\r\n')) {
          buffered = buffered.slice(buffered.indexOf('\r\n\r\n') + 4);
          socket.write('HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nbare');
        }
      });
      socket.on('error', () => {});
    });
    bare.listen(0, '127.0.0.1');
    await once(bare, 'listening');
    try {
      const stack = await startStack({ plane });
      const client = startClient(stack, { apiKey: stack.authority.addKey('u').key, port: (bare.address() as AddressInfo).port, subdomain: 'bare' });
      try {
        await client.connected();
        for (let i = 0; i < 4; i++) {
          const [a, b] = await Promise.all([visit(stack.port, 'bare', '/'), visit(stack.port, 'bare', '/')]);
          assert.deepEqual([a.status, a.body.toString(), b.status, b.body.toString()], [200, 'bare', 200, 'bare']);
          await sleep(250);
        }
        assert.ok(connections >= 4, `${connections} connections`);
        await waitFor(() => stack.server.list('u')[0]?.streams === 0, 2000, 'streams freed');
      } finally {
        await client.stop();
        await stack.close();
      }
    } finally {
      // A server left listening would keep the test process alive until the file's timeout.
      bare.close();
    }
  });

  it("honours the app's Keep-Alive timeout: a connection it will close within a second is not reused", async () => {
    // `timeout=1`: the app closes idle connections after a second, so the server keeps none (it
    // stops reusing a second early, as Node's Agent does); `timeout=30`: the stream is reused.
    let connections = 0;
    let hint = 'timeout=1';
    const hinting = createServer((_req, res) => {
      res.writeHead(200, { 'content-length': '2', 'keep-alive': hint });
      res.end('ok');
    });
    hinting.on('connection', () => connections++);
    hinting.listen(0, '127.0.0.1');
    await once(hinting, 'listening');
    const stack = await startStack({ plane });
    const client = startClient(stack, { apiKey: stack.authority.addKey('u').key, port: (hinting.address() as AddressInfo).port, subdomain: 'hint' });
    await client.connected();
    for (let i = 0; i < 3; i++) assert.equal((await visit(stack.port, 'hint', '/')).status, 200);
    assert.equal(connections, 3, 'one app connection per request');
    hint = 'timeout=30';
    for (let i = 0; i < 3; i++) assert.equal((await visit(stack.port, 'hint', '/')).status, 200);
    assert.equal(connections, 4, 'one more app connection, then reused');
    await client.stop();
    await stack.close();
    hinting.closeAllConnections();
    hinting.close();
  });

  it('reconnects after the server restarts on the same port, keeping its random name', async () => {
    const authority = new FakeAuthority();
    const { key } = authority.addKey('u');
    const first = await startStack({ plane, authority });
    const client = startClient(first, { apiKey: key, port: app.port });
    const { subdomain } = await client.connected();
    assert.match(subdomain, /^[a-z0-9]{8}$/);
    await first.close();
    await waitFor(() => client.events.find((e) => e.type === 'disconnected'), 3000, 'disconnected event');
    const second = await startStack({ plane, authority, port: first.port });
    const again = await client.connected(2);
    assert.equal(again.subdomain, subdomain);
    assert.equal((await visit(second.port, subdomain, '/hello')).status, 200);
    await client.stop();
    await second.close();
  });

  it('a tunnel that drops under a paused upload answers 502, and the visitor\'s connection closes once the visitor leaves', async () => {
    // The app does not read the body (/slow), so the upload stops within the window and the bridge
    // pauses the connection; then the tunnel drops. The connection, answered with a 502 page,
    // must still see its visitor go: left paused, it stayed open forever (and so did the server's
    // close, and behind HAProxy the upload hung until the file's timeout).
    const stack = await startStack({ plane, heartbeatMs: 60_000 });
    const client = startClient(stack, { apiKey: stack.authority.addKey('u').key, port: app.port, subdomain: 'upload' });
    let piped: Socket | undefined;
    try {
      await client.connected();
      const seen = app.slowSeen;
      const body = patternStream(256 * MiB);
      const req = request({ host: '127.0.0.1', port: stack.port, path: '/slow', method: 'POST', headers: { host: `upload.${DOMAIN}` }, agent: false });
      req.on('error', () => {});
      body.pipe(req);
      const status = new Promise<number>((resolve, reject) => {
        req.once('response', (res: IncomingMessage) => {
          res.resume();
          res.once('end', () => resolve(res.statusCode ?? 0));
          res.once('error', reject);
        });
        req.once('error', reject);
      });
      await waitFor(() => app.slowSeen > seen, 20_000, 'the app to receive the upload');
      const socket = await waitFor(() => stack.piped.at(-1), 20_000, 'the upload on the raw pipe');
      piped = socket;
      await waitFor(() => socket.isPaused(), 20_000, 'the upload paused for credit');
      for (const upgraded of stack.upgrades) upgraded.destroy();
      assert.equal(await status, 502);
      req.destroy();
      body.destroy();
      await waitFor(() => socket.destroyed, 20_000, 'the answered connection to close once the visitor left (it stayed paused)');
    } finally {
      piped?.destroy(); // else a failure here would leave the server's close() waiting for it
      app.releaseSlow();
      await client.stop();
      await stack.close();
    }
  });

  it('heartbeats detect a dead link on both ends; the client reconnects with the same name', async () => {
    const stack = await startStack({ plane, heartbeatMs: 150 });
    const proxy = await startBlackholeProxy(stack.port);
    const client = startClient(stack, { apiKey: stack.authority.addKey('u').key, port: app.port, subdomain: 'pulse', serverUrl: `http://127.0.0.1:${proxy.port}` });
    // Bounds are generous (a loaded machine delays timers); the heartbeat itself stays at 150 ms.
    try {
      await client.connected();
      // One answered visit: the client's pong to the first ping (sent before it) has arrived too, so
      // the server knows the tunnel was live and holds its name through the drop.
      assert.equal((await visit(stack.port, 'pulse', '/hello')).status, 200);
      const dead = stack.table.get('pulse');
      assert.ok(dead?.kind === 'tunnel');
      proxy.blackhole(); // packets vanish, nobody sees a close
      // Noticed by the server (the name held for its owner, or released when the drop came before
      // it saw the client's answer to a ping), or first by the client, which is then back under a
      // new connection: either way the dead link no longer serves the name.
      await waitFor(
        () => {
          const route = stack.table.get('pulse');
          return route?.state !== 'connected' || route.tunnelId !== dead.tunnelId;
        },
        10_000,
        'dead link noticed',
      );
      await waitFor(() => client.events.find((e) => e.type === 'disconnected'), 10_000, 'client noticed');
      await client.connected(2);
      assert.equal((await visit(stack.port, 'pulse', '/hello')).status, 200);
    } finally {
      await client.stop();
      proxy.close();
      await stack.close();
    }
  });
});
