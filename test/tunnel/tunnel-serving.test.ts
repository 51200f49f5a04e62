// Tunnels serving visitors end to end (real sockets, each visitor path and data plane): the announced URL, GET/POST with forwarded headers, kept-alive and concurrent requests, WebSocket upgrades, visitors who abort.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { request, type IncomingMessage } from 'node:http';
import { Readable } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import WebSocket from 'ws';
import type { TunnelOwner } from '../../src/tunnel/tunnel-server.js';
import { startLocalApp, type LocalApp } from '../helpers/tunnel-app.js';
import { DOMAIN, startClient, startStack, waitFor, type Client, type Stack } from '../helpers/tunnel-stack.js';
import { MiB, visit, visitorAgent } from '../helpers/tunnel-visitors.js';

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
  describe(`tunnel: serving visitors (${path}, ${plane} data plane)`, () => {
    let stack: Stack;
    let client: Client;
    let name: string;
    let owner: TunnelOwner;
  
    before(async () => {
      stack = await startStack({ plane, httpOnly });
      const created = stack.authority.addKey('user-a');
      owner = created.owner;
      client = startClient(stack, { apiKey: created.key, port: app.port, subdomain: 'demo' });
      const ready = await client.connected();
      name = ready.subdomain;
    });
    after(async () => {
      await client.stop();
      await stack.close();
    });
  
    it('announces the public URL, lists the tunnel and marks the key used', async () => {
      const ready = await client.connected();
      assert.equal(ready.subdomain, 'demo');
      assert.equal(ready.url, `http://demo.localhost:${stack.port}`);
      const [info, ...rest] = stack.server.list('user-a');
      assert.equal(rest.length, 0);
      assert.equal(info?.subdomain, 'demo');
      assert.equal(info?.state, 'connected');
      assert.equal(info?.apiKeyId, owner.apiKeyId);
      assert.deepEqual(stack.server.list('user-b'), []);
      assert.ok(stack.authority.lastUsed.has(owner.apiKeyId));
      assert.equal(stack.table.get('demo')?.kind, 'tunnel');
    });
  
    it('serves GET and POST, with forwarded headers, and logs each request', async () => {
      const hello = await visit(stack.port, name, '/hello');
      assert.equal(hello.status, 200);
      assert.equal(hello.body.toString(), 'hello from the app');
      assert.deepEqual(hello.headers['set-cookie'], ['a=1', 'b=2']);
  
      const headers = await visit(stack.port, name, '/headers?q=1', { headers: { 'x-forwarded-for': '10.0.0.9' } });
      const seen = JSON.parse(headers.body.toString()) as { url: string; headers: Record<string, string> };
      assert.equal(seen.url, '/headers?q=1');
      assert.equal(seen.headers['host'], `demo.localhost:${stack.port}`);
      assert.equal(seen.headers['x-forwarded-host'], `demo.localhost:${stack.port}`);
      assert.equal(seen.headers['x-forwarded-proto'], 'http');
      assert.equal(seen.headers['x-forwarded-for'], '127.0.0.1');
  
      const body = randomBytes(300_000);
      const echoed = await visit(stack.port, name, '/echo', { method: 'POST', body, headers: { 'content-type': 'application/x-test' } });
      assert.equal(echoed.status, 200);
      assert.equal(echoed.headers['content-type'], 'application/x-test');
      assert.ok(echoed.body.equals(body));
  
      // A chunked upload (no Content-Length) arrives whole, also with a method that has no body by default.
      const chunked = await visit(stack.port, name, '/echo', { method: 'POST', body: Readable.from([Buffer.from('a'), Buffer.from('bc')]) });
      assert.equal(chunked.body.toString(), 'abc');
      const chunkedGet = await visit(stack.port, name, '/echo', { body: Readable.from([Buffer.from('d'), Buffer.from('ef')]), headers: { 'transfer-encoding': 'chunked' } });
      assert.equal(chunkedGet.body.toString(), 'def');
      assert.equal((await visit(stack.port, name, '/hello')).body.toString(), 'hello from the app');
  
      const missing = await visit(stack.port, name, '/nope');
      assert.equal(missing.status, 404);
  
      const logged = await waitFor(
        () => client.events.find((e) => e.type === 'request' && e.path === '/nope'),
        2000,
        'request log',
      );
      assert.deepEqual({ ...logged, ms: 0 }, { type: 'request', method: 'GET', path: '/nope', status: 404, ms: 0 });
    });
  
    it('carries sequential requests over one kept-alive connection to the app', async () => {
      const before = app.connections;
      for (let i = 0; i < 20; i++) {
        const result = i % 2 === 0 ? await visit(stack.port, name, '/hello') : await visit(stack.port, name, '/echo', { method: 'POST', body: Buffer.from(`body ${i}`) });
        assert.equal(`${result.status} ${result.body.toString()}`, i % 2 === 0 ? "200 hello from the app" : `200 body ${i}`);
      }
      assert.ok(app.connections - before <= 1, `${app.connections - before} new connections to the app`);
      assert.equal(stack.server.list('user-a')[0]?.streams, 0);
    });
  
    it('serves 50 concurrent requests, each with its own answer', async () => {
      const bodies = Array.from({ length: 50 }, (_, i) => randomBytes(1000 + i * 5000));
      const results = await Promise.all(bodies.map((body) => visit(stack.port, name, '/echo', { method: 'POST', body })));
      results.forEach((result, i) => {
        assert.equal(result.status, 200);
        assert.ok(result.body.equals(bodies[i] as Buffer), `body ${i}`);
      });
      await waitFor(() => stack.server.list('user-a')[0]?.streams === 0, 2000, 'streams freed');
    });
  
    it('passes WebSocket upgrades through to the local app', async () => {
      const ws = new WebSocket(`ws://127.0.0.1:${stack.port}/socket?x=1`, { headers: { host: `${name}.${DOMAIN}` }, perMessageDeflate: false });
      const messages: string[] = [];
      ws.on('message', (data) => messages.push(data.toString()));
      await once(ws, 'open');
      ws.send('ping 1');
      const big = randomBytes(2 * MiB);
      ws.send(big);
      const bigEcho = new Promise<Buffer>((resolve) => ws.on('message', (data, isBinary) => isBinary && resolve(data as Buffer)));
      assert.ok((await bigEcho).equals(big));
      await waitFor(() => messages.length >= 2, 2000, 'echo');
      assert.deepEqual(messages.slice(0, 2), ['welcome /socket?x=1', 'ping 1']);
      ws.close();
      await once(ws, 'close');
      await waitFor(() => stack.server.list('user-a')[0]?.streams === 0, 2000, 'upgrade stream freed');
      const logged = client.events.find((e) => e.type === 'request' && e.path === '/socket?x=1');
      assert.equal(logged?.type === 'request' ? logged.status : 0, 101);
    });
  
    it('frees a stream at once when the visitor aborts, 20 times over, and keeps serving', async () => {
      const abortedBefore = app.aborted;
      for (let i = 0; i < 20; i++) {
        const req = request({ host: '127.0.0.1', port: stack.port, path: `/download?bytes=${50 * MiB}`, headers: { host: `${name}.${DOMAIN}` } });
        req.end();
        const [res] = (await once(req, 'response')) as [IncomingMessage];
        await once(res, 'data');
        req.destroy();
      }
      // Aborted before any answer, too.
      for (let i = 0; i < 5; i++) {
        const seen = app.slowSeen;
        const req = request({ host: '127.0.0.1', port: stack.port, path: '/slow', headers: { host: `${name}.${DOMAIN}` } });
        req.on('error', () => {});
        req.end();
        // Once the app has it (a fixed pause lost the race on a loaded machine: the app never saw it).
        await waitFor(() => app.slowSeen > seen, 10_000, 'the app to receive /slow');
        req.destroy();
      }
      await waitFor(() => stack.server.list('user-a')[0]?.streams === 0, 10_000, 'aborted streams freed');
      await waitFor(() => app.aborted - abortedBefore >= 25, 10_000, 'local requests cancelled').catch((err: Error) => {
        throw new Error(`${err.message}: ${app.aborted - abortedBefore} of 25`);
      });
      const results = await Promise.all(Array.from({ length: 10 }, () => visit(stack.port, name, '/hello')));
      for (const result of results) assert.equal(result.body.toString(), 'hello from the app');
      // Visitors that left before an answer are logged as 499; those that left mid-body with the app's status.
      await waitFor(() => client.events.filter((e) => e.type === 'request' && e.path === '/slow' && e.status === 499).length >= 5, 2000, '499 log lines');
      const downloads = client.events.filter((e) => e.type === 'request' && e.path === `/download?bytes=${50 * MiB}`);
      assert.ok(downloads.length >= 20 && downloads.every((e) => e.type === 'request' && e.status === 200));
    });
  });
}
