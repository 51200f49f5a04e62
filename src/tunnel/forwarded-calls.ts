// The holder's side of a forwarded tunnel visitor: the call is verified, then served by this instance's own tunnel (never forwarded again).
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import { endSocketWithError } from '../api/socket-errors.js';
import { displayHost, trustForwardedVisitor } from '../proxy/app-proxy.js';
import { badGatewayPage, notFoundPage, prefersJson, writePage, writeRawPage, type Page } from '../proxy/pages.js';
import type { RoutingTable, StreamTarget } from '../proxy/routing-table.js';
import type { InstanceCalls } from './instance-calls.js';
import { RemoteTunnel, offlineTunnelPage } from './remote-tunnel.js';

export interface ForwardedCallDeps {
  readonly calls: InstanceCalls;
  readonly table: RoutingTable;
  readonly log: (level: 'info' | 'warn' | 'error', msg: string, detail?: object) => void;
}

type Served = { readonly target: StreamTarget } | { readonly page: Page } | { readonly refused: string };

/** Verifies the call and finds this instance's own connected tunnel for its host. */
function resolve(req: IncomingMessage, deps: ForwardedCallDeps): Served {
  const host = req.headers.host ?? '';
  const verified = deps.calls.verify(req.method ?? '', host, req.url ?? '', req.headers);
  if (!verified.ok) {
    // Never the key, nor the signature: only why, and from where.
    deps.log('warn', 'an inter-instance call was refused', { reason: verified.message, from: req.socket.remoteAddress, host: displayHost(req) });
    return { refused: verified.message };
  }
  trustForwardedVisitor(req, { for: verified.forwardedFor, proto: verified.proto });
  const resolution = deps.table.resolveHost(host);
  const route = resolution?.route;
  if (resolution === null || route === undefined) return { page: notFoundPage(displayHost(req)) };
  // Only a tunnel held here: a route to yet another instance is not followed (no loops between instances).
  if (route.kind !== 'tunnel' || route.state !== 'connected' || route.target instanceof RemoteTunnel) return { page: offlineTunnelPage(displayHost(req)) };
  return { target: route.target };
}

/** Serves a request another instance forwarded (a visitor of a tunnel held here); a bad call → 401 and nothing reaches the tunnel. */
export function serveForwardedRequest(req: IncomingMessage, res: ServerResponse, deps: ForwardedCallDeps): void {
  const served = resolve(req, deps);
  if ('refused' in served) {
    const body = JSON.stringify({ error: 'unauthorized', message: `Inter-instance call refused: ${served.refused}.` });
    res.writeHead(401, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(body), 'cache-control': 'no-store', connection: 'close' });
    res.end(body);
    return;
  }
  if ('page' in served) return writePage(res, served.page, prefersJson(req.headers.accept));
  try {
    served.target.handleRequest(req, res);
  } catch (err) {
    deps.log('error', 'tunnel target threw on a forwarded request', { host: displayHost(req), error: String(err) });
    writePage(res, badGatewayPage(displayHost(req)));
  }
}

/** Same for an upgrade (WebSocket) another instance forwarded. */
export function serveForwardedUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer, deps: ForwardedCallDeps): void {
  const served = resolve(req, deps);
  if ('refused' in served) return endSocketWithError(socket, 401, { error: 'unauthorized', message: `Inter-instance call refused: ${served.refused}.` });
  if ('page' in served) return writeRawPage(socket, served.page);
  try {
    served.target.handleUpgrade(req, socket, head);
  } catch (err) {
    deps.log('error', 'tunnel target threw on a forwarded upgrade', { host: displayHost(req), error: String(err) });
    writeRawPage(socket, badGatewayPage(displayHost(req)));
  }
}
