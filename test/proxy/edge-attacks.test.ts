// Regression tests written as the attack: broken app answers fail only their own request; spoofed client headers never reach the app.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, request as httpRequest, type IncomingMessage, type Server } from 'node:http';
import { connect, createServer as createTcpServer, type AddressInfo, type Server as TcpServer, type Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { afterEach, describe, it } from 'node:test';
import { AppProxy } from '../../src/proxy/app-proxy.js';
import { RoutingTable, type Upstream } from '../../src/proxy/routing-table.js';

const DOMAIN = 'apps.test';

const cleanups: Array<() => void> = [];
afterEach(() => {
  for (const cleanup of cleanups.splice(0).reverse()) cleanup();
});

async function listen(server: Server | TcpServer): Promise<number> {
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  cleanups.push(() => {
    if ('closeAllConnections' in server) server.closeAllConnections();
    server.close();
  });
  return (server.address() as AddressInfo).port;
}

/**
 * A raw TCP "app" that reads a request head and answers `answer` (bytes, written as is); with
 * `thenDestroy` it resets the connection after writing.
 */
async function rawApp(answer: string | Buffer, thenDestroy = false): Promise<Upstream> {
  const sockets = new Set<Socket>();
  const server = createTcpServer((socket) => {
    sockets.add(socket);
    socket.on('error', () => {});
    socket.once('close', () => sockets.delete(socket));
    let seen = '';
    socket.on('data', (chunk: Buffer) => {
      seen += chunk.toString('latin1');
      if (!seen.includes('\r\n\r\n')) return;
      seen = '';
      socket.write(typeof answer === 'string' ? Buffer.from(answer, 'latin1') : answer, () => {
        if (thenDestroy) socket.resetAndDestroy();
      });
    });
  });
  const port = await listen(server);
  cleanups.push(() => {
    for (const socket of sockets) socket.destroy();
  });
  return { host: '127.0.0.1', port };
}

/** The proxy in front of a routing table, behind a front server like main.ts's. */
async function front(): Promise<{ table: RoutingTable; port: number; crashes: Error[] }> {
  const table = new RoutingTable(DOMAIN);
  const proxy = new AppProxy({ table, publicProtocol: 'http' });
  cleanups.push(() => proxy.close());
  const server = createServer((req, res) => {
    if (!proxy.handleRequest(req, res)) res.end('api');
  });
  server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    if (!proxy.handleUpgrade(req, socket, head)) socket.destroy();
  });
  const port = await listen(server);
  // A throw from the proxy would surface here (and would end a real server process).
  const crashes: Error[] = [];
  const onCrash = (err: Error): void => {
    crashes.push(err);
  };
  process.on('uncaughtException', onCrash);
  cleanups.push(() => process.off('uncaughtException', onCrash));
  return { table, port, crashes };
}

function live(upstream: Upstream): { kind: 'app'; deploymentId: string; state: 'live'; upstreams: Upstream[] } {
  return { kind: 'app', deploymentId: `dep-${upstream.port}`, state: 'live', upstreams: [upstream] };
}

interface Answer {
  status: number;
  body: string;
  contentType: string;
}

function get(port: number, host: string, path = '/'): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: '127.0.0.1', port, path, headers: { host }, agent: false, timeout: 20_000 });
    req.on('timeout', () => req.destroy(new Error('no answer within 20 s')));
    req.on('error', reject);
    req.on('response', (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('error', reject);
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body, contentType: String(res.headers['content-type']) }));
    });
    req.end();
  });
}

/** Sends `head` on a raw socket and collects everything until the server closes it. */
function rawExchange(port: number, head: string): Promise<{ text: string; error: string | undefined }> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port });
    const chunks: Buffer[] = [];
    let error: string | undefined;
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error('the connection stayed open for 20 s'));
    }, 20_000);
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    socket.on('error', (err: NodeJS.ErrnoException) => (error = err.code));
    socket.once('close', () => {
      clearTimeout(timer);
      resolve({ text: Buffer.concat(chunks).toString('latin1'), error });
    });
    socket.write(head);
  });
}

/** A healthy app and its route, to prove the server still serves after an attack. */
async function healthyRoute(table: RoutingTable): Promise<string> {
  const server = createServer((_req, res) => res.end('still here'));
  const port = await listen(server);
  table.set('healthy', live({ host: '127.0.0.1', port }));
  return `healthy.${DOMAIN}`;
}

const BROKEN_ANSWERS: Record<string, string> = {
  'status 099': 'HTTP/1.1 099 Weird\r\nContent-Length: 2\r\n\r\nok',
  'status 000': 'HTTP/1.1 000 Zero\r\nContent-Length: 2\r\n\r\nok',
  'status 600': 'HTTP/1.1 600 Six\r\nContent-Length: 2\r\n\r\nok',
  'status 999': 'HTTP/1.1 999 Nine\r\nContent-Length: 2\r\n\r\nok',
  'a final 101 to a plain request': 'HTTP/1.1 101 Switching Protocols\r\n\r\nok',
  'a 101 with Upgrade to a plain request': 'HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\nConnection: upgrade\r\n\r\nok',
  'a control character in the reason phrase': 'HTTP/1.1 200 O\x01K\r\nContent-Length: 2\r\n\r\nok',
  'a control character in a header value': 'HTTP/1.1 200 OK\r\nX-A: a\x01b\r\nContent-Length: 2\r\n\r\nok',
  'a header line without a colon': 'HTTP/1.1 200 OK\r\nBroken header\r\nContent-Length: 2\r\n\r\nok',
  'an empty header name': 'HTTP/1.1 200 OK\r\n: v\r\nContent-Length: 2\r\n\r\nok',
  'Content-Length with Transfer-Encoding': 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 2\r\n\r\n2\r\nok\r\n0\r\n\r\n',
  'two different Content-Lengths': 'HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nok',
  'not HTTP at all': 'hello world\r\n\r\n',
  'an empty answer': '',
};

describe('AppProxy: broken upstream answers', () => {
  for (const [name, answer] of Object.entries(BROKEN_ANSWERS)) {
    it(`answers 502 to ${name}, and keeps serving`, async () => {
      const { table, port, crashes } = await front();
      table.set('evil', live(await rawApp(answer, answer === '')));
      const healthy = await healthyRoute(table);

      const res = await get(port, `evil.${DOMAIN}`);
      assert.equal(res.status, 502);
      assert.match(res.contentType, /text\/html/);
      assert.match(res.body, /Bad gateway/);
      // Twice: the second visit must not find a broken kept-alive socket either.
      assert.equal((await get(port, `evil.${DOMAIN}`)).status, 502);
      const after = await get(port, healthy);
      assert.deepEqual([after.status, after.body], [200, 'still here']);
      assert.deepEqual(crashes, []);
    });
  }

  it('closes the visitor connection when the app resets mid-body, and keeps serving', async () => {
    const { table, port, crashes } = await front();
    table.set('evil', live(await rawApp('HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\nonly part of it', true)));
    const healthy = await healthyRoute(table);

    const res = await rawExchange(port, `GET / HTTP/1.1\r\nHost: evil.${DOMAIN}\r\n\r\n`);
    assert.match(res.text, /^HTTP\/1\.1 200 OK\r\n/);
    assert.ok(!res.text.endsWith('\r\n0\r\n\r\n'), 'a broken body must not end like a complete one');
    assert.ok(res.text.length < 1000);
    const after = await get(port, healthy);
    assert.deepEqual([after.status, after.body], [200, 'still here']);
    assert.deepEqual(crashes, []);
  });

  it('answers 502 when the app resets before its head is complete', async () => {
    const { table, port, crashes } = await front();
    table.set('evil', live(await rawApp('HTTP/1.1 200 OK\r\nContent-Le', true)));
    const res = await get(port, `evil.${DOMAIN}`);
    assert.equal(res.status, 502);
    assert.deepEqual(crashes, []);
  });

  it('passes an answer Node accepts but a strict parser might not (Latin-1 header value) unchanged', async () => {
    const { table, port } = await front();
    table.set('ok', live(await rawApp('HTTP/1.1 201 Created\r\nX-Name: caf\xe9\r\nContent-Length: 2\r\n\r\nok')));
    const res = await rawExchange(port, `GET / HTTP/1.1\r\nHost: ok.${DOMAIN}\r\nConnection: close\r\n\r\n`);
    assert.match(res.text, /^HTTP\/1\.1 201 Created\r\n/);
    assert.match(res.text, /\r\nX-Name: caf\xe9\r\n/);
    assert.ok(res.text.endsWith('\r\n\r\nok'));
  });
});

/** A raw TCP "app" that records each request head it receives and answers 200 (or 101 to an upgrade). */
async function recordingApp(): Promise<{ upstream: Upstream; heads: string[] }> {
  const heads: string[] = [];
  const server = createTcpServer((socket) => {
    socket.on('error', () => {});
    let seen = '';
    socket.on('data', (chunk: Buffer) => {
      seen += chunk.toString('latin1');
      const end = seen.indexOf('\r\n\r\n');
      if (end === -1) return;
      const head = seen.slice(0, end);
      seen = '';
      heads.push(head);
      socket.end(/\r\nUpgrade:/i.test(head) ? 'HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n' : 'HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok');
    });
  });
  const port = await listen(server);
  return { upstream: { host: '127.0.0.1', port }, heads };
}

/** The values of header `name` in a raw request head. */
function headerValues(head: string, name: string): string[] {
  return head
    .split('\r\n')
    .slice(1)
    .filter((line) => line.toLowerCase().startsWith(`${name.toLowerCase()}:`))
    .map((line) => line.slice(name.length + 1).trim());
}

const SPOOFED = [
  'X-Forwarded-For: 6.6.6.6',
  'X-Forwarded-For: 7.7.7.7, 8.8.8.8',
  'X-Forwarded-Proto: https',
  'X-Forwarded-Host: bank.example',
  'Forwarded: for=6.6.6.6;proto=https',
  'X-Real-IP: 6.6.6.6',
].join('\r\n');

describe('AppProxy: client-address headers cannot be spoofed', () => {
  for (const kind of ['request', 'upgrade'] as const) {
    it(`sets X-Forwarded-* itself and drops the visitor's own (${kind})`, async () => {
      const { table, port } = await front();
      const { upstream, heads } = await recordingApp();
      table.set('app', live(upstream));
      const upgrade = kind === 'upgrade' ? 'Connection: Upgrade\r\nUpgrade: websocket\r\n' : 'Connection: close\r\n';
      const res = await rawExchange(port, `GET /x HTTP/1.1\r\nHost: app.${DOMAIN}\r\n${upgrade}${SPOOFED}\r\n\r\n`);
      assert.match(res.text, kind === 'upgrade' ? /^HTTP\/1\.1 101 / : /^HTTP\/1\.1 200 /);
      assert.equal(heads.length, 1);
      const head = heads[0] ?? '';
      assert.deepEqual(headerValues(head, 'X-Forwarded-For'), ['127.0.0.1']);
      assert.deepEqual(headerValues(head, 'X-Forwarded-Proto'), ['http']);
      assert.deepEqual(headerValues(head, 'X-Forwarded-Host'), [`app.${DOMAIN}`]);
      assert.deepEqual(headerValues(head, 'Forwarded'), []);
      assert.deepEqual(headerValues(head, 'X-Real-IP'), []);
    });
  }
});

const UPGRADE = (host: string): string => `GET /ws HTTP/1.1\r\nHost: ${host}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n`;

const BROKEN_UPGRADE_ANSWERS: Record<string, string> = {
  'status 099': 'HTTP/1.1 099 Weird\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n',
  'status 600': 'HTTP/1.1 600 Six\r\n\r\n',
  'a control character in a header': 'HTTP/1.1 101 Switching Protocols\r\nUpgrade: web\x01socket\r\nConnection: Upgrade\r\n\r\n',
  'a header line without a colon': 'HTTP/1.1 101 Switching Protocols\r\nBroken header\r\n\r\n',
  'not HTTP at all': 'hello world\r\n\r\n',
  'a head cut by the close': 'HTTP/1.1 101 Switching Protocols\r\nUpgr',
  'an empty answer': '',
  'a head over 16 KiB': `HTTP/1.1 101 Switching Protocols\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`,
};

describe('AppProxy: broken answers to an upgrade', () => {
  for (const [name, answer] of Object.entries(BROKEN_UPGRADE_ANSWERS)) {
    it(`answers 502 to ${name}, and keeps serving`, async () => {
      const { table, port, crashes } = await front();
      table.set('evil', live(await rawApp(answer, true)));
      const healthy = await healthyRoute(table);

      const res = await rawExchange(port, UPGRADE(`evil.${DOMAIN}`));
      assert.match(res.text, /^HTTP\/1\.1 502 /);
      assert.match(res.text, /Bad gateway/);
      const after = await get(port, healthy);
      assert.deepEqual([after.status, after.body], [200, 'still here']);
      assert.deepEqual(crashes, []);
    });
  }

  it('passes a well-formed refusal of an upgrade (426 with a body) to the visitor as it is', async () => {
    const { table, port } = await front();
    const refusal = 'HTTP/1.1 426 Upgrade Required\r\nContent-Length: 7\r\nConnection: close\r\n\r\nno ws!\n';
    const server = createTcpServer((socket) => {
      socket.on('error', () => {});
      socket.once('data', () => socket.end(refusal));
    });
    table.set('app', live({ host: '127.0.0.1', port: await listen(server) }));
    const res = await rawExchange(port, UPGRADE(`app.${DOMAIN}`));
    assert.equal(res.text, refusal);
  });
});
