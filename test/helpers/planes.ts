// Test factory: a data plane in front of a routing table, either the Node proxy alone or HAProxy with Node behind it (as main.ts wires them).
import { once } from 'node:events';
import fs from 'node:fs';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo, Server as TcpServer } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import type { Duplex } from 'node:stream';
import { loadConfig } from '../../src/config.js';
import { AppProxy } from '../../src/proxy/app-proxy.js';
import { HaproxyDataPlane, haproxyFiles, listenForHaproxy } from '../../src/proxy/haproxy/haproxy-data-plane.js';
import { findHaproxy } from '../../src/proxy/haproxy/haproxy-binary.js';
import { proxyProtocolListener } from '../../src/proxy/proxy-protocol.js';
import { requestHeadProblem, writeBadRequest, writeRawBadRequest } from '../../src/proxy/request-guard.js';
import { RoutingTable, type Upstream } from '../../src/proxy/routing-table.js';

export type PlaneKind = 'node' | 'haproxy';

/** Both planes: every routing suite runs once per plane (HAProxy is installed by `npm test`). */
export const PLANES: readonly PlaneKind[] = ['node', 'haproxy'];

export interface PlaneUnderTest {
  readonly kind: PlaneKind;
  readonly table: RoutingTable;
  /** The public port. */
  readonly port: number;
  readonly haproxy: HaproxyDataPlane | undefined;
  /** How many connections the Node server behind the plane has accepted (from visitors or from HAProxy). */
  nodeConnections(): number;
  /** Drains an upstream in every plane that may hold requests to it (as main.ts does). */
  drain(upstream: Upstream, timeoutMs: number): Promise<void>;
  close(): Promise<void>;
}

/** Starts a plane for `domain` whose non-app hosts answer "api". */
export async function startPlane(kind: PlaneKind, domain: string, env: Record<string, string> = {}): Promise<PlaneUnderTest> {
  const table = new RoutingTable(domain);
  const proxy = new AppProxy({ table, publicProtocol: 'http' });
  const server: Server = createServer((req, res) => {
    const problem = requestHeadProblem(req);
    if (problem !== undefined) return writeBadRequest(res, problem);
    if (!proxy.handleRequest(req, res)) res.end('api');
  });
  let connections = 0;
  server.on('connection', () => (connections += 1));
  server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    const problem = requestHeadProblem(req);
    if (problem !== undefined) return writeRawBadRequest(socket, problem);
    if (!proxy.handleUpgrade(req, socket, head)) socket.destroy();
  });
  if (kind === 'node') {
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    return {
      kind,
      table,
      port: (server.address() as AddressInfo).port,
      haproxy: undefined,
      nodeConnections: () => connections,
      drain: (upstream, timeoutMs) => proxy.drain(upstream, timeoutMs),
      close: async () => {
        proxy.close();
        server.closeAllConnections();
        server.close();
      },
    };
  }
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'slipway-plane-'));
  const config = loadConfig({ SLIPWAY_DATA_DIR: dataDir, SLIPWAY_DOMAIN: domain, ...env });
  const binary = await findHaproxy(undefined);
  if (!('path' in binary)) throw new Error(`the HAProxy plane cannot be tested: ${binary.missing}`);
  const internal: TcpServer = proxyProtocolListener(server, config.edge.headersTimeoutMs);
  await listenForHaproxy(internal, haproxyFiles(dataDir).nodeSocket);
  const probe = createServer();
  probe.listen(0, '127.0.0.1');
  await once(probe, 'listening');
  const port = (probe.address() as AddressInfo).port;
  await new Promise((resolve) => probe.close(resolve));
  const haproxy = new HaproxyDataPlane({
    binary: binary.path,
    dataDir,
    domain,
    table,
    bindHost: '127.0.0.1',
    bindPort: port,
    limits: config.edge,
    publicProtocol: 'http',
    fastPath: true,
    threads: config.haproxyThreads,
    log: () => undefined,
  });
  await haproxy.start();
  return {
    kind,
    table,
    port,
    haproxy,
    nodeConnections: () => connections,
    drain: async (upstream, timeoutMs) => {
      await Promise.all([proxy.drain(upstream, timeoutMs), haproxy.drain(upstream, timeoutMs)]);
    },
    close: async () => {
      await haproxy.close();
      internal.close();
      proxy.close();
      server.closeAllConnections();
      fs.rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
