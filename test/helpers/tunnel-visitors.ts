// Test fixture of the tunnel suites: visitors (through the agent, raw sockets, raw tunnel upgrades), a blackhole proxy, and RSS sampling.
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { Agent, request, type IncomingMessage } from 'node:http';
import { connect, createServer as createTcpServer, type AddressInfo, type Socket } from 'node:net';
import { Readable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import { CONNECT_PATH } from '../../src/tunnel/protocol.js';
import { DOMAIN, waitFor } from './tunnel-stack.js';

export const MiB = 1024 * 1024;

// Idle kept-alive connections are dropped after 2 s, well before the servers' 5 s keep-alive
// timeout: a request sent into a connection the server is closing at that moment fails with
// "socket hang up" (no client can tell), which a loaded machine made happen.
export const visitorAgent = new Agent({ keepAlive: true, maxSockets: 256, timeout: 2000 });

export interface Visit {
  status: number;
  headers: IncomingMessage['headers'];
  body: Buffer;
}

/** A visit that sees no progress (request body sent, response head or body bytes) for this long fails, saying where it stood. */
const VISIT_STALL_MS = 60_000;

/**
 * One visitor request to `name.localhost` through the front server. It fails (instead of hanging
 * until the file's timeout) once nothing moved for {@link VISIT_STALL_MS}, naming the request, its
 * connection's local port (to find it in the server's state) and how far it got.
 */
export async function visit(
  port: number,
  name: string,
  path: string,
  options: { method?: string; body?: Buffer | Readable; headers?: Record<string, string> } = {},
): Promise<Visit> {
  const method = options.method ?? 'GET';
  const req = request({
    host: '127.0.0.1',
    port,
    path,
    method,
    headers: { host: `${name}.${DOMAIN}:${port}`, ...options.headers },
    agent: visitorAgent,
  });
  let phase = 'waiting for a connection';
  let sent = 0;
  let received = 0;
  let progress = Date.now();
  let answer: IncomingMessage | undefined;
  const moved = (): void => void (progress = Date.now());
  req.once('socket', () => (phase = 'sending the request'));
  const watchdog = setInterval(() => {
    if (Date.now() - progress < VISIT_STALL_MS) return;
    const local = req.socket?.localPort ?? '?';
    const stalled = new Error(`visit ${method} ${name}.${DOMAIN}${path} stalled ${VISIT_STALL_MS / 1000} s (connection from local port ${local}): ${phase}, ${sent} body bytes sent, ${received} response bytes received`);
    // The response's reader gets this error too (a destroyed request would give it a bare "aborted").
    answer?.destroy(stalled);
    req.destroy(stalled);
  }, 1000);
  try {
    const response = once(req, 'response') as Promise<[IncomingMessage]>;
    if (options.body instanceof Readable) {
      options.body.on('data', (chunk: Buffer) => {
        sent += chunk.length;
        moved();
      });
      options.body.pipe(req);
    } else {
      sent = options.body?.length ?? 0;
      req.end(options.body);
    }
    req.once('finish', () => (phase = 'waiting for the response head'));
    const [res] = await response;
    answer = res;
    moved();
    phase = `reading the ${res.statusCode ?? '?'} response's body (content-length ${res.headers['content-length'] ?? 'none'})`;
    const chunks: Buffer[] = [];
    for await (const chunk of res) {
      received += (chunk as Buffer).length;
      moved();
      chunks.push(chunk as Buffer);
    }
    return { status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) };
  } finally {
    clearInterval(watchdog);
  }
}

/** Samples RSS while `work` runs; returns the largest growth over the starting value. */
export async function peakRssGrowth(work: () => Promise<void>): Promise<number> {
  const start = process.memoryUsage.rss();
  let peak = start;
  const timer = setInterval(() => (peak = Math.max(peak, process.memoryUsage.rss())), 20);
  try {
    await work();
  } finally {
    clearInterval(timer);
  }
  return Math.max(peak, process.memoryUsage.rss()) - start;
}

/** A raw visitor connection: write bytes, read what comes back, see when the server ends it. */
export async function rawVisitor(port: number): Promise<{ socket: Socket; received(): string; closed: Promise<void>; waitFor(text: RegExp, what: string): Promise<string> }> {
  const socket = connect(port, '127.0.0.1');
  await once(socket, 'connect');
  let text = '';
  socket.setEncoding('latin1');
  socket.on('data', (chunk: string) => (text += chunk));
  socket.on('error', () => {});
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  return {
    socket,
    received: () => text,
    closed,
    waitFor: (pattern, what) =>
      waitFor(() => (pattern.test(text) ? text : undefined), 5000, what).catch((err: Error) => {
        throw new Error(`${err.message}; received ${JSON.stringify(text.slice(0, 2000))}`);
      }),
  };
}

/** A TCP forwarder whose existing connections can be made to silently drop everything. */
export async function startBlackholeProxy(targetPort: number): Promise<{ port: number; blackhole(): void; close(): void }> {
  const pairs: Array<[Socket, Socket]> = [];
  const server = createTcpServer((inbound) => {
    const outbound = connect(targetPort, '127.0.0.1');
    inbound.pipe(outbound);
    outbound.pipe(inbound);
    inbound.on('error', () => outbound.destroy());
    outbound.on('error', () => inbound.destroy());
    pairs.push([inbound, outbound]);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    port: (server.address() as AddressInfo).port,
    blackhole() {
      for (const [a, b] of pairs.splice(0)) {
        a.unpipe(b);
        b.unpipe(a);
        // A close or reset on one side must not reach the other either.
        for (const socket of [a, b]) {
          socket.removeAllListeners('error');
          socket.on('error', () => {});
        }
        // Keep reading so nothing pushes back; drop what arrives.
        a.on('data', () => {});
        b.on('data', () => {});
        a.resume();
        b.resume();
        setTimeout(() => {
          a.destroy();
          b.destroy();
        }, 30_000).unref(); // later than any heartbeat bound above, so only heartbeats can notice the drop
      }
    },
    close() {
      server.close();
    },
  };
}

/** A raw TCP connect that sends a tunnel upgrade request; `headers` replace the WebSocket ones. */
export async function rawUpgrade(port: number, key: string, subdomain: string, headers?: string[]): Promise<Socket> {
  const socket = connect(port, '127.0.0.1');
  socket.on('error', () => {});
  await once(socket, 'connect');
  const lines = [
    `GET ${CONNECT_PATH}?subdomain=${subdomain} HTTP/1.1`,
    `Host: 127.0.0.1:${port}`,
    `Authorization: Bearer ${key}`,
    'Connection: Upgrade',
    'Upgrade: websocket',
    ...(headers ?? ['Sec-WebSocket-Version: 13', `Sec-WebSocket-Key: ${randomBytes(16).toString('base64')}`]),
  ];
  socket.write(`${lines.join('\r\n')}\r\n\r\n`);
  return socket;
}

/** Everything a socket receives until it closes (or `timeoutMs` passes). */
export async function readUntilClose(socket: Socket, timeoutMs: number): Promise<string> {
  const chunks: Buffer[] = [];
  socket.on('data', (chunk: Buffer) => chunks.push(chunk));
  await Promise.race([once(socket, 'close'), sleep(timeoutMs)]);
  socket.destroy();
  return Buffer.concat(chunks).toString('latin1');
}

/** A visitor request that settles with its status, 'closed' (no answer) or 'timeout'. */
export function visitStatus(port: number, name: string, path: string, timeoutMs: number): Promise<number | 'closed' | 'timeout'> {
  return new Promise((resolve) => {
    const req = request({ host: '127.0.0.1', port, path, headers: { host: `${name}.${DOMAIN}:${port}` }, agent: false });
    const timer = setTimeout(() => {
      req.destroy();
      resolve('timeout');
    }, timeoutMs);
    req.on('response', (res) => {
      res.resume();
      res.once('end', () => {
        clearTimeout(timer);
        resolve(res.statusCode ?? 0);
      });
      res.once('error', () => undefined);
    });
    req.on('error', () => {
      clearTimeout(timer);
      resolve('closed');
    });
    req.end();
  });
}

/** One BATCH message of `count` OPEN frames (each answered by a RESET from the server). */
export function openFlood(count: number, firstId: number): Buffer {
  const message = Buffer.alloc(1 + count * 9);
  message[0] = 0x7f;
  for (let i = 0; i < count; i++) {
    const at = 1 + i * 9;
    message.writeUInt32BE(5, at);
    message[at + 4] = 1; // OPEN
    message.writeUInt32BE(((firstId + i) % 0xfffffffe) + 1, at + 5);
  }
  return message;
}
