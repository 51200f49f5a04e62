// End-to-end tunnel tests: real sockets on loopback, a front server, a tunnel client and a local app.
import { nodeDataPlane } from '../../src/proxy/node-data-plane.js';
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { Agent, createServer, request, type IncomingMessage, type Server } from 'node:http';
import fs from 'node:fs';
import { connect, createServer as createTcpServer, type AddressInfo, type Server as TcpServer, type Socket } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, it } from 'node:test';
import WebSocket, { WebSocketServer } from 'ws';
import { AppProxy } from '../../src/proxy/app-proxy.js';
import { connectedTunnel, frontDoor } from '../../src/proxy/front-door.js';
import { edgeRefusals } from '../../src/proxy/edge-refusals.js';
import { RoutingTable } from '../../src/proxy/routing-table.js';
import { CONNECT_PATH, MAX_OUTBOUND_BYTES } from '../../src/tunnel/protocol.js';
import { runTunnelClient, type TunnelClientEvent } from '../../src/tunnel/tunnel-client.js';
import { TunnelServer, type TunnelAuthority, type TunnelOwner } from '../../src/tunnel/tunnel-server.js';
import { freePort } from '../helpers/net.js';
import { PLANES, type PlaneKind } from '../helpers/planes.js';
import { loadConfig } from '../../src/config.js';
import { HaproxyDataPlane, haproxyFiles, listenForHaproxy } from '../../src/proxy/haproxy/haproxy-data-plane.js';
import { findHaproxy } from '../../src/proxy/haproxy/haproxy-binary.js';
import { proxyProtocolListener } from '../../src/proxy/proxy-protocol.js';

const MiB = 1024 * 1024;
const DOMAIN = 'localhost';
const RESERVED = new Set(['api', 'www', 'admin', 'app', 'dashboard', 'tunnel']);

// ---- fakes and fixtures ---------------------------------------------------------------------------

/** In-memory keys and subdomain claims, with the semantics the database gives the real one. */
class FakeAuthority implements TunnelAuthority {
  readonly keys = new Map<string, TunnelOwner>();
  readonly deployments = new Set<string>();
  readonly claims = new Map<string, { userId: string; tunnelId: string }>();
  readonly lastUsed = new Map<string, number>();
  authCalls = 0;
  claimCalls = 0;
  releases = 0;
  /** When set, claims wait for it (to act while a connect is between authentication and handshake). */
  claimGate: Promise<void> | undefined;
  #next = 0;

  /** Creates an API key for `userId`; returns the key and its owner. */
  addKey(userId: string): { key: string; owner: TunnelOwner } {
    const key = `slw_k1_${randomBytes(24).toString('hex')}`;
    const owner = { userId, apiKeyId: `key-${++this.#next}` };
    this.keys.set(key, owner);
    return { key, owner };
  }

  async authenticateKey(key: string): Promise<TunnelOwner | null> {
    this.authCalls++;
    const owner = this.keys.get(key);
    if (owner === undefined) return null;
    this.lastUsed.set(owner.apiKeyId, Date.now());
    return owner;
  }

  async claimSubdomain(subdomain: string, owner: TunnelOwner, tunnelId: string): Promise<'ok' | 'taken' | 'invalid'> {
    this.claimCalls++;
    if (this.claimGate !== undefined) await this.claimGate;
    if (RESERVED.has(subdomain)) return 'invalid';
    if (this.deployments.has(subdomain)) return 'taken';
    const claim = this.claims.get(subdomain);
    if (claim !== undefined && claim.userId !== owner.userId) return 'taken';
    this.claims.set(subdomain, { userId: owner.userId, tunnelId });
    return 'ok';
  }

  async releaseSubdomain(subdomain: string, tunnelId: string): Promise<void> {
    this.releases++;
    if (this.claims.get(subdomain)?.tunnelId === tunnelId) this.claims.delete(subdomain);
  }
}

interface LocalApp {
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
async function startLocalApp(): Promise<LocalApp> {
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
function patternStream(total: number, onChunk: (n: number) => void = () => {}): Readable {
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

function patternSha(total: number): string {
  const hash = createHash('sha256');
  const block = Buffer.alloc(64 * 1024);
  for (let i = 0; i < block.length; i++) block[i] = (i * 31 + 7) & 0xff;
  for (let sent = 0; sent < total; sent += block.length) hash.update(block.subarray(0, Math.min(block.length, total - sent)));
  return hash.digest('hex');
}

interface Stack {
  readonly table: RoutingTable;
  readonly authority: FakeAuthority;
  readonly server: TunnelServer;
  readonly port: number;
  readonly url: string;
  /** Sockets accepted by the front server, to simulate faults. */
  readonly upgrades: Socket[];
  /** Connections the front door gave a tunnel's raw pipe (from visitors, or from HAProxy for them). */
  readonly piped: Socket[];
  /** What the tunnel server logged. */
  readonly logs: Array<{ level: string; msg: string; detail: Record<string, unknown> | undefined }>;
  close(): Promise<void>;
}

interface StackOptions {
  authority?: FakeAuthority;
  port?: number;
  tunnelsPerKey?: number;
  streamsPerTunnel?: number;
  heartbeatMs?: number;
  graceMs?: number;
  idleTimeoutMs?: number;
  /** Serve tunnel visitors with the HTTP server (as the Node plane's TLS port does) instead of through the front door's raw pipe. */
  httpOnly?: boolean;
  /** Who owns the public port: Node itself, or HAProxy with Node behind it on its Unix socket (as main.ts wires them). */
  plane?: PlaneKind;
}

/** The front server as main.ts wires it: tunnel connects to the TunnelServer, app hosts to the AppProxy. */
async function startStack(options: StackOptions = {}): Promise<Stack> {
  const table = new RoutingTable(DOMAIN);
  const authority = options.authority ?? new FakeAuthority();
  let port = options.port ?? 0;
  const logs: Stack['logs'] = [];
  const server = new TunnelServer({
    log: (level, msg, detail) => logs.push({ level, msg, detail }),
    dataPlane: tableOnly(table),
    authority,
    publicUrlFor: (subdomain) => `http://${subdomain}.${DOMAIN}:${port}`,
    limits: { tunnelsPerKey: options.tunnelsPerKey ?? 10, streamsPerTunnel: options.streamsPerTunnel ?? 200 },
    // The product's interval: a 1 s one missed its pongs behind a busy link on a loaded machine and
    // dropped the tunnel mid-test. Tests of liveness set their own.
    heartbeatMs: options.heartbeatMs ?? 10_000,
    graceMs: options.graceMs ?? 30_000,
    ...(options.idleTimeoutMs === undefined ? {} : { idleTimeoutMs: options.idleTimeoutMs }),
  });
  const proxy = new AppProxy({ table, publicProtocol: 'http' });
  const upgrades: Socket[] = [];
  const piped: Socket[] = [];
  const front: Server = createServer((req, res) => {
    if (!proxy.handleRequest(req, res)) {
      res.statusCode = 404;
      res.end('api');
    }
  });
  front.on('upgrade', (req: IncomingMessage, socket: Socket, head: Buffer) => {
    if (new URL(req.url ?? '/', 'http://x').pathname === CONNECT_PATH) {
      upgrades.push(socket);
      server.handleUpgrade(req, socket, head);
    } else if (!proxy.handleUpgrade(req, socket, head)) {
      socket.destroy();
    }
  });
  // As main.ts: what Node's parser refuses is answered as the edge answers it (a page on app hosts).
  front.on('clientError', edgeRefusals((host) => table.resolveHost(host) !== null).clientError);
  // As main.ts: connections whose first request names a connected tunnel become its raw pipe.
  const door = frontDoor({
    http: front,
    headTimeoutMs: 20_000,
    target: (host, socket) => {
      const target = options.httpOnly === true ? undefined : connectedTunnel(table, host, () => ({ release: (idle) => front.emit('connection', idle) }));
      if (target !== undefined) piped.push(socket);
      return target;
    },
  });
  let listener: TcpServer;
  let haproxy: { plane: HaproxyDataPlane; dir: string } | undefined;
  if (options.plane === 'haproxy') {
    // HAProxy owns the public port; Node reads each connection's PROXY header, then the front door.
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'slipway-tunnel-haproxy-'));
    const config = loadConfig({ SLIPWAY_DATA_DIR: dir, SLIPWAY_DOMAIN: DOMAIN });
    listener = proxyProtocolListener(front, config.edge.headersTimeoutMs, door);
    await listenForHaproxy(listener, haproxyFiles(dir).nodeSocket);
    if (port === 0) port = await freePort();
    const binary = await findHaproxy(undefined);
    if (!('path' in binary)) throw new Error(`the HAProxy plane cannot be tested: ${binary.missing}`);
    const plane = new HaproxyDataPlane({
      binary: binary.path,
      dataDir: dir,
      domain: DOMAIN,
      table,
      bindHost: '127.0.0.1',
      bindPort: port,
      // HAProxy closes a visitor connection idle between requests (Node's own bound sits behind it).
      limits: options.idleTimeoutMs === undefined ? config.edge : { ...config.edge, keepAliveTimeoutMs: options.idleTimeoutMs },
      publicProtocol: 'http',
      fastPath: true,
      threads: config.haproxyThreads,
      log: () => undefined,
    });
    await plane.start();
    haproxy = { plane, dir };
  } else {
    listener = createTcpServer(door);
    // The HTTP server never listens itself: its connection tracking (closeAllConnections) starts on 'listening'.
    listener.once('listening', () => front.emit('listening'));
    listener.listen(port, '127.0.0.1');
    await once(listener, 'listening');
    port = (listener.address() as AddressInfo).port;
  }
  return {
    table,
    authority,
    server,
    port,
    url: `http://127.0.0.1:${port}`,
    upgrades,
    piped,
    logs,
    close: async () => {
      await server.close();
      proxy.close();
      front.closeAllConnections();
      for (const socket of upgrades) socket.destroy();
      await haproxy?.plane.close();
      await new Promise((resolve) => listener.close(resolve));
      if (haproxy !== undefined) fs.rmSync(haproxy.dir, { recursive: true, force: true, maxRetries: 5 });
    },
  };
}

interface Client {
  readonly events: TunnelClientEvent[];
  /** Settles when the client stops: `error` holds the rejection, if any. */
  readonly result: Promise<{ error: (Error & { code?: string }) | undefined }>;
  stop(): Promise<void>;
  /** Waits for the n-th (1-based) `connected` event. */
  connected(n?: number): Promise<{ url: string; subdomain: string }>;
}

function startClient(
  stack: { url: string },
  options: { apiKey: string; port: number; subdomain?: string; maxBackoffMs?: number; serverUrl?: string; force?: boolean },
): Client {
  const controller = new AbortController();
  const events: TunnelClientEvent[] = [];
  const result = runTunnelClient({
    serverUrl: options.serverUrl ?? stack.url,
    apiKey: options.apiKey,
    port: options.port,
    ...(options.subdomain === undefined ? {} : { subdomain: options.subdomain }),
    ...(options.force === undefined ? {} : { force: options.force }),
    maxBackoffMs: options.maxBackoffMs ?? 300,
    signal: controller.signal,
    onEvent: (event) => events.push(event),
  }).then(
    () => ({ error: undefined }),
    (error: Error & { code?: string }) => ({ error }),
  );
  return {
    events,
    result,
    stop: async () => {
      controller.abort();
      await result;
    },
    connected: async (n = 1) => {
      const list = await waitFor(() => {
        const found = events.filter((e) => e.type === 'connected');
        return found.length >= n ? found : undefined;
      }, 5000, 'tunnel connected');
      const event = list[n - 1];
      assert.ok(event?.type === 'connected');
      return { url: event.url, subdomain: event.subdomain };
    },
  };
}

/** Polls `probe` until it returns a value (not undefined/false) or the timeout passes. */
async function waitFor<T>(probe: () => T | undefined | false, timeoutMs: number, what: string): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = probe();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(10);
  }
}

// Idle kept-alive connections are dropped after 2 s, well before the servers' 5 s keep-alive
// timeout: a request sent into a connection the server is closing at that moment fails with
// "socket hang up" (no client can tell), which a loaded machine made happen.
const visitorAgent = new Agent({ keepAlive: true, maxSockets: 256, timeout: 2000 });

interface Visit {
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
async function visit(
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
async function peakRssGrowth(work: () => Promise<void>): Promise<number> {
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

// ---- tests ----------------------------------------------------------------------------------------

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
  
    it('streams a 100 MiB upload with bounded memory', async (t) => {
      const total = 100 * MiB;
      let answer: Visit | undefined;
      const growth = await peakRssGrowth(async () => {
        answer = await visit(stack.port, name, '/upload', { method: 'POST', body: patternStream(total) });
      });
      assert.equal(answer?.status, 200);
      assert.deepEqual(JSON.parse(answer?.body.toString() ?? '{}'), { bytes: total, sha256: patternSha(total) });
      t.diagnostic(`peak RSS growth ${(growth / MiB).toFixed(1)} MiB`);
      assert.ok(growth < 60 * MiB, `RSS grew ${(growth / MiB).toFixed(1)} MiB`);
    });
  
    it('streams a 100 MiB download with bounded memory, and a paused visitor stalls the app', async (t) => {
      const total = 100 * MiB;
      let received = 0;
      let stalledAt = -1;
      let stalledLater = -1;
      const hash = createHash('sha256');
      const growth = await peakRssGrowth(async () => {
        const req = request({ host: '127.0.0.1', port: stack.port, path: `/download?bytes=${total}`, headers: { host: `${name}.${DOMAIN}` }, agent: visitorAgent });
        req.end();
        const [res] = (await once(req, 'response')) as [IncomingMessage];
        assert.equal(res.statusCode, 200);
        assert.equal(res.headers['content-length'], String(total));
        let paused = false;
        res.on('data', (chunk: Buffer) => {
          received += chunk.length;
          hash.update(chunk);
          if (!paused && received > 10 * MiB) {
            // A visitor that stops reading: back-pressure must reach the app, which stops writing.
            paused = true;
            res.pause();
            void (async () => {
              // Stalled: the app wrote nothing for 300 ms (waited for up to 20 s: buffers fill slowly on a loaded machine).
              const deadline = Date.now() + 20_000;
              do {
                stalledAt = app.written;
                await sleep(300);
                stalledLater = app.written;
              } while (stalledAt !== stalledLater && Date.now() < deadline);
              res.resume();
            })();
          }
        });
        await once(res, 'end');
      });
      assert.equal(received, total);
      assert.equal(hash.digest('hex'), patternSha(total));
      assert.equal(stalledAt, stalledLater, 'the app kept writing while the visitor was paused');
      assert.ok(stalledAt < total, 'the app finished writing while the visitor was paused');
      t.diagnostic(`peak RSS growth ${(growth / MiB).toFixed(1)} MiB`);
      assert.ok(growth < 60 * MiB, `RSS grew ${(growth / MiB).toFixed(1)} MiB`);
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

/** A raw visitor connection: write bytes, read what comes back, see when the server ends it. */
async function rawVisitor(port: number): Promise<{ socket: Socket; received(): string; closed: Promise<void>; waitFor(text: RegExp, what: string): Promise<string> }> {
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

for (const plane of PLANES) describe(`tunnel: refusals and ownership (${plane} data plane)`, () => {
  let stack: Stack;
  before(async () => {
    stack = await startStack({ plane, tunnelsPerKey: 2 });
  });
  after(() => stack.close());

  it('refuses an unknown key once, without retrying', async () => {
    const client = startClient(stack, { apiKey: 'slw_k1_notarealkeynotarealkeynotarealkey', port: app.port });
    const { error } = await client.result;
    assert.equal(error?.code, 'unauthorized');
    assert.match(error?.message ?? '', /invalid or has been deleted/);
    const calls = stack.authority.authCalls;
    await sleep(400);
    assert.equal(stack.authority.authCalls, calls);
    assert.equal(client.events.filter((e) => e.type === 'disconnected').length, 0);
  });

  it('refuses a session token (not an API key) without looking it up', async () => {
    const calls = stack.authority.authCalls;
    const client = startClient(stack, { apiKey: 'sess_0123456789abcdef', port: app.port });
    const { error } = await client.result;
    assert.equal(error?.code, 'unauthorized');
    assert.equal(stack.authority.authCalls, calls);
  });

  it('answers refusals as HTTP errors with a JSON body, before any handshake', async () => {
    const ws = new WebSocket(`ws://127.0.0.1:${stack.port}${CONNECT_PATH}`, { headers: { authorization: 'Bearer nope' } });
    const [, res] = (await once(ws, 'unexpected-response')) as [unknown, IncomingMessage];
    const chunks: Buffer[] = [];
    for await (const chunk of res) chunks.push(chunk as Buffer);
    assert.equal(res.statusCode, 401);
    assert.equal(res.headers['www-authenticate'], 'Bearer');
    assert.deepEqual(Object.keys(JSON.parse(Buffer.concat(chunks).toString()) as object), ['error', 'message']);
    ws.on('error', () => {});
    ws.terminate();
  });

  it('refuses a name held by another user or a deployment, or a reserved/invalid one', async () => {
    const a = stack.authority.addKey('user-a');
    const b = stack.authority.addKey('user-b');
    const holder = startClient(stack, { apiKey: a.key, port: app.port, subdomain: 'shared' });
    await holder.connected();
    const thief = startClient(stack, { apiKey: b.key, port: app.port, subdomain: 'shared' });
    const { error } = await thief.result;
    assert.equal(error?.code, 'subdomain_taken');
    assert.match(error?.message ?? '', /shared/);

    stack.authority.deployments.add('deployed');
    assert.equal((await startClient(stack, { apiKey: b.key, port: app.port, subdomain: 'deployed' }).result).error?.code, 'subdomain_taken');
    assert.equal((await startClient(stack, { apiKey: b.key, port: app.port, subdomain: 'admin' }).result).error?.code, 'validation_error');
    assert.equal((await startClient(stack, { apiKey: b.key, port: app.port, subdomain: '-bad-' }).result).error?.code, 'validation_error');
    // The holder was never disturbed.
    assert.equal((await visit(stack.port, 'shared', '/hello')).status, 200);
    await holder.stop();
  });

  it('lets the same user take the name back: after a drop, and over a live connection', async () => {
    const a1 = stack.authority.addKey('user-c');
    const a2 = stack.authority.addKey('user-c');
    const other = stack.authority.addKey('user-d');
    const first = startClient(stack, { apiKey: a1.key, port: app.port, subdomain: 'mine' });
    await first.connected();
    await first.stop();
    await waitFor(() => stack.table.get('mine')?.state === 'disconnected', 2000, 'disconnected');
    // Held for the owner during the grace period: another user cannot have it.
    assert.equal((await startClient(stack, { apiKey: other.key, port: app.port, subdomain: 'mine' }).result).error?.code, 'subdomain_taken');
    const second = startClient(stack, { apiKey: a1.key, port: app.port, subdomain: 'mine' });
    await second.connected();
    assert.equal((await visit(stack.port, 'mine', '/hello')).status, 200);
    // A second tunnel of the same user is refused while the first is live, naming --force ...
    const refused = (await startClient(stack, { apiKey: a2.key, port: app.port, subdomain: 'mine' }).result).error;
    assert.equal(refused?.code, 'subdomain_taken');
    assert.match(refused?.message ?? '', /already have a live tunnel on "mine".*--force/);
    // ... and with it replaces the live one, which stops for good.
    const third = startClient(stack, { apiKey: a2.key, port: app.port, subdomain: 'mine', force: true });
    await third.connected();
    assert.equal((await second.result).error?.code, 'tunnel_replaced');
    assert.equal((await visit(stack.port, 'mine', '/hello')).status, 200);
    assert.equal(stack.server.list('user-c').length, 1);
    await third.stop();
  });

  it('limits live tunnels per key', async () => {
    const k = stack.authority.addKey('user-e');
    const one = startClient(stack, { apiKey: k.key, port: app.port, subdomain: 'one' });
    const two = startClient(stack, { apiKey: k.key, port: app.port, subdomain: 'two' });
    await Promise.all([one.connected(), two.connected()]);
    const three = startClient(stack, { apiKey: k.key, port: app.port, subdomain: 'three' });
    const { error } = await three.result;
    assert.equal(error?.code, 'rate_limited');
    await Promise.all([one.stop(), two.stop()]);
  });

  it('closes the tunnels of a deleted key within a few seconds, for good', async () => {
    const k = stack.authority.addKey('user-f');
    const client = startClient(stack, { apiKey: k.key, port: app.port, subdomain: 'revoked' });
    await client.connected();
    const started = Date.now();
    stack.authority.keys.delete(k.key);
    stack.server.closeForKey(k.owner.apiKeyId);
    const { error } = await client.result;
    assert.ok(Date.now() - started < 3000);
    assert.equal(error?.code, 'unauthorized');
    assert.equal(stack.table.get('revoked'), undefined);
    assert.equal(stack.authority.claims.has('revoked'), false);
    assert.equal((await visit(stack.port, 'revoked', '/')).status, 404);
  });
});

for (const plane of PLANES) describe(`tunnel: limits and link failures (${plane} data plane)`, () => {
  it('answers 503 quickly once a tunnel carries its maximum of streams', async () => {
    const stack = await startStack({ plane, streamsPerTunnel: 2 });
    const client = startClient(stack, { apiKey: stack.authority.addKey('u').key, port: app.port, subdomain: 'busy' });
    await client.connected();
    const seen = app.slowSeen;
    let answered = 0;
    const slow = [visit(stack.port, 'busy', '/slow'), visit(stack.port, 'busy', '/slow')].map((v) => v.finally(() => answered++));
    await waitFor(() => stack.server.list('u')[0]?.streams === 2, 10_000, 'two streams');
    const refused = await visit(stack.port, 'busy', '/hello');
    assert.equal(refused.status, 503);
    // Refused while both streams were still held (without waiting for either), however long it took.
    assert.equal(answered, 0);
    // Released once the app holds both: released earlier, a request still on its way would wait forever.
    await waitFor(() => app.slowSeen - seen >= 2, 10_000, 'the app to receive both /slow');
    app.releaseSlow();
    for (const result of await Promise.all(slow)) assert.equal(result.body.toString(), 'slow done');
    await client.stop();
    await stack.close();
  });

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

/** A TCP forwarder whose existing connections can be made to silently drop everything. */
async function startBlackholeProxy(targetPort: number): Promise<{ port: number; blackhole(): void; close(): void }> {
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

/** The routing table as a data plane (tunnels never drain). */
function tableOnly(table: RoutingTable) {
  return nodeDataPlane(table, { drain: async () => undefined });
}

// ---- limits counted before the work (issue 8, finding 5) -------------------------------------------

/** A raw TCP connect that sends a tunnel upgrade request; `headers` replace the WebSocket ones. */
async function rawUpgrade(port: number, key: string, subdomain: string, headers?: string[]): Promise<Socket> {
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
async function readUntilClose(socket: Socket, timeoutMs: number): Promise<string> {
  const chunks: Buffer[] = [];
  socket.on('data', (chunk: Buffer) => chunks.push(chunk));
  await Promise.race([once(socket, 'close'), sleep(timeoutMs)]);
  socket.destroy();
  return Buffer.concat(chunks).toString('latin1');
}

/** A visitor request that settles with its status, 'closed' (no answer) or 'timeout'. */
function visitStatus(port: number, name: string, path: string, timeoutMs: number): Promise<number | 'closed' | 'timeout'> {
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
function openFlood(count: number, firstId: number): Buffer {
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

for (const plane of PLANES) describe(`tunnel: limits counted before the work (${plane} data plane)`, () => {
  it('a handshake broken after authentication holds no name: another user takes it at once', async () => {
    const stack = await startStack({ plane });
    const attacker = stack.authority.addKey('attacker');
    const honest = stack.authority.addKey('honest');
    // No Sec-WebSocket-Key: refused before the key is even looked up, nothing claimed.
    const early = await rawUpgrade(stack.port, attacker.key, 'contested', ['Sec-WebSocket-Version: 13']);
    assert.match(await readUntilClose(early, 5000), /^HTTP\/1\.1 400 /);
    assert.equal(stack.authority.claimCalls, 0);
    // A handshake only ws itself refuses (a malformed Sec-WebSocket-Protocol), after the claim.
    const socket = await rawUpgrade(stack.port, attacker.key, 'contested', [
      'Sec-WebSocket-Version: 13',
      `Sec-WebSocket-Key: ${randomBytes(16).toString('base64')}`,
      'Sec-WebSocket-Protocol: "not a token"',
    ]);
    assert.match(await readUntilClose(socket, 5000), /^HTTP\/1\.1 400 /);
    assert.equal(stack.authority.claimCalls, 1, 'the name was claimed before the handshake');
    await waitFor(() => stack.authority.releases >= 1, 2000, 'claim released');
    const client = startClient(stack, { apiKey: honest.key, port: app.port, subdomain: 'contested' });
    assert.equal((await client.connected()).subdomain, 'contested');
    assert.equal((await visit(stack.port, 'contested', '/hello')).status, 200);
    await client.stop();
    await stack.close();
  });

  it('a connect reset while its name is being claimed holds no name', async () => {
    const stack = await startStack({ plane });
    const attacker = stack.authority.addKey('attacker');
    const honest = stack.authority.addKey('honest');
    let open = (): void => {};
    stack.authority.claimGate = new Promise<void>((resolve) => (open = resolve));
    const socket = await rawUpgrade(stack.port, attacker.key, 'aborted');
    await waitFor(() => stack.authority.claimCalls === 1, 2000, 'claim started');
    socket.resetAndDestroy();
    await waitFor(() => stack.upgrades[0]?.destroyed === true || stack.upgrades[0]?.readable === false, 2000, 'server saw the reset');
    stack.authority.claimGate = undefined;
    open();
    await waitFor(() => stack.authority.releases >= 1, 2000, 'claim released');
    assert.equal(stack.authority.claims.has('aborted'), false);
    const client = startClient(stack, { apiKey: honest.key, port: app.port, subdomain: 'aborted' });
    assert.equal((await client.connected()).subdomain, 'aborted');
    await client.stop();
    await stack.close();
  });

  it('a client that never completes the handshake (never answers a ping) loses its name within a heartbeat, with no grace', async () => {
    const stack = await startStack({ plane, heartbeatMs: 200, graceMs: 60_000 });
    const attacker = stack.authority.addKey('attacker');
    const honest = stack.authority.addKey('honest');
    // A raw socket: it gets the 101, READY and a ping, and answers nothing.
    const socket = await rawUpgrade(stack.port, attacker.key, 'silent');
    socket.pause();
    await waitFor(() => stack.table.get('silent') !== undefined, 2000, 'tunnel attached');
    await waitFor(() => stack.table.get('silent') === undefined && !stack.authority.claims.has('silent'), 3000, 'name released');
    const client = startClient(stack, { apiKey: honest.key, port: app.port, subdomain: 'silent' });
    assert.equal((await client.connected()).subdomain, 'silent');
    await client.stop();
    socket.destroy();
    await stack.close();
  });

  it('liveness needs answered pings: a client that keeps sending but stopped reading is dropped', async () => {
    const stack = await startStack({ plane, heartbeatMs: 150, graceMs: 60_000 });
    const { key } = stack.authority.addKey('talker');
    const ws = new WebSocket(`ws://127.0.0.1:${stack.port}${CONNECT_PATH}?subdomain=talker`, { headers: { authorization: `Bearer ${key}` }, perMessageDeflate: false });
    ws.on('error', () => {});
    await once(ws, 'message'); // READY (the first ping was answered by ws's automatic pong)
    await waitFor(() => stack.table.get('talker')?.state === 'connected', 2000, 'connected');
    const socket = (ws as unknown as { _socket: Socket })._socket;
    socket.pause();
    // Keeps talking: WINDOW frames, unsolicited pongs, text. None of it answers a ping.
    const window = Buffer.from([6, 0, 0, 0, 9, 0, 0, 0, 1]);
    const chatter = setInterval(() => {
      ws.send(window);
      ws.pong(Buffer.from('not-the-nonce'));
      ws.send('{"type":"noise"}');
    }, 20);
    try {
      await waitFor(() => stack.table.get('talker')?.state !== 'connected', 3000, 'the silent reader dropped');
      // It had answered pings before: the usual grace period holds the name for its owner.
      assert.equal(stack.table.get('talker')?.state, 'disconnected');
    } finally {
      clearInterval(chatter);
      ws.terminate();
    }
    await stack.close();
  });

  it('a client that never reads is disconnected before the server queues more than the cap for it, and its name is freed', async () => {
    const stack = await startStack({ plane, heartbeatMs: 60_000, graceMs: 60_000 });
    const attacker = stack.authority.addKey('attacker');
    const bystander = stack.authority.addKey('bystander');
    const other = startClient(stack, { apiKey: bystander.key, port: app.port, subdomain: 'bystander' });
    await other.connected();

    const ws = new WebSocket(`ws://127.0.0.1:${stack.port}${CONNECT_PATH}?subdomain=sink`, { headers: { authorization: `Bearer ${attacker.key}` }, perMessageDeflate: false });
    ws.on('error', () => {});
    await once(ws, 'message'); // READY; the first ping was answered: a proven client
    await waitFor(() => stack.table.get('sink')?.state === 'connected', 2000, 'connected');
    // The server side of this tunnel's TCP connection: measure what the server queues on it after
    // every write (the bytes userland holds for the client; the kernel's buffers are the kernel's).
    const serverSocket = stack.upgrades.at(-1) as Socket;
    let peakQueued = 0;
    const write = serverSocket.write.bind(serverSocket) as (...args: unknown[]) => boolean;
    (serverSocket as unknown as { write: (...args: unknown[]) => boolean }).write = (...args: unknown[]) => {
      const result = write(...args);
      peakQueued = Math.max(peakQueued, serverSocket.writableLength);
      return result;
    };
    (ws as unknown as { _socket: Socket })._socket.pause();

    let flooded = 0;
    let statuses: Array<number | 'closed' | 'timeout'> = [];
    const rss = await peakRssGrowth(async () => {
      // Visitors hammer its name (OPEN, request heads, aborts → RESETs) while it floods OPENs, each
      // answered with a RESET it never reads.
      const visitors = Array.from({ length: 100 }, () => visitStatus(stack.port, 'sink', '/hello', 30_000));
      const aborts = Array.from({ length: 100 }, () => visitStatus(stack.port, 'sink', `/abort/${'x'.repeat(900)}`, 20));
      let sent = 0;
      const deadline = Date.now() + 30_000;
      while (stack.table.get('sink') !== undefined && Date.now() < deadline && sent < 400 * MiB) {
        if (ws.readyState === WebSocket.OPEN) {
          ws.send(openFlood(100_000, sent));
          sent += 900_000;
        }
        await sleep(5);
      }
      flooded = sent;
      statuses = await Promise.all(visitors);
      await Promise.all(aborts);
    });
    process.stdout.write(
      `# never-reading client: ${(flooded / MiB).toFixed(0)} MiB of OPENs sent, test process RSS growth ${(rss / MiB).toFixed(1)} MiB, ` +
        `peak queued by the server ${peakQueued} bytes (cap ${MAX_OUTBOUND_BYTES})\n`,
    );
    assert.equal(stack.table.get('sink'), undefined, `still connected after ${flooded} bytes of OPENs`);
    for (const status of statuses) assert.ok(status === 502 || status === 503 || status === 404 || status === 'closed', `visitor got ${status}`);

    const logged = stack.logs.find((entry) => entry.msg.includes('stopped reading'));
    assert.ok(logged !== undefined, 'the overflow was logged');
    const peakOutbound = Number(logged.detail?.['peakOutboundBytes']);
    assert.ok(peakOutbound > MAX_OUTBOUND_BYTES / 2 && peakOutbound <= MAX_OUTBOUND_BYTES, `peak ${peakOutbound}`);
    assert.ok(peakQueued <= MAX_OUTBOUND_BYTES, `the server queued ${peakQueued} bytes for the client`);
    await waitFor(() => !stack.authority.claims.has('sink'), 2000, 'name released');
    // Others are served throughout, and the freed name can be taken at once.
    assert.equal((await visit(stack.port, 'bystander', '/hello')).status, 200);
    const next = startClient(stack, { apiKey: bystander.key, port: app.port, subdomain: 'sink' });
    assert.equal((await next.connected()).subdomain, 'sink');
    ws.terminate();
    await Promise.all([other.stop(), next.stop()]);
    await stack.close();
  });
});
