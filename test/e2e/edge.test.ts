// The edge of a real server, attacked over raw loopback sockets: ambiguous request heads are refused before routing.
import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { startTestServer, type TestServer } from '../helpers/server.js';

interface RawAnswer {
  status: number;
  head: string;
  body: string;
  /** How the connection ended: 'close' (the server ended it) or an error code. */
  end: string;
}

/** Writes `data` on a fresh connection and reads until the server closes it (at most `timeoutMs`). */
export function rawRequest(port: number, data: string, timeoutMs = 20_000): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port });
    const chunks: Buffer[] = [];
    let end = 'close';
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`the connection stayed open for ${timeoutMs} ms`));
    }, timeoutMs);
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    socket.on('error', (err: NodeJS.ErrnoException) => (end = err.code ?? 'error'));
    socket.once('close', () => {
      clearTimeout(timer);
      const text = Buffer.concat(chunks).toString('latin1');
      const split = text.indexOf('\r\n\r\n');
      const head = split === -1 ? text : text.slice(0, split);
      resolve({ status: Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1] ?? 0), head, body: split === -1 ? '' : text.slice(split + 4), end });
    });
    socket.write(data);
  });
}

describe('edge: ambiguous request heads', () => {
  let ts: TestServer;
  before(async () => {
    ts = await startTestServer();
  });
  after(() => ts.close());

  const hosts = (ts: TestServer): Record<string, string> => ({
    'the API host': `127.0.0.1:${ts.port}`,
    'an app host': `someapp.localhost:${ts.port}`,
  });

  for (const kind of ['the API host', 'an app host']) {
    test(`two Host headers are refused with 400 validation_error (${kind}, request and upgrade)`, async () => {
      const first = hosts(ts)[kind] as string;
      for (const extra of ['', 'Connection: Upgrade\r\nUpgrade: websocket\r\n']) {
        const res = await rawRequest(ts.port, `GET /healthz HTTP/1.1\r\nHost: ${first}\r\nHost: other.localhost\r\n${extra}\r\n`);
        assert.equal(res.status, 400, res.head);
        const body = JSON.parse(res.body) as { error: string; message: string };
        assert.equal(body.error, 'validation_error');
        assert.match(body.message, /more than one Host/);
        assert.equal(res.end, 'close');
      }
    });
  }

  test('a Transfer-Encoding not ending in chunked, a Host that is no host, and an absolute target naming another host are refused', async () => {
    const cases = [
      `POST /api/v1/auth/login HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: gzip\r\n\r\n`,
      `GET /healthz HTTP/1.1\r\nHost: a, b\r\n\r\n`,
      `GET http://someapp.localhost/ HTTP/1.1\r\nHost: 127.0.0.1:${ts.port}\r\n\r\n`,
    ];
    for (const data of cases) {
      const res = await rawRequest(ts.port, data);
      assert.equal(res.status, 400, `${data}\n${res.head}`);
      assert.equal((JSON.parse(res.body) as { error: string }).error, 'validation_error');
    }
  });

  test('well-formed requests still pass: one Host, an absolute target naming the same host', async () => {
    // An API route that answers without the engine: 401 proves the request reached it.
    const one = await rawRequest(ts.port, `GET /api/v1/deployments HTTP/1.1\r\nHost: 127.0.0.1:${ts.port}\r\nConnection: close\r\n\r\n`);
    assert.equal(one.status, 401, one.head);
    const target = `http://127.0.0.1:${ts.port}/api/v1/deployments`;
    const absolute = await rawRequest(ts.port, `GET ${target} HTTP/1.1\r\nHost: 127.0.0.1:${ts.port}\r\nConnection: close\r\n\r\n`);
    assert.equal(absolute.status, 401, absolute.head);
  });
});
