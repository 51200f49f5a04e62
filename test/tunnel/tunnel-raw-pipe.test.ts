// Tunnels' raw pipe: visitor connections handed whole to a tunnel (forwarded headers per request, framing refused, host changes, keep-alive, declined upgrades, drops).
import assert from 'node:assert/strict';
import { once } from 'node:events';

import { createServer as createTcpServer, type AddressInfo, type Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, it } from 'node:test';
import { PLANES } from '../helpers/planes.js';
import { startLocalApp, type LocalApp } from '../helpers/tunnel-app.js';
import { DOMAIN, startClient, startStack, waitFor, type Client, type Stack } from '../helpers/tunnel-stack.js';
import { rawVisitor, visitorAgent } from '../helpers/tunnel-visitors.js';

let app: LocalApp;
before(async () => {
  app = await startLocalApp();
});
after(async () => {
  visitorAgent.destroy();
  await app.close();
});

for (const plane of PLANES) describe(`tunnel: the raw pipe (visitor connections served whole) (${plane} data plane)`, () => {
  let stack: Stack;
  let client: Client;
  let rawApp: { port: number; received: string[]; close(): Promise<void> };
  const host = (name: string): string => `${name}.${DOMAIN}`;

  before(async () => {
    stack = await startStack({ plane, idleTimeoutMs: 400 });
    const key = stack.authority.addKey('user-a').key;
    client = startClient(stack, { apiKey: key, port: app.port, subdomain: 'rawpipe' });
    await client.connected();
    // An app that declines every upgrade (426) and keeps its connection open, recording what it got.
    const received: string[] = [];
    const sockets: Socket[] = [];
    const server = createTcpServer((socket) => {
      sockets.push(socket);
      let seen = '';
      socket.setEncoding('latin1');
      socket.on('data', (chunk: string) => {
        seen += chunk;
        received.push(chunk);
        if (seen.includes('\r\n\r\n')) {
          seen = '';
          socket.write('HTTP/1.1 426 Upgrade Required\r\nContent-Length: 2\r\n\r\nno');
        }
      });
      socket.on('error', () => {});
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    rawApp = {
      port: (server.address() as AddressInfo).port,
      received,
      close: async () => {
        for (const socket of sockets) socket.destroy();
        await new Promise((resolve) => server.close(resolve));
      },
    };
  });
  after(async () => {
    await client.stop();
    await stack.close();
    await rawApp.close();
  });

  it('sets X-Forwarded-* on every request of a kept-alive connection and drops the visitor\'s own', async () => {
    const visitor = await rawVisitor(stack.port);
    for (let i = 1; i <= 2; i++) {
      visitor.socket.write(`GET /headers HTTP/1.1\r\nHost: ${host('rawpipe')}\r\nX-Forwarded-For: 6.6.6.6\r\nForwarded: for=6.6.6.6\r\nX-Real-IP: 6.6.6.6\r\n\r\n`);
      const text = await visitor.waitFor(new RegExp(`(HTTP/1.1 200[^]*?\\r\\n\\r\\n\\{[^]*?\\}\\}){${i}}`), `answer ${i}`);
      const bodies = [...text.matchAll(/\r\n\r\n(\{.*?\}\})/g)].map((m) => JSON.parse(m[1] as string) as { headers: Record<string, string> });
      const headers = bodies[i - 1]?.headers;
      assert.equal(headers?.['x-forwarded-for'], '127.0.0.1');
      assert.equal(headers?.['x-forwarded-proto'], 'http');
      assert.equal(headers?.['forwarded'], undefined);
      assert.equal(headers?.['x-real-ip'], undefined);
    }
    visitor.socket.destroy();
  });

  it('refuses ambiguous framing with a 400 (Slipway’s page: an app host) and forwards nothing of it', async () => {
    const before = app.connections;
    const visitor = await rawVisitor(stack.port);
    visitor.socket.write(`POST /echo HTTP/1.1\r\nHost: ${host('rawpipe')}\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /hello HTTP/1.1\r\nHost: ${host('rawpipe')}\r\n\r\n`);
    await visitor.closed;
    // HAProxy settles the ambiguity itself before Node sees it (RFC 9112 §6.3: chunked wins, the
    // Content-Length is dropped and the connection closes after the answer); Node refuses it.
    if (plane === 'node') assert.match(visitor.received(), /^HTTP\/1\.1 400 [^]*<h1>400 Bad request<\/h1><p>This request could not be read: malformed HTTP request\.<\/p>/);
    else assert.match(visitor.received(), /^HTTP\/1\.1 (400|200) /);
    assert.doesNotMatch(visitor.received(), /hello from the app/);
    // The stream's connection to the app may have opened, but no request reached it.
    assert.ok(app.connections - before <= 1);
  });

  it('hands a later request on the connection that names another host to the HTTP server, which routes it on its own Host', async () => {
    // Clients pool connections by address, whatever the Host; behind HAProxy one connection to Node
    // carries every request of a visitor connection to hosts under the domain.
    const visitor = await rawVisitor(stack.port);
    visitor.socket.write(`GET /hello HTTP/1.1\r\nHost: ${host('rawpipe')}\r\n\r\n`);
    await visitor.waitFor(/hello from the app/, 'first answer');
    visitor.socket.write(`GET /hello HTTP/1.1\r\nHost: ${host('other')}\r\n\r\nGET /hello HTTP/1.1\r\nHost: ${host('rawpipe')}\r\n\r\n`);
    await visitor.waitFor(/hello from the app[^]*HTTP\/1\.1 404 [^]*hello from the app/, 'the other host’s 404, then the tunnel’s answer again');
    assert.doesNotMatch(visitor.received(), /HTTP\/1\.1 400/);
    visitor.socket.destroy();
  });

  it('closes a connection idle between requests after the keep-alive timeout, but never cuts a slow answer', async () => {
    const visitor = await rawVisitor(stack.port);
    visitor.socket.write(`GET /slow HTTP/1.1\r\nHost: ${host('rawpipe')}\r\n\r\n`);
    await sleep(1000); // well past the 400 ms idle bound: the answer is due, so the connection stays
    assert.equal(visitor.socket.destroyed, false);
    app.releaseSlow();
    await visitor.waitFor(/slow done/, 'slow answer');
    const started = Date.now();
    await visitor.closed; // now idle: closed by the server
    assert.ok(Date.now() - started < 4000);
  });

  it('ends the connection when the app declines an upgrade, and forwards nothing after it', async () => {
    const key = stack.authority.addKey('user-b').key;
    const decliner = startClient(stack, { apiKey: key, port: rawApp.port, subdomain: 'decliner' });
    try {
      await decliner.connected();
      const visitor = await rawVisitor(stack.port);
      const handshake = 'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n';
      visitor.socket.write(`GET /ws HTTP/1.1\r\nHost: ${host('decliner')}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n${handshake}\r\n`);
      await visitor.waitFor(/426 Upgrade Required[^]*no$/, 'the refusal');
      visitor.socket.write(`GET /next HTTP/1.1\r\nHost: ${host('decliner')}\r\nX-Forwarded-For: 6.6.6.6\r\n\r\n`);
      await visitor.closed;
      await sleep(100);
      const seen = rawApp.received.join('');
      assert.match(seen, /GET \/ws HTTP\/1\.1/);
      assert.doesNotMatch(seen, /6\.6\.6\.6/);
      // Node's raw pipe ends the connection with the refusal. HAProxy goes on parsing the visitor's
      // requests itself (the upgrade did not happen), so a later one arrives as any request does,
      // on a fresh connection to Node, with the edge's headers.
      if (plane === 'node') assert.doesNotMatch(seen, /\/next/);
      else assert.doesNotMatch(seen, /GET \/next HTTP\/1\.1\r\n(?![^]*?X-Forwarded-For: 127\.0\.0\.1\r\n)/);
    } finally {
      await decliner.stop();
    }
  });

  it('gives a connection idle when its tunnel drops back to the HTTP server: its next request gets the 503 page', async () => {
    const key = stack.authority.addKey('user-c').key;
    const dropping = startClient(stack, { apiKey: key, port: app.port, subdomain: 'dropping' });
    await dropping.connected();
    const visitor = await rawVisitor(stack.port);
    visitor.socket.write(`GET /hello HTTP/1.1\r\nHost: ${host('dropping')}\r\n\r\n`);
    await visitor.waitFor(/hello from the app/, 'first answer');
    await dropping.stop();
    await waitFor(() => stack.table.get('dropping')?.state === 'disconnected', 2000, 'route disconnected');
    visitor.socket.write(`GET /hello HTTP/1.1\r\nHost: ${host('dropping')}\r\n\r\n`);
    await visitor.waitFor(/HTTP\/1\.1 503[^]*no tunnel client is connected/, 'the 503 page on the same connection');
    visitor.socket.destroy();
  });
});
