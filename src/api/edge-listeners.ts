// The edge part: the public listeners (Node's own, or the sockets behind HAProxy) and the one handler every request reaches.
import http from 'node:http';
import https from 'node:https';
import { createServer as createTcpServer, type AddressInfo, type Server as TcpServer, type Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { SecureContext } from 'node:tls';
import type { Config } from '../config.js';
import type { Log } from '../core/log.js';
import type { Part } from '../core/parts.js';
import type { CertificateSource } from '../proxy/certificate-source.js';
import type { DataPlanes } from '../proxy/data-planes.js';
import { connectedTunnel, frontDoor } from '../proxy/front-door.js';
import { haproxyFiles, listenForHaproxy } from '../proxy/haproxy/haproxy-data-plane.js';
import { launchHaproxy } from '../proxy/haproxy/haproxy-launch.js';
import { proxyProtocolListener } from '../proxy/proxy-protocol.js';
import { boundRequests, boundedServerOptions } from '../proxy/request-bounds.js';
import { requestHeadProblem } from '../proxy/request-guard.js';
import { edgeRefusals, type EdgeRefusals } from '../proxy/edge-refusals.js';
import { ApiTurns } from './api-turns.js';
import { answerUnmetExpectation, endSocketWithError, writeInternalError } from './socket-errors.js';

type Upgrade = (req: http.IncomingMessage, socket: Duplex, head: Buffer) => void;

/** HTTPS as the edge uses it (the tls part's offer while HTTPS is on). */
export interface EdgeTls {
  readonly certificates: CertificateSource & { secureContextFor(servername: string): SecureContext | undefined };
  /** A plain request's first look: an ACME challenge, or a 308 to https. True when answered. */
  answerPlain(req: http.IncomingMessage, res: http.ServerResponse, httpsPort: number): boolean;
  hasCertificate(hostHeader: string | undefined): boolean;
}

export interface EdgeDeps {
  readonly config: Config;
  readonly log: Log;
  readonly planes: DataPlanes;
  /** The API (Fastify's handler, without a listener of its own). */
  readonly api: { routing(req: http.IncomingMessage, res: http.ServerResponse): void };
  /** The tunnel server's WebSocket endpoint. */
  readonly tunnels: { handleUpgrade: Upgrade };
  /** Calls from another instance forwarding a visitor of a tunnel held here. */
  readonly acrossInstances: {
    handleRequest(req: http.IncomingMessage, res: http.ServerResponse): boolean;
    handleUpgrade(req: http.IncomingMessage, socket: Duplex, head: Buffer): boolean;
  };
  /** Managed databases' WebSocket endpoint (`slipway db connect`); takes its upgrades (true). */
  readonly databases?: { handleUpgrade(req: http.IncomingMessage, socket: Duplex, head: Buffer): boolean } | undefined;
  readonly tls: EdgeTls | undefined;
  onRequestEnd(app: string, status: number, seconds: number): void;
}

/** The ports the edge got (known once it started). */
export interface EdgePorts {
  port: number;
  /** The TLS port when HTTPS is on. */
  httpsPort: number | undefined;
}

/** Builds the handlers and servers; `start` listens (and starts HAProxy in front when there is one). */
export function edgePart(deps: EdgeDeps): Part<EdgePorts> {
  const { config, planes, tls } = deps;
  const ports: EdgePorts = { port: 0, httpsPort: tls === undefined ? undefined : (config.https?.port ?? 0) };
  const { handleRequest, handleUpgrade, refusals } = edgeHandlers(deps);
  // The plain port: with HTTPS on, ACME challenges first, then 308 for every host that has a certificate.
  const server = http.createServer(boundedServerOptions(config.edge), (req, res) => {
    if (tls !== undefined && tls.answerPlain(req, res, ports.httpsPort ?? 0)) return;
    handleRequest(req, res);
  });
  /**
   * Every server of the edge: upgrades (WebSockets, tunnels; never redirected: their clients do not
   * follow redirects) to the one handler; requests Node's parser refuses get the same {error,
   * message} JSON as every other error (Slipway's page on app hosts); uploads and requests to apps
   * (streamed to the app) get the long bound, API JSON the short one.
   */
  const edgeServer = (s: http.Server): ReturnType<typeof boundRequests> => {
    s.on('upgrade', handleUpgrade);
    s.on('clientError', refusals.clientError);
    s.on('checkExpectation', answerUnmetExpectation);
    return boundRequests(s, config.edge, (req) => planes.table.resolveHost(req.headers.host) !== null || /^multipart\//i.test(req.headers['content-type'] ?? ''));
  };
  const connections = edgeServer(server);
  /**
   * Every connection to Node's plain listeners passes the front door: one whose first request names
   * a connected tunnel becomes a raw pipe through it (a plain request to a host with a certificate
   * excepted: its 308 comes from the HTTP server); any other goes to `target` HTTP server.
   */
  const withFrontDoor = (target: http.Server, encrypted: boolean): ((socket: Socket) => void) => {
    const door = frontDoor({
      http: target,
      headTimeoutMs: config.edge.headersTimeoutMs,
      answerLateHead: refusals.lateHead,
      target: (host) => {
        if (!encrypted && tls !== undefined && tls.hasCertificate(host)) return undefined;
        return connectedTunnel(planes.table, host, (app) => ({
          onRequestEnd: (status, seconds) => deps.onRequestEnd(app, status, seconds),
          release: (idle) => target.emit('connection', idle),
        }));
      },
    });
    // Counted against its address as it arrives, before its first head (whoever serves it after).
    return (socket) => {
      if (!connections.admit(socket)) return;
      if (encrypted) Object.defineProperty(socket, 'encrypted', { value: true });
      door(socket);
    };
  };
  const listeners: TcpServer[] = [];
  const servers: http.Server[] = [server];
  const start = async (): Promise<void> => {
    if (planes.haproxyBinary === undefined) ports.port = await listenOnNode(deps, server, withFrontDoor(server, false), listeners);
    else await listenBehindHaproxy(deps, planes.haproxyBinary, ports, { server, handleRequest, edgeServer, withFrontDoor, listeners, servers });
    if (config.port === 0 && config.publicUrl.port === '0') config.publicUrl.port = String(ports.port);
    // The TLS port (Node plane): the same handler, each handshake answered with the certificate for its SNI name.
    if (tls !== undefined && config.https !== undefined && planes.haproxy === undefined) {
      const tlsServer = https.createServer(
        {
          ...boundedServerOptions(config.edge),
          SNICallback: (servername, done) => {
            const context = tls.certificates.secureContextFor(servername);
            if (context === undefined) done(new Error(`no certificate for ${servername}`));
            else done(null, context);
          },
        },
        handleRequest,
      );
      edgeServer(tlsServer);
      servers.push(tlsServer);
      await listen(tlsServer, config.https.port, config.host);
      ports.httpsPort = (tlsServer.address() as AddressInfo).port;
    }
  };
  const stop = async (): Promise<void> => {
    await planes.haproxy?.close();
    for (const listener of listeners) listener.close();
    await Promise.all(servers.map((s) => new Promise<void>((resolve) => {
      s.close(() => resolve());
      s.closeAllConnections();
    })));
  };
  return { offers: ports, start, stop };
}

/** One handler for every port: app hosts go to the data plane, tunnels to the tunnel server, everything else to the API. */
function edgeHandlers(deps: EdgeDeps): { handleRequest: http.RequestListener; handleUpgrade: Upgrade; refusals: EdgeRefusals } {
  const { log, planes, api, tunnels, acrossInstances } = deps;
  // What is not yet a request (malformed, ambiguous, late) is refused as JSON for the API, with a page on app hosts.
  const refusals = edgeRefusals((host) => planes.table.resolveHost(host) !== null);
  // API requests start one per event-loop turn: app traffic and tunnels never wait behind a burst of them.
  const apiTurns = new ApiTurns((err) => log('error', 'API request handler threw', { error: err }));
  const handleRequest = (req: http.IncomingMessage, res: http.ServerResponse): void => {
    try {
      const problem = requestHeadProblem(req);
      if (problem !== undefined) return refusals.badRequest(req, res, problem);
      // Another instance forwarding a visitor of a tunnel held here: verified, or 401.
      if (acrossInstances.handleRequest(req, res)) return;
      if (!planes.proxy.handleRequest(req, res)) {
        apiTurns.run(() => {
          try {
            api.routing(req, res);
          } catch (err) {
            if (res.headersSent) res.destroy();
            else writeInternalError(res);
            throw err;
          }
        });
      }
    } catch (err) {
      // The last line of defence: a throw here would otherwise end the process for every tenant.
      log('error', 'request handler threw', { url: req.url, error: err });
      if (res.headersSent) res.destroy();
      else writeInternalError(res);
    }
  };
  const handleUpgrade = (req: http.IncomingMessage, socket: Duplex, head: Buffer): void => {
    // Node takes its own error listener off an upgraded socket: without one, a client that resets
    // while it is being answered (a 404 page, a refusal) is an uncaught exception that ends the process.
    socket.on('error', () => socket.destroy());
    try {
      const problem = requestHeadProblem(req);
      if (problem !== undefined) return refusals.rawBadRequest(req, socket, problem);
      if (acrossInstances.handleUpgrade(req, socket, head)) return;
      if (planes.proxy.handleUpgrade(req, socket, head)) return;
      if (deps.databases?.handleUpgrade(req, socket, head) === true) return;
      if ((req.url ?? '').split('?')[0] === '/api/v1/tunnels/connect') {
        tunnels.handleUpgrade(req, socket, head);
        return;
      }
      endSocketWithError(socket, 404, { error: 'not_found', message: 'no WebSocket endpoint at this path' });
    } catch (err) {
      log('error', 'upgrade handler threw', { url: req.url, error: err });
      socket.destroy();
    }
  };
  return { handleRequest, handleUpgrade, refusals };
}

/** The Node plane: Node's front door owns the public port. Returns the port bound. */
async function listenOnNode(deps: EdgeDeps, server: http.Server, connection: (socket: Socket) => void, listeners: TcpServer[]): Promise<number> {
  const { config, planes } = deps;
  const front = createTcpServer({ noDelay: true }, connection);
  front.maxConnections = config.edge.maxConnections;
  // The HTTP server never listens itself: its head/request timeout checks start on 'listening'.
  front.once('listening', () => server.emit('listening'));
  listeners.push(front);
  await listen(front, config.port, config.host);
  planes.nodeListening = true;
  front.once('close', () => (planes.nodeListening = false));
  return (front.address() as AddressInfo).port;
}

interface EdgeServers {
  readonly server: http.Server;
  readonly handleRequest: http.RequestListener;
  readonly edgeServer: (s: http.Server) => unknown;
  readonly withFrontDoor: (target: http.Server, encrypted: boolean) => (socket: Socket) => void;
  readonly listeners: TcpServer[];
  readonly servers: http.Server[];
}

/**
 * HAProxy owns the public port; Node serves the API, dashboard, tunnels and refusal pages behind it.
 * With HTTPS on, HAProxy terminates TLS with the manager's certificates and hands requests it
 * terminated to Node on a socket of their own: never redirected, https.
 */
async function listenBehindHaproxy(deps: EdgeDeps, binary: string, ports: EdgePorts, edge: EdgeServers): Promise<void> {
  const { config, planes, tls, log } = deps;
  const listener = proxyProtocolListener(edge.server, config.edge.headersTimeoutMs, edge.withFrontDoor(edge.server, false));
  edge.listeners.push(listener);
  const files = haproxyFiles(config.dataDir);
  await listenForHaproxy(listener, files.nodeSocket);
  if (tls !== undefined && config.https !== undefined) {
    const handoff = http.createServer(boundedServerOptions(config.edge), edge.handleRequest);
    edge.edgeServer(handoff);
    const handoffListener = proxyProtocolListener(handoff, config.edge.headersTimeoutMs, edge.withFrontDoor(handoff, true));
    edge.listeners.push(handoffListener);
    edge.servers.push(handoff);
    await listenForHaproxy(handoffListener, files.nodeTlsSocket);
  }
  const launched = await launchHaproxy(binary, config, planes.table, tls?.certificates, log);
  planes.haproxy = launched.plane;
  ports.port = launched.port;
  if (launched.httpsPort !== undefined) ports.httpsPort = launched.httpsPort;
}

function listen(server: TcpServer, port: number, host: string): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
}
