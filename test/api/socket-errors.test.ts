// Requests refused before any route runs (by Node's parser, an Expect header, an upgrade nobody serves, a broken tunnel handshake) still get `{error, message}` JSON.
import assert from 'node:assert/strict';
import http from 'node:http';
import net from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, test } from 'node:test';
import { sendRaw, type RawRequest, type RawResponse } from '../helpers/raw-http.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

describe('errors answered on the socket', () => {
  let ts: TestServer;
  let apiKey: string;

  before(async () => {
    ts = await startTestServer();
    apiKey = (await ts.newUser('socket-errors')).apiKey;
  });
  after(async () => {
    await ts.close();
  });

  const send = (request: RawRequest | Buffer): Promise<RawResponse> => sendRaw(ts.port, request, { timeoutMs: 10_000, streamCutMs: 2_000 });

  function assertJsonError(res: RawResponse, status: number, code: string): void {
    const text = res.body.toString('utf8');
    assert.equal(res.outcome, 'response', `no answer (${res.outcome})`);
    assert.equal(res.status, status, text);
    assert.match(res.headers['content-type']?.[0] ?? '', /^application\/json/, text);
    const body = JSON.parse(text) as Record<string, unknown>;
    assert.deepEqual(Object.keys(body).sort(), ['error', 'message'], text);
    assert.equal(body['error'], code, text);
    assert.equal(typeof body['message'], 'string');
  }

  const host: [string, string] = ['Host', 'localhost'];

  test('an unknown method, a malformed request line and a bad header are 400 validation_error', async () => {
    assertJsonError(await send({ method: 'FOO', target: '/api/v1/deployments', headers: [host] }), 400, 'validation_error');
    assertJsonError(await send(Buffer.from('GET /api/v1/users/me\u00ff HTTP/1.1\r\nHost: localhost\r\n\r\n', 'latin1')), 400, 'validation_error');
    assertJsonError(await send({ method: 'GET', target: '/healthz', headers: [host, ['Bad Header', 'x']] }), 400, 'validation_error');
  });

  test('Content-Length together with Transfer-Encoding (a smuggling shape) is 400 validation_error', async () => {
    const body = Buffer.from('{"name":"x"}');
    const res = await send({ method: 'POST', target: '/api/v1/api-keys', headers: [host, ['Content-Type', 'application/json'], ['Transfer-Encoding', 'chunked']], body, contentLength: body.length });
    assertJsonError(res, 400, 'validation_error');
  });

  test('headers over the size limit are 431 with a JSON body', async () => {
    assertJsonError(await send({ method: 'GET', target: '/healthz', headers: [host, ['X-Huge', 'h'.repeat(20_000)]] }), 431, 'payload_too_large');
  });

  test('an Expect other than 100-continue is 417 with a JSON body, and the route does not run', async () => {
    const res = await send({ method: 'POST', target: '/api/v1/auth/login', headers: [host, ['Expect', 'garbage'], ['Content-Type', 'application/json']], body: Buffer.from('{}') });
    assertJsonError(res, 417, 'validation_error');
  });

  test('a WebSocket upgrade to a path that takes none is 404 not_found', async () => {
    const res = await send({
      method: 'GET',
      target: '/api/v1/deployments',
      headers: [host, ['Upgrade', 'websocket'], ['Connection', 'Upgrade'], ['Sec-WebSocket-Key', 'dGhlIHNhbXBsZSBub25jZQ=='], ['Sec-WebSocket-Version', '13']],
    });
    assertJsonError(res, 404, 'not_found');
  });

  test('an upgrade whose client resets the connection while it is answered ends nothing but that connection', async () => {
    const crashes: unknown[] = [];
    const onCrash = (err: unknown): void => {
      crashes.push(err);
    };
    process.on('uncaughtException', onCrash);
    try {
      const upgrade = (host: string, path: string): string =>
        `GET ${path} HTTP/1.1\r\nHost: ${host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n`;
      // Unknown app host (the data plane's 404 page), an API path (404 JSON), a head Node takes but the edge refuses.
      const requests = [upgrade(`nx-${process.pid}.localhost`, '/'), upgrade('localhost', '/api/v1/deployments'), upgrade('a.localhost, b.localhost', '/')];
      for (let i = 0; i < 30; i++) {
        const socket = net.connect({ host: '127.0.0.1', port: ts.port });
        socket.on('error', () => undefined);
        await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
        socket.write(requests[i % requests.length]!);
        // A reset as soon as the bytes are out: the server's answer meets a dead socket.
        socket.resetAndDestroy();
      }
      await sleep(500);
      assert.deepEqual(crashes.map(String), []);
      const health = await ts.request('GET', '/healthz');
      assert.equal(health.status, 200);
    } finally {
      process.off('uncaughtException', onCrash);
    }
  });

  test('a tunnel connect with a broken WebSocket handshake is 400 validation_error, as JSON', async () => {
    const base: [string, string][] = [host, ['Authorization', `Bearer ${apiKey}`], ['Connection', 'Upgrade']];
    const key: [string, string] = ['Sec-WebSocket-Key', 'dGhlIHNhbXBsZSBub25jZQ=='];
    const version: [string, string] = ['Sec-WebSocket-Version', '13'];
    const cases: RawRequest[] = [
      { method: 'POST', target: '/api/v1/tunnels/connect', headers: [...base, ['Upgrade', 'websocket'], key, version] },
      { method: 'GET', target: '/api/v1/tunnels/connect', headers: [...base, ['Upgrade', 'h2c'], key, version] },
      { method: 'GET', target: '/api/v1/tunnels/connect?subdomain=handshake-a', headers: [...base, ['Upgrade', 'websocket'], ['Sec-WebSocket-Key', 'short'], version] },
      { method: 'GET', target: '/api/v1/tunnels/connect', headers: [...base, ['Upgrade', 'websocket'], key, ['Sec-WebSocket-Version', '99']] },
    ];
    for (const request of cases) assertJsonError(await send(request), 400, 'validation_error');
    // The refused handshake claimed no name: a deployment can take it.
    const created = await ts.request('POST', '/api/v1/deployments', { token: apiKey, body: { name: 'n', subdomain: 'handshake-a', source_type: 'archive' } });
    assert.equal(created.status, 201, created.text);
  });

  // Issue 33 item 11: a client that pauses between calls (waiting on something else, or on a failed-over
  // instance) sent its next request into a kept-alive connection the server closed at that instant after
  // 5 s, and got no answer at all. With the default settings the connection outlasts such pauses.
  test('a kept-alive connection idle for 6 s still carries the next request, and answers say how long it stays open', async () => {
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const get = (): Promise<{ status: number; reused: boolean; keepAlive: string }> => new Promise((resolve, reject) => {
      const req = http.get(`${ts.url}/healthz`, { agent }, (res) => {
        res.resume();
        res.on('end', () => resolve({ status: res.statusCode ?? 0, reused: req.reusedSocket, keepAlive: String(res.headers['keep-alive']) }));
      });
      req.on('error', reject);
      req.setTimeout(10_000, () => req.destroy(new Error('no answer in 10 s')));
    });
    try {
      const first = await get();
      assert.equal(first.status, 200);
      assert.equal(first.reused, false);
      assert.equal(first.keepAlive, 'timeout=65');
      await sleep(6_000);
      const second = await get();
      assert.equal(second.status, 200);
      assert.equal(second.reused, true, 'the same connection answered after 6 s idle');
    } finally {
      agent.destroy();
    }
  });
});
