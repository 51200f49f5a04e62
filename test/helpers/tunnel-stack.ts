// Test fixture of the tunnel suites: the front server as main.ts wires it (either data plane) with a fake key authority, and a tunnel client to drive.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import fs from 'node:fs';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import { createServer as createTcpServer, type AddressInfo, type Server as TcpServer, type Socket } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { loadConfig } from '../../src/config.js';
import { AppProxy } from '../../src/proxy/app-proxy.js';
import { connectedTunnel, frontDoor } from '../../src/proxy/front-door.js';
import { edgeRefusals } from '../../src/proxy/edge-refusals.js';
import { findHaproxy } from '../../src/proxy/haproxy/haproxy-binary.js';
import { HaproxyDataPlane, haproxyFiles, listenForHaproxy } from '../../src/proxy/haproxy/haproxy-data-plane.js';
import { nodeDataPlane } from '../../src/proxy/node-data-plane.js';
import { proxyProtocolListener } from '../../src/proxy/proxy-protocol.js';
import { RoutingTable } from '../../src/proxy/routing-table.js';
import { CONNECT_PATH } from '../../src/tunnel/protocol.js';
import { runTunnelClient, type TunnelClientEvent } from '../../src/tunnel/tunnel-client.js';
import { TunnelServer, type TunnelAuthority, type TunnelOwner } from '../../src/tunnel/tunnel-server.js';
import { freePort } from './net.js';
import type { PlaneKind } from './planes.js';

export const DOMAIN = 'localhost';
const RESERVED = new Set(['api', 'www', 'admin', 'app', 'dashboard', 'tunnel']);


/** In-memory keys and subdomain claims, with the semantics the database gives the real one. */
export class FakeAuthority implements TunnelAuthority {
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

export interface Stack {
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

export interface StackOptions {
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
export async function startStack(options: StackOptions = {}): Promise<Stack> {
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
  // As the edge: what Node's parser refuses is answered as the edge answers it (a page on app hosts).
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

export interface Client {
  readonly events: TunnelClientEvent[];
  /** Settles when the client stops: `error` holds the rejection, if any. */
  readonly result: Promise<{ error: (Error & { code?: string }) | undefined }>;
  stop(): Promise<void>;
  /** Waits for the n-th (1-based) `connected` event. */
  connected(n?: number): Promise<{ url: string; subdomain: string }>;
}

export function startClient(
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
export async function waitFor<T>(probe: () => T | undefined | false, timeoutMs: number, what: string): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = probe();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(10);
  }
}

/** The routing table as a data plane (tunnels never drain). */
function tableOnly(table: RoutingTable) {
  return nodeDataPlane(table, { drain: async () => undefined });
}
