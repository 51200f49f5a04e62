// The embedded Node data plane: serves `<subdomain>.<domain>` requests and upgrades from the routing table.
import { Agent, type ClientRequest, type IncomingMessage, type ServerResponse } from 'node:http';
import { connect, type Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import {
  badGatewayPage,
  gatewayTimeoutPage,
  notFoundPage,
  prefersJson,
  startingPage,
  unavailablePage,
  failedReason,
  writePage,
  writeRawPage,
  type Page,
} from './pages.js';
import { failResponse, openUpstreamRequest, joinUpgrade, relayResponse, stripHopByHop } from './relay.js';
import type { Route, RoutingTable, Upstream } from './routing-table.js';
import { FORWARD_HEADER_NAMES } from './forward-headers.js';

export interface AppProxyOptions {
  table: RoutingTable;
  /** 'http' or 'https' for X-Forwarded-Proto */
  publicProtocol: string;
  log?: (level: 'info' | 'warn' | 'error', msg: string, detail?: object) => void;
  /**
   * Told when an app-host request ends: the subdomain it resolved to (empty when no route), the
   * status sent (0 when none was) and its duration. Feeds the request metrics.
   */
  onRequestEnd?: (app: string, status: number, seconds: number) => void;
  /** Longest wait for an upstream to accept a connection and send response headers (default 60 s). */
  upstreamTimeoutMs?: number;
}

const DEFAULT_UPSTREAM_TIMEOUT_MS = 60_000;

/**
 * Client-address headers a visitor could spoof: dropped, and the X-Forwarded-* ones set by us. The
 * headers of a call from another instance (its visitor, signed) are dropped too: no app sees them.
 */
const FORWARDED: ReadonlySet<string> = new Set(['x-forwarded-for', 'x-forwarded-proto', 'x-forwarded-host', 'forwarded', 'x-real-ip', ...FORWARD_HEADER_NAMES]);

/** Requests forwarded by another instance (signature verified): the visitor that instance saw. */
const forwardedVisitors = new WeakMap<IncomingMessage, { readonly for: string; readonly proto: string }>();

/**
 * Marks a request as forwarded by another instance whose signed call said who the visitor was:
 * its X-Forwarded-For/-Proto are that visitor's, not the forwarding instance's.
 */
export function trustForwardedVisitor(req: IncomingMessage, visitor: { readonly for: string; readonly proto: string }): void {
  forwardedVisitors.set(req, visitor);
}

/** Methods safe to send twice when a reused keep-alive socket turns out to be closed. */
const IDEMPOTENT = new Set(['GET', 'HEAD', 'OPTIONS', 'PUT', 'DELETE', 'TRACE']);

/** Errors that mean the upstream never saw the request: safe to retry elsewhere. */
const CONNECT_FAILURES = new Set(['ECONNREFUSED', 'EHOSTUNREACH', 'ENETUNREACH', 'EADDRNOTAVAIL']);

const noop = (): void => {};

/** Proxies app hosts to their live upstream (or a tunnel), answering 404/502/503/504 pages otherwise. */
export class AppProxy {
  readonly #table: RoutingTable;
  readonly #protocol: string;
  readonly #log: NonNullable<AppProxyOptions['log']>;
  readonly #timeoutMs: number;
  readonly #onRequestEnd: AppProxyOptions['onRequestEnd'];
  readonly #agent = new Agent({ keepAlive: true, scheduling: 'lifo' });
  readonly #inFlight = new Map<string, number>();
  readonly #idleWaiters = new Map<string, Set<() => void>>();
  readonly #upgraded = new Set<Duplex>();
  /** Where the next pick among equally loaded replicas starts. */
  #turn = 0;

  constructor(options: AppProxyOptions) {
    this.#table = options.table;
    this.#protocol = options.publicProtocol;
    this.#log = options.log ?? noop;
    this.#timeoutMs = options.upstreamTimeoutMs ?? DEFAULT_UPSTREAM_TIMEOUT_MS;
    this.#onRequestEnd = options.onRequestEnd;
  }

  /** Handles the request if its Host is an app host; returns false (and does nothing) otherwise, so the caller passes it to the API. */
  handleRequest(req: IncomingMessage, res: ServerResponse): boolean {
    const resolution = this.#table.resolveHost(req.headers.host);
    if (resolution === null) return false;
    const host = displayHost(req);
    const route = resolution.route;
    const onEnd = this.#onRequestEnd;
    if (onEnd !== undefined) {
      const started = process.hrtime.bigint();
      const app = route === undefined ? '' : resolution.subdomain;
      res.once('close', () => onEnd(app, res.headersSent ? res.statusCode : 0, Number(process.hrtime.bigint() - started) / 1e9));
    }
    if (route?.kind === 'app' && route.state === 'live' && route.upstreams.length > 0) {
      this.#proxyRequest(req, res, this.#pick(route.upstreams), false);
    } else if (route?.kind === 'tunnel' && route.state === 'connected') {
      try {
        route.target.handleRequest(req, res);
      } catch (err) {
        this.#log('error', 'tunnel target threw on a request', { host, error: String(err) });
        writePage(res, badGatewayPage(host));
      }
    } else {
      writePage(res, refusalPage(host, route), prefersJson(req.headers.accept));
    }
    return true;
  }

  /** Same for an HTTP upgrade (WebSocket). */
  handleUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): boolean {
    const resolution = this.#table.resolveHost(req.headers.host);
    if (resolution === null) return false;
    const host = displayHost(req);
    const route = resolution.route;
    if (route?.kind === 'app' && route.state === 'live' && route.upstreams.length > 0) {
      this.#proxyUpgrade(req, socket, head, this.#pick(route.upstreams));
    } else if (route?.kind === 'tunnel' && route.state === 'connected') {
      try {
        route.target.handleUpgrade(req, socket, head);
      } catch (err) {
        this.#log('error', 'tunnel target threw on an upgrade', { host, error: String(err) });
        writeRawPage(socket, badGatewayPage(host));
      }
    } else {
      writeRawPage(socket, refusalPage(host, route));
    }
    return true;
  }

  /**
   * The replica a request goes to: the one with the fewest requests in flight, ties taken in turn
   * (a rotating start), so idle replicas share the load round-robin.
   */
  #pick(upstreams: readonly Upstream[], avoid?: Upstream): Upstream {
    const count = upstreams.length;
    const start = count > 1 ? this.#turn++ % count : 0;
    if (this.#turn >= Number.MAX_SAFE_INTEGER) this.#turn = 0;
    let best: Upstream | undefined;
    let bestLoad = Infinity;
    for (let i = 0; i < count; i++) {
      const candidate = upstreams[(start + i) % count] as Upstream;
      if (avoid !== undefined && sameUpstream(candidate, avoid)) continue;
      const load = this.inFlight(candidate);
      if (load < bestLoad) {
        best = candidate;
        bestLoad = load;
      }
    }
    return best ?? (upstreams[0] as Upstream);
  }

  /** Number of requests/upgraded sockets in flight to an upstream "host:port". */
  inFlight(upstream: Upstream): number {
    return this.#inFlight.get(upstreamKey(upstream)) ?? 0;
  }

  /**
   * Resolves when no request is in flight to `upstream` (or after timeoutMs); used before stopping an
   * old release so a switch never drops an in-flight request. Also closes idle keep-alive sockets to it.
   */
  drain(upstream: Upstream, timeoutMs: number): Promise<void> {
    const key = upstreamKey(upstream);
    return new Promise<void>((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        this.#idleWaiters.get(key)?.delete(done);
        this.#closeIdleSockets(upstream);
        resolve();
      };
      const timer = setTimeout(done, timeoutMs);
      if (this.inFlight(upstream) === 0) {
        done();
        return;
      }
      let waiters = this.#idleWaiters.get(key);
      if (waiters === undefined) this.#idleWaiters.set(key, (waiters = new Set()));
      waiters.add(done);
    });
  }

  /** Destroys the keep-alive agent and every upgraded socket pair; releases drain() waiters. */
  close(): void {
    this.#agent.destroy();
    for (const socket of this.#upgraded) socket.destroy();
    this.#upgraded.clear();
    for (const waiters of this.#idleWaiters.values()) for (const done of [...waiters]) done();
  }

  #proxyRequest(req: IncomingMessage, res: ServerResponse, upstream: Upstream, retried: boolean): void {
    const key = upstreamKey(upstream);
    const host = displayHost(req);
    const opened = openUpstreamRequest({
      host: upstream.host,
      port: upstream.port,
      method: req.method,
      path: req.url,
      headers: forwardedHeaders(req, this.#protocol),
      agent: this.#agent,
    });
    if (opened instanceof Error) {
      this.#log('warn', 'request cannot be sent upstream', { host, error: opened.message });
      failResponse(res, badGatewayPage(host));
      return;
    }
    const proxyReq: ClientRequest = opened;
    const release = this.#acquire(key);
    let bodyStarted = false;
    let timedOut = false;

    // Time to response headers only: a started response may stream for as long as it likes.
    const timer = setTimeout(() => {
      timedOut = true;
      proxyReq.destroy(new Error(`upstream ${key} sent no response within ${this.#timeoutMs} ms`));
    }, this.#timeoutMs);

    // The body is piped only once the socket is connected, so a refused connect leaves it unread and retryable.
    const pipeBody = (): void => {
      if (bodyStarted || proxyReq.destroyed) return;
      bodyStarted = true;
      req.pipe(proxyReq);
    };
    proxyReq.once('socket', (socket: Socket) => {
      if (socket.connecting) socket.once('connect', pipeBody);
      else pipeBody();
    });

    res.once('close', () => {
      clearTimeout(timer);
      // The visitor went away (or we finished): never leave the upstream request running.
      if (!res.writableFinished) proxyReq.destroy();
      release();
    });
    req.once('error', () => proxyReq.destroy());

    relayResponse(proxyReq, res, {
      onStatus: () => clearTimeout(timer),
      onFailure: (err) => {
        clearTimeout(timer);
        release();
        const retryTo = retried || timedOut ? undefined : this.#retryTarget(req, upstream, err, bodyStarted, proxyReq);
        if (retryTo !== undefined) {
          this.#log('info', 'retrying request against the current upstream', { from: key, to: upstreamKey(retryTo), code: err.code });
          this.#proxyRequest(req, res, retryTo, true);
          return;
        }
        this.#log('warn', 'upstream request failed', { host, upstream: key, error: err.message, code: err.code });
        failResponse(res, timedOut ? gatewayTimeoutPage(host) : badGatewayPage(host));
      },
    });
  }

  /**
   * Where to send a failed request once more, if it is safe: a refused connect when the route has
   * another upstream (another replica, or a release switched to meanwhile), or a reused keep-alive socket the upstream had just
   * closed (the classic keep-alive race) for an idempotent request whose body was not consumed.
   */
  #retryTarget(
    req: IncomingMessage,
    upstream: Upstream,
    err: NodeJS.ErrnoException,
    bodyStarted: boolean,
    proxyReq: ClientRequest,
  ): Upstream | undefined {
    const replayable = !bodyStarted || hasNoRequestBody(req);
    if (!replayable) return undefined;
    const route = this.#table.resolveHost(req.headers.host)?.route;
    if (route?.kind !== 'app' || route.state !== 'live' || route.upstreams.length === 0) return undefined;
    // A refused connect: another replica (or the release switched to meanwhile) takes it.
    if (CONNECT_FAILURES.has(err.code ?? '')) {
      const other = this.#pick(route.upstreams, upstream);
      return sameUpstream(other, upstream) ? undefined : other;
    }
    if (err.code === 'ECONNRESET' && proxyReq.reusedSocket && IDEMPOTENT.has(req.method ?? '')) return this.#pick(route.upstreams);
    return undefined;
  }

  #proxyUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer, upstream: Upstream): void {
    const key = upstreamKey(upstream);
    const host = displayHost(req);
    const release = this.#acquire(key);
    const upstreamSocket = connect({ host: upstream.host, port: upstream.port });
    let connected = false;
    let timedOut = false;
    /** The visitor has been given something: the upstream's checked answer head, or our error page. */
    let answered = false;
    /** The upstream's answer went to the visitor: from here on the two sockets are one pipe. */
    let joined = false;
    this.#upgraded.add(socket);
    this.#upgraded.add(upstreamSocket);

    // Bounds the connect and the wait for the answer head; a joined pair may live as long as it likes.
    const timer = setTimeout(() => {
      timedOut = true;
      upstreamSocket.destroy(new Error(`upstream ${key} did not answer the upgrade within ${this.#timeoutMs} ms`));
    }, this.#timeoutMs);

    const refuse = (page: Page, error: string, code?: string): void => {
      if (answered) return;
      answered = true;
      clearTimeout(timer);
      this.#log('warn', 'upstream upgrade failed', { host, upstream: key, error, code });
      writeRawPage(socket, page);
      upstreamSocket.destroy();
    };

    upstreamSocket.once('connect', () => {
      connected = true;
      upstreamSocket.setNoDelay(true);
      // The answer is passed on byte for byte, so its head is checked first, like any other answer's.
      joinUpgrade(
        socket,
        upstreamSocket,
        upgradeRequestHead(req, this.#protocol),
        head,
        () => {
          if (answered) return false;
          answered = joined = true;
          clearTimeout(timer);
          return true;
        },
        (reason) => refuse(badGatewayPage(host), reason),
      );
    });
    upstreamSocket.on('error', (err: NodeJS.ErrnoException) => {
      if (joined) {
        socket.destroy();
        return;
      }
      refuse(connected && timedOut ? gatewayTimeoutPage(host) : badGatewayPage(host), err.message, err.code);
    });
    upstreamSocket.once('close', () => {
      clearTimeout(timer);
      this.#upgraded.delete(upstreamSocket);
      release();
      if (joined) socket.destroy();
      else refuse(badGatewayPage(host), 'the upstream closed the connection without an answer');
    });
    socket.on('error', () => upstreamSocket.destroy());
    socket.once('close', () => {
      this.#upgraded.delete(socket);
      upstreamSocket.destroy();
    });
  }

  /** Counts one exchange against `key`; the returned function (idempotent) ends it and wakes drain() waiters. */
  #acquire(key: string): () => void {
    this.#inFlight.set(key, (this.#inFlight.get(key) ?? 0) + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const left = (this.#inFlight.get(key) ?? 1) - 1;
      if (left > 0) {
        this.#inFlight.set(key, left);
        return;
      }
      this.#inFlight.delete(key);
      const waiters = this.#idleWaiters.get(key);
      if (waiters === undefined) return;
      this.#idleWaiters.delete(key);
      for (const done of waiters) done();
    };
  }

  #closeIdleSockets(upstream: Upstream): void {
    const prefix = `${upstream.host}:${upstream.port}:`;
    for (const [name, sockets] of Object.entries(this.#agent.freeSockets)) {
      if (!name.startsWith(prefix)) continue;
      for (const socket of sockets ?? []) socket.destroy();
    }
  }
}

function upstreamKey(upstream: Upstream): string {
  return `${upstream.host}:${upstream.port}`;
}

function sameUpstream(a: Upstream, b: Upstream): boolean {
  return a.host === b.host && a.port === b.port;
}

/** The page for a host that resolved but cannot be served: unknown (404) or not running (503). */
function refusalPage(host: string, route: Route | undefined): Page {
  if (route === undefined) return notFoundPage(host);
  if (route.kind === 'tunnel') return unavailablePage(host, 'no tunnel client is connected');
  switch (route.state) {
    case 'starting':
      return startingPage(host);
    case 'failed':
      return unavailablePage(host, failedReason(route.failure));
    default:
      return unavailablePage(host, 'the app is stopped');
  }
}

/**
 * The request headers to send upstream for a visitor's request, as a raw `[name, value, …]` list
 * (names keep their case, repeated headers stay apart, and Node writes them without re-validating
 * each): hop-by-hop ones removed, Host kept, the visitor's own X-Forwarded-*, Forwarded and X-Real-IP
 * dropped and ours set (the client address the edge saw, `protocol`, the Host). A body of unknown
 * length (it arrived chunked) is declared chunked again, since Node would otherwise send a GET's or
 * DELETE's body unframed.
 */
export function forwardedHeaders(req: IncomingMessage, protocol: string): string[] {
  const out = stripHopByHop(req.rawHeaders, FORWARDED);
  if (req.headers['transfer-encoding'] !== undefined && req.headers['content-length'] === undefined) {
    out.push('Transfer-Encoding', 'chunked');
  }
  const forwarded = forwardedValues(req, protocol);
  out.push('X-Forwarded-For', forwarded.for, 'X-Forwarded-Proto', forwarded.proto);
  if (forwarded.host !== undefined) out.push('X-Forwarded-Host', forwarded.host);
  return out;
}

/**
 * The request line and headers of an upgrade, to write raw to an upstream connection: Connection
 * and Upgrade kept (the upstream needs them to switch protocols), other hop-by-hop headers and any
 * X-Forwarded-* from the visitor dropped, ours added.
 */
export function upgradeRequestHead(req: IncomingMessage, protocol: string): string {
  const forwarded = forwardedValues(req, protocol);
  const lines = [`${req.method ?? 'GET'} ${req.url ?? '/'} HTTP/1.1`];
  const raw = req.rawHeaders;
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const name = raw[i] ?? '';
    const lower = name.toLowerCase();
    if (lower === 'connection' || lower === 'keep-alive' || lower === 'te' || lower === 'trailer') continue;
    if (lower === 'transfer-encoding' || lower.startsWith('proxy-') || lower.startsWith('x-forwarded-') || FORWARDED.has(lower)) continue;
    lines.push(`${name}: ${raw[i + 1] ?? ''}`);
  }
  lines.push('Connection: Upgrade');
  lines.push(`X-Forwarded-For: ${forwarded.for}`);
  lines.push(`X-Forwarded-Proto: ${forwarded.proto}`);
  if (forwarded.host !== undefined) lines.push(`X-Forwarded-Host: ${forwarded.host}`);
  return `${lines.join('\r\n')}\r\n\r\n`;
}

/** True when the visitor's request carries no body (so it can be sent again as is). */
export function hasNoRequestBody(req: IncomingMessage): boolean {
  const length = req.headers['content-length'];
  return req.headers['transfer-encoding'] === undefined && (length === undefined || length === '0');
}

/** The Host as the visitor typed it, without the port, for pages and logs. */
export function displayHost(req: IncomingMessage): string {
  const host = (req.headers.host ?? '').trim().toLowerCase();
  const colon = host.lastIndexOf(':');
  return colon === -1 ? host : host.slice(0, colon);
}

/**
 * The X-Forwarded-* values the edge sets. Never taken from the visitor: a client-sent
 * X-Forwarded-For would otherwise be the leftmost (and, to most apps, the "real") address.
 */
export function forwardedValues(req: IncomingMessage, protocol: string): { for: string; proto: string; host: string | undefined } {
  const visitor = forwardedVisitors.get(req);
  if (visitor !== undefined) return { for: visitor.for, proto: visitor.proto, host: req.headers.host };
  // A request that arrived over TLS (the HTTPS port) is https whatever the public URL says.
  const proto = (req.socket as { encrypted?: boolean }).encrypted === true ? 'https' : protocol;
  return { for: clientAddress(req), proto, host: req.headers.host };
}

/** The visitor's address, with IPv4-mapped IPv6 ("::ffff:1.2.3.4") shown as plain IPv4. */
function clientAddress(req: IncomingMessage): string {
  return visitorAddress(req.socket.remoteAddress);
}

/** A socket's remote address as X-Forwarded-For shows it ('unknown' when the socket has none). */
export function visitorAddress(address: string | undefined): string {
  if (address === undefined) return 'unknown';
  return address.startsWith('::ffff:') && address.includes('.') ? address.slice(7) : address;
}
