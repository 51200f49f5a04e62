// Test fixture of the tunnel suites: the local app behind a tunnel (echo, headers, big download/upload, slow and WebSocket echo) and its deterministic byte streams.
import { createHash } from 'node:crypto';
import { once } from 'node:events';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Readable } from 'node:stream';
import { WebSocketServer } from 'ws';

export interface LocalApp {
  readonly port: number;
  /** Bytes /download has written so far (the latest request). */
  written: number;
  /** Requests whose connection closed before the response finished. */
  aborted: number;
  /** TCP connections accepted so far. */
  connections: number;
  /** /slow requests received so far. */
  slowSeen: number;
  /** Releases every waiting /slow request. */
  releaseSlow(): void;
  close(): Promise<void>;
}

/** The app behind the tunnel: echo, headers, big download/upload, slow and WebSocket echo endpoints. */
export async function startLocalApp(): Promise<LocalApp> {
  let slowWaiters: Array<() => void> = [];
  const app: LocalApp = {
    port: 0,
    written: 0,
    aborted: 0,
    connections: 0,
    slowSeen: 0,
    releaseSlow() {
      for (const release of slowWaiters) release();
      slowWaiters = [];
    },
    close: async () => {},
  };
  const server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://app');
    res.once('close', () => {
      if (!res.writableFinished) app.aborted++;
    });
    if (url.pathname === '/hello') {
      res.setHeader('set-cookie', ['a=1', 'b=2']);
      res.end('hello from the app');
    } else if (url.pathname === '/headers') {
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ method: req.method, url: req.url, headers: req.headers }));
    } else if (url.pathname === '/echo') {
      res.setHeader('content-type', req.headers['content-type'] ?? 'application/octet-stream');
      req.pipe(res);
    } else if (url.pathname === '/upload') {
      const hash = createHash('sha256');
      let bytes = 0;
      req.on('data', (chunk: Buffer) => {
        bytes += chunk.length;
        hash.update(chunk);
      });
      req.on('end', () => res.end(JSON.stringify({ bytes, sha256: hash.digest('hex') })));
    } else if (url.pathname === '/download') {
      const total = Number(url.searchParams.get('bytes') ?? '0');
      app.written = 0;
      res.setHeader('content-length', String(total));
      const source = patternStream(total, (n) => (app.written += n));
      source.pipe(res);
      res.once('close', () => source.destroy());
    } else if (url.pathname === '/slow') {
      app.slowSeen++;
      slowWaiters.push(() => res.end('slow done'));
    } else {
      res.statusCode = 404;
      res.end('no such page');
    }
  });
  server.on('connection', () => app.connections++);
  const wss = new WebSocketServer({ server, perMessageDeflate: false });
  wss.on('connection', (ws, req) => {
    ws.send(`welcome ${req.url ?? ''}`);
    ws.on('message', (data, isBinary) => ws.send(data, { binary: isBinary }));
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return Object.assign(app, {
    port: (server.address() as AddressInfo).port,
    close: async () => {
      app.releaseSlow();
      for (const client of wss.clients) client.terminate();
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  });
}

/** A deterministic byte stream (the same bytes for the same length), honouring back-pressure. */
export function patternStream(total: number, onChunk: (n: number) => void = () => {}): Readable {
  const block = Buffer.alloc(64 * 1024);
  for (let i = 0; i < block.length; i++) block[i] = (i * 31 + 7) & 0xff;
  let sent = 0;
  return new Readable({
    read() {
      if (sent >= total) {
        this.push(null);
        return;
      }
      const n = Math.min(block.length, total - sent);
      sent += n;
      onChunk(n);
      // A fresh copy: the reader may hold chunks while we produce more.
      this.push(Buffer.from(block.subarray(0, n)));
    },
  });
}

export function patternSha(total: number): string {
  const hash = createHash('sha256');
  const block = Buffer.alloc(64 * 1024);
  for (let i = 0; i < block.length; i++) block[i] = (i * 31 + 7) & 0xff;
  for (let sent = 0; sent < total; sent += block.length) hash.update(block.subarray(0, Math.min(block.length, total - sent)));
  return hash.digest('hex');
}
