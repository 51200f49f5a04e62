// The edge of a real server, attacked over raw loopback sockets: ambiguous heads refused, endless requests closed, connections capped, long responses kept.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import { connect, type AddressInfo, type Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, test } from 'node:test';
import WebSocket, { WebSocketServer } from 'ws';
import { runTunnelClient } from '../../src/tunnel/tunnel-client.js';
import fsp from 'node:fs/promises';
import path from 'node:path';
import { appRequest, createArchiveApp, deployAndWait, eventually, tarGzOf, tempDir, testEngine } from '../helpers/apps.js';
import { ensureBusyboxImage, writeBusyboxApp } from '../helpers/busybox-image.js';
import { PLANES } from '../helpers/planes.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

interface RawAnswer {
  status: number;
  head: string;
  body: string;
  /** How the connection ended: 'close' (the server ended it) or an error code. */
  end: string;
}

/** Writes `data` on a fresh connection and reads until the server closes it (at most `timeoutMs`). */
function rawRequest(port: number, data: string, timeoutMs = 20_000): Promise<RawAnswer> {
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
        if (kind === 'an app host') {
          // An app's visitors get Slipway's page (test/e2e/edge-refusals.test.ts has the exact bytes).
          assert.match(res.head, /\r\ncontent-type: text\/html; charset=utf-8\r\n/i);
          assert.match(res.body, /<h1>400 Bad request<\/h1><p>This request could not be read: the request has more than one Host header\.<\/p>/);
        } else {
          const body = JSON.parse(res.body) as { error: string; message: string };
          assert.equal(body.error, 'validation_error');
          assert.match(body.message, /more than one Host/);
        }
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

/** Opens a connection and writes `data`; resolves with the socket once connected. */
async function openWith(port: number, data: string): Promise<Socket> {
  const socket = connect({ host: '127.0.0.1', port });
  socket.on('error', () => {});
  // A connection the edge refuses at once (HAProxy resets it on accept) is returned closed.
  await new Promise<void>((resolve) => {
    socket.once('connect', resolve);
    socket.once('close', resolve);
  });
  if (!socket.destroyed) socket.write(data);
  return socket;
}

/** Resolves when `socket` closes; rejects if it is still open after `timeoutMs`. */
function closed(socket: Socket, timeoutMs = 20_000): Promise<void> {
  if (socket.destroyed || socket.closed) return Promise.resolve();
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the connection stayed open for ${timeoutMs} ms`)), timeoutMs);
    socket.once('close', () => {
      clearTimeout(timer);
      resolve();
    });
  });
}

const LOGIN_HEAD = (port: number, length: number): string =>
  `POST /api/v1/auth/login HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nContent-Type: application/json\r\nContent-Length: ${length}\r\n\r\n`;

describe('edge: requests without end', () => {
  let ts: TestServer;
  before(async () => {
    ts = await startTestServer({
      SLIPWAY_BODY_IDLE_TIMEOUT_SECONDS: '1',
      SLIPWAY_HEADERS_TIMEOUT_SECONDS: '2',
      SLIPWAY_REQUEST_TIMEOUT_SECONDS: '3',
      SLIPWAY_KEEP_ALIVE_TIMEOUT_SECONDS: '1',
    });
  });
  after(() => ts.close());

  test('a login body that stops sending is closed after the body idle timeout', async () => {
    const socket = await openWith(ts.port, `${LOGIN_HEAD(ts.port, 100)}{"email":"a@b.c",`);
    await closed(socket);
  });

  test('a login body dribbling a byte at a time, never idle long enough, is closed at the request timeout', async () => {
    const socket = await openWith(ts.port, `${LOGIN_HEAD(ts.port, 10_000)}{`);
    const dribble = setInterval(() => socket.write(' '), 300);
    try {
      await closed(socket);
    } finally {
      clearInterval(dribble);
    }
  });

  test('a head that never ends is closed at the headers timeout', async () => {
    const socket = await openWith(ts.port, `GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n`);
    const dribble = setInterval(() => socket.write('X-A: b\r\n'), 300);
    try {
      await closed(socket);
    } finally {
      clearInterval(dribble);
    }
  });

  test('an idle kept-alive connection is closed after the keep-alive timeout; a whole request is answered', async () => {
    const socket = await openWith(ts.port, `GET /api/v1/deployments HTTP/1.1\r\nHost: 127.0.0.1:${ts.port}\r\n\r\n`);
    const [first] = (await once(socket, 'data')) as [Buffer];
    assert.match(first.toString('latin1'), /^HTTP\/1\.1 401 /);
    await closed(socket);
  });
});

for (const plane of PLANES) describe(`edge: connection caps (${plane} data plane)`, () => {
  let ts: TestServer;
  before(async () => {
    ts = await startTestServer({ SLIPWAY_MAX_CONNECTIONS_PER_ADDRESS: '10', SLIPWAY_DATA_PLANE: plane });
  });
  after(() => ts.close());

  test('connections that never finish their first head count against the cap too', async () => {
    const sockets: Socket[] = [];
    for (let i = 0; i < 30; i++) sockets.push(await openWith(ts.port, `GET /api/v1/deployments HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: `));
    const open = (): number => sockets.filter((s) => !s.closed).length;
    const deadline = Date.now() + 10_000;
    while (open() > 10 && Date.now() < deadline) await sleep(20);
    await sleep(200);
    assert.ok(open() <= 10, `${open()} half-sent heads stayed open`);
    for (const socket of sockets) socket.destroy();
    await eventually(async () => {
      const res = await rawRequest(ts.port, `GET /api/v1/deployments HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n`);
      return res.status === 401 ? res : undefined;
    }, 10_000, 'a connection accepted again');
  });

  test('many dribbling connections from one address: those above the cap are closed at once, and room returns as they go', async () => {
    const sockets: Socket[] = [];
    for (let i = 0; i < 30; i++) sockets.push(await openWith(ts.port, `${LOGIN_HEAD(ts.port, 100)}{`));
    // Every connection above the cap is closed by the server; the first ones (idle timeout 30 s) stay.
    // (The test client's own kept-alive connections may hold a few of the ten places for a while.)
    const open = (): number => sockets.filter((s) => !s.closed).length;
    const deadline = Date.now() + 10_000;
    while (open() > 10 && Date.now() < deadline) await sleep(20);
    await sleep(200); // closes already on their way land too
    assert.ok(open() <= 10, `${open()} connections stayed open`);
    // Behind HAProxy the order in which connections reach Node is not the order they were opened,
    // so which ones keep a place is not asserted; that the cap keeps most of its places in use is.
    assert.ok(open() >= 7, `only ${open()} connections were kept`);
    // An eleventh is refused too...
    const refused = await rawRequest(ts.port, `GET /api/v1/deployments HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n`);
    assert.equal(refused.status, 0);
    // ...until the held ones close.
    for (const socket of sockets) socket.destroy();
    const ok = await eventually(async () => {
      const res = await rawRequest(ts.port, `GET /api/v1/deployments HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n`);
      return res.status === 401 ? res : undefined;
    }, 10_000, 'a connection accepted again');
    assert.equal(ok.status, 401);
  });
});

for (const plane of PLANES) describe(`edge: long responses are not cut by the request bounds (${plane} data plane)`, () => {
  let ts: TestServer;
  let app: Server;
  let wss: WebSocketServer;
  let tunnel: AbortController;
  let tunnelDone: Promise<void>;
  let host: string;
  /** Longer than every bound the server is given below, but the upload deadline. */
  const PAUSE_MS = 3500;

  before(async () => {
    ts = await startTestServer({
      SLIPWAY_BODY_IDLE_TIMEOUT_SECONDS: '1',
      SLIPWAY_HEADERS_TIMEOUT_SECONDS: '1',
      SLIPWAY_REQUEST_TIMEOUT_SECONDS: '2',
      // Bounds the whole upload only; the body idle timeout is what the back-pressure case tests.
      SLIPWAY_UPLOAD_TIMEOUT_SECONDS: '60',
      SLIPWAY_KEEP_ALIVE_TIMEOUT_SECONDS: '1',
      SLIPWAY_DATA_PLANE: plane,
    });
    // A local app behind a tunnel: a response that pauses mid-stream, an upload it reads slowly, a quiet WebSocket.
    app = createServer((req, res) => {
      if (req.url === '/stream') {
        res.write('first ');
        setTimeout(() => res.end('second'), PAUSE_MS);
      } else if (req.url === '/late-reader') {
        // Starts reading only after the pause: the visitor's upload stalls on back-pressure meanwhile.
        req.pause();
        setTimeout(() => {
          let bytes = 0;
          req.on('data', (chunk: Buffer) => (bytes += chunk.length));
          req.on('end', () => res.end(`read ${bytes}`));
          req.resume();
        }, PAUSE_MS);
      } else {
        let bytes = 0;
        req.on('data', (chunk: Buffer) => (bytes += chunk.length));
        req.on('end', () => setTimeout(() => res.end(`read ${bytes}`), PAUSE_MS));
      }
    });
    wss = new WebSocketServer({ server: app });
    wss.on('connection', (ws) => ws.on('message', (data) => setTimeout(() => ws.send(`late ${String(data)}`), PAUSE_MS)));
    app.listen(0, '127.0.0.1');
    await once(app, 'listening');
    const user = await ts.newUser('edge');
    tunnel = new AbortController();
    let connected: (subdomain: string) => void = () => {};
    const ready = new Promise<string>((resolve) => (connected = resolve));
    tunnelDone = runTunnelClient({
      serverUrl: ts.url,
      apiKey: user.apiKey,
      port: (app.address() as AddressInfo).port,
      signal: tunnel.signal,
      onEvent: (event) => {
        if (event.type === 'connected') connected(event.subdomain);
      },
    }).catch(() => {});
    const subdomain = await Promise.race([ready, sleep(20_000).then(() => Promise.reject(new Error('tunnel did not connect')))]);
    host = `${subdomain}.localhost:${ts.port}`;
  });
  after(async () => {
    tunnel.abort();
    await tunnelDone;
    for (const client of wss.clients) client.terminate();
    app.closeAllConnections();
    app.close();
    await ts.close();
  });

  test('a streamed response pausing longer than every bound arrives whole', async () => {
    const res = await rawRequest(ts.port, `GET /stream HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`);
    assert.equal(res.status, 200, res.head);
    assert.match(res.body, /first [\s\S]*second/);
  });

  test('an upload the app answers only after a long pause gets its answer', async () => {
    const body = 'x'.repeat(50_000);
    const res = await rawRequest(ts.port, `POST /upload HTTP/1.1\r\nHost: ${host}\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`);
    assert.equal(res.status, 200, res.head);
    assert.equal(res.body, `read ${body.length}`);
  });

  test('an upload the app does not read for a while (back-pressure) is not taken for an idle client', async () => {
    const body = 'y'.repeat(8 * 1024 * 1024);
    const res = await rawRequest(ts.port, `POST /late-reader HTTP/1.1\r\nHost: ${host}\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`);
    assert.equal(res.status, 200, res.head);
    assert.equal(res.body, `read ${body.length}`);
  });

  test('a WebSocket through the tunnel stays open across a silence longer than every bound', async () => {
    const ws = new WebSocket(`ws://127.0.0.1:${ts.port}/chat`, { headers: { host } });
    try {
      await once(ws, 'open');
      ws.send('hello');
      const [reply] = (await Promise.race([once(ws, 'message'), sleep(20_000).then(() => [undefined])])) as [Buffer | undefined];
      assert.equal(String(reply), 'late hello');
    } finally {
      ws.terminate();
    }
  });
});

for (const plane of PLANES) describe(`edge: a deployed app that answers HTTP/1.1 099 (${plane} data plane)`, () => {
  let ts: TestServer;
  before(async () => {
    ts = await startTestServer({ SLIPWAY_DATA_PLANE: plane });
  });
  after(() => ts.close());

  test('the visitor gets a 502, the app and the server keep serving', async () => {
    await ensureBusyboxImage(testEngine());
    const dir = tempDir('evil');
    const body = await writeBusyboxApp(dir, { body: 'the ordinary page\n' });
    // busybox httpd passes a CGI answer that starts with "HTTP" through as it is: the attack, verbatim.
    await fsp.writeFile(path.join(dir, 'evil'), '#!/bin/sh\nprintf "HTTP/1.1 099 Weird\\r\\nContent-Length: 2\\r\\n\\r\\nok"\n');
    const dockerfile = await fsp.readFile(path.join(dir, 'Dockerfile'), 'utf8');
    await fsp.writeFile(
      path.join(dir, 'Dockerfile'),
      dockerfile.replace('COPY index.html /www/index.html', 'COPY index.html /www/index.html\nCOPY evil /www/cgi-bin/evil\nRUN ["/bin/chmod", "755", "/www/cgi-bin/evil"]'),
    );
    const archive = await tarGzOf(dir);
    await fsp.rm(dir, { recursive: true, force: true });
    const { token } = await ts.newUser('evil');
    const { id, subdomain } = await createArchiveApp(ts, token, archive);
    const deployed = await deployAndWait(ts, token, id);
    assert.equal(deployed.status, 200, deployed.text);

    for (let i = 0; i < 3; i++) {
      const evil = await appRequest(ts.port, subdomain, { path: '/cgi-bin/evil' });
      assert.equal(evil.status, 502);
      assert.match(evil.body, /Bad gateway/);
    }
    const page = await appRequest(ts.port, subdomain);
    assert.deepEqual([page.status, page.body], [200, body]);
    assert.equal((await ts.request('GET', '/api/v1/deployments', { token })).status, 200);
  });
});
