// Tunnel data plane: serves one tunnel's visitors by speaking HTTP to the local app over raw tunnel streams.
import type { Agent, ClientRequest, IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { displayHost, forwardedHeaders, hasNoRequestBody, upgradeRequestHead, visitorAddress } from '../proxy/app-proxy.js';
import { hostOf } from '../tls/https-redirect.js';
import { badGatewayPage, unavailablePage, writePage, writeRawPage, type Page } from '../proxy/pages.js';
import { InvalidUpstreamAnswer, failResponse, openUpstreamRequest, relayResponse } from '../proxy/relay.js';
import type { ConnectionHooks, StreamTarget } from '../proxy/routing-table.js';
import { hostHeaderProblem, requestTarget } from '../proxy/request-guard.js';
import { endSocketWithError } from '../api/socket-errors.js';
import { RequestFramer, ResponseWatcher, type RequestInfo } from './http1-framing.js';
import { StreamResetError, joinSocket, type BridgeFilter, type Mux, type TunnelStream } from './mux.js';
import { REFUSED_REASON, type RequestLogEntry } from './protocol.js';

/** Idle kept-alive streams per tunnel: enough for a burst's worth of reuse, few enough to cost little. */
const MAX_IDLE_STREAMS = 64;
/**
 * An idle kept-alive stream is closed after this long: below the 5 s keep-alive timeout of Node's
 * own servers (and many others), so we close first and rarely send a request into a closing one.
 * An app announcing a shorter `Keep-Alive: timeout=` is honoured (see {@link StreamPool}).
 */
const IDLE_STREAM_MS = 4000;
/** Request log entries are sent to the client at most this often, batched. */
const LOG_FLUSH_MS = 100;
/** A batch of log entries is sent early once it holds roughly this many bytes. */
const LOG_FLUSH_BYTES = 128 * 1024;
/** Longest path kept in a log entry. */
const LOG_PATH_CHARS = 1024;
/** Methods safe to send twice when a kept-alive stream turns out to be closing. */
const IDEMPOTENT = new Set(['GET', 'HEAD', 'OPTIONS', 'PUT', 'DELETE', 'TRACE']);
/** Idle time between requests after which a visitor connection served whole is closed (Node's keep-alive default). */
const DEFAULT_IDLE_MS = 5000;
/** Longest request head on a connection served whole (as Node's HTTP server: 16 KiB), then 431. */
const MAX_HEAD_BYTES = 16 * 1024;
/** Host name of upstream requests; never resolved: every connection is a tunnel stream. */
const TUNNEL_HOST = 'tunnel.invalid';

export interface TunnelProxyOptions {
  mux: Mux;
  /** How long a visitor connection served whole may sit idle between requests (the keep-alive timeout). */
  idleTimeoutMs?: number;
  /** X-Forwarded-Proto for the tunnel's visitors. */
  protocol: string;
  /** Requests and upgrades in progress at once; more are answered 503. */
  maxStreams: number;
}

/**
 * The route target of one connected tunnel. A tunnel stream is a raw byte pipe to a TCP connection
 * the client opened to the local app; this side is an HTTP client over it, with a pool that keeps
 * streams alive between requests, so the client's connection to the app is reused as well and
 * costs the client only byte copying. Upgrades get a fresh stream each, written the raw request
 * head. Each finished request is reported to the client for its log (`requests` control messages).
 */
export class TunnelProxy implements StreamTarget {
  readonly #mux: Mux;
  readonly #agent: StreamPool;
  readonly #protocol: string;
  readonly #maxStreams: number;
  readonly #idleTimeoutMs: number;
  /** Requests and upgrades in progress on the HTTP server's path. */
  #active = 0;
  /** Visitor connections served whole (each holds one stream while open). */
  readonly #connections = new Set<{ busy(): boolean }>();
  #closed = false;
  /** Finished requests not yet reported to the client. */
  #log: RequestLogEntry[] = [];
  #logBytes = 0;
  #logTimer: NodeJS.Timeout | undefined;

  constructor(options: TunnelProxyOptions) {
    this.#mux = options.mux;
    this.#protocol = options.protocol;
    this.#maxStreams = options.maxStreams;
    this.#idleTimeoutMs = options.idleTimeoutMs ?? DEFAULT_IDLE_MS;
    this.#agent = new StreamPool(options.mux);
  }

  /** Visitor requests and upgrades in progress (idle kept-alive streams and visitor connections do not count). */
  get active(): number {
    let busy = 0;
    for (const connection of this.#connections) if (connection.busy()) busy++;
    return this.#active + busy;
  }

  /** Proxies a visitor's request over a (kept-alive) tunnel stream with Node's HTTP client. */
  handleRequest(req: IncomingMessage, res: ServerResponse): void {
    const refusal = this.#refusal(req);
    if (refusal !== undefined) return writePage(res, refusal);
    this.#active++;
    const started = performance.now();
    let status = 0;
    res.once('close', () => {
      this.#active--;
      this.#logRequest(req, status || 499, started, false);
    });
    req.once('error', () => res.destroy());
    this.#forward(req, res, false, (code) => (status = code));
  }

  /** An upgrade (WebSocket): a fresh stream, never pooled, sent the raw request head, then one pipe. */
  handleUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    const refusal = this.#refusal(req);
    if (refusal !== undefined) return writeRawPage(socket, refusal);
    this.#active++;
    const started = performance.now();
    let answered = false;
    const stream = this.#mux.open();
    stream.once('data', (chunk: Buffer) => {
      answered = true;
      const match = /^HTTP\/1\.[01] (\d{3})/.exec(chunk.subarray(0, 16).toString('latin1'));
      // Logged when the app answers, not when the connection ends, which may be hours later.
      this.#logRequest(req, match?.[1] === undefined ? 502 : Number(match[1]), started, true);
    });
    stream.write(upgradeRequestHead(req, this.#protocol));
    if (head.length > 0) stream.write(head);
    const onStreamClose = (): void => {
      this.#active--;
      if (answered) {
        if (!stream.readableEnded) socket.destroy();
      } else if (stream.resetReason !== undefined && !socket.destroyed) {
        // The app never answered: the client could not reach it, or it closed at once.
        this.#logRequest(req, 502, started, true);
        writeRawPage(socket, appUnreachablePage(req, new StreamResetError(stream.resetReason)));
      } else {
        this.#logRequest(req, 499, started, true);
        socket.destroy();
      }
    };
    joinSocket(socket, stream, { failureReason: 'visitor connection failed', onStreamClose });
  }

  /**
   * Serves a whole visitor connection as one stream, byte for byte (the front door saw its first
   * request name this tunnel): the client joins it to one connection to the app, and nothing here
   * speaks HTTP. A small framer still reads every request head, to replace the visitor's
   * X-Forwarded-* with ours and refuse ambiguous framing or another host, and every response
   * head, to log the status and turn a broken answer into a 502 page (a head is forwarded only once
   * whole, so nothing of a broken answer has left). Idle between requests, the connection is closed
   * after the keep-alive timeout; an answer or an upgraded connection may pause as long as it likes.
   */
  handleConnection(socket: Socket, head: Buffer, host: string, hooks: ConnectionHooks): void {
    const shown = hostOf(host) ?? host;
    const refusal = this.#refusalFor(shown);
    if (refusal !== undefined) {
      hooks.onRequestEnd?.(refusal.status, 0);
      writeRawPage(socket, refusal);
      // Whatever else the visitor sends is read and dropped, so the connection can finish closing.
      socket.resume();
      return;
    }
    const protocol = (socket as { encrypted?: boolean }).encrypted === true ? 'https' : this.#protocol;
    const forwardedFor = visitorAddress(socket.remoteAddress);
    const framer = new RequestFramer({
      maxHeadBytes: MAX_HEAD_BYTES,
      addHeaders: (info) =>
        `X-Forwarded-For: ${forwardedFor}\r\nX-Forwarded-Proto: ${protocol}\r\n${info.host === undefined ? '' : `X-Forwarded-Host: ${info.host}\r\n`}`,
    });
    const watcher = new ResponseWatcher();
    /** Requests sent whose answer has not begun, oldest first. */
    const waiting: { method: string; path: string; upgrade: boolean; started: number }[] = [];
    /**
     * Set when the app declined an upgrade (answered it with anything but 101): the framer already
     * passes the visitor's bytes raw, so the connection ends with that answer and nothing more of
     * the visitor's is forwarded (later requests would escape the head rewriting).
     */
    let declined = false;
    const answered = (status: number): void => {
      const request = waiting.shift();
      if (request === undefined) return;
      if (request.upgrade && status !== 101) declined = true;
      const ms = performance.now() - request.started;
      this.#logEntry(request.method, request.path, status, ms, status === 101);
      hooks.onRequestEnd?.(status, ms / 1000);
    };
    /** Between requests: nothing due, no answer streaming, no partial head held, not upgraded. */
    const isIdle = (): boolean => waiting.length === 0 && watcher.idle && !framer.raw && framer.idle;
    const refuse = (status: number, message: string): null => {
      // A malformed head that starts a request (nothing due before it) goes back to the HTTP server,
      // whose parser and request guard answer it as for every other app host (Slipway's page).
      if (status === 400 && handBack()) return null;
      // Answered only when no earlier answer is still due on this connection; else it just closes.
      if (waiting.length === 0) endSocketWithError(socket, status, { error: status === 413 ? 'payload_too_large' : 'validation_error', message });
      else socket.destroy();
      hooks.onRequestEnd?.(status, 0);
      return null;
    };
    /**
     * The visitor's bytes since the connection was last idle, until the next request's head is
     * whole: a kept-alive connection may go on with a request for another host (clients pool
     * connections by address, and behind HAProxy one connection to Node carries every request of a
     * visitor connection to hosts under the domain); that request and what follows it are handed to
     * the HTTP server, which routes each request on its own Host, instead of being refused.
     */
    let sinceIdle: Buffer[] | undefined = [];
    /** Gives the connection, with its bytes since idle, back to the HTTP server when nothing is due on it; false when it cannot. */
    const handBack = (): boolean => {
      if (sinceIdle === undefined || waiting.length > 0 || declined || hooks.release === undefined) return false;
      const bytes = Buffer.concat(sinceIdle);
      sinceIdle = undefined;
      socket.off('timeout', onIdle);
      socket.setTimeout(0);
      bridge.detach();
      socket.unshift(bytes);
      hooks.release(socket);
      return true;
    };
    const filter: BridgeFilter = {
      fromSocket: (chunk) => {
        if (isIdle()) sinceIdle = [];
        sinceIdle?.push(chunk);
        const result = framer.push(chunk);
        if ('status' in result) return refuse(result.status, result.message);
        for (const [i, info] of result.requests.entries()) {
          const problem = rawRequestProblem(info, shown);
          if (problem !== undefined && i === 0 && handBack()) return null;
          if (problem !== undefined) return refuse(400, problem);
          watcher.expect(info.method, info.upgrade);
          waiting.push({ method: info.method, path: info.target.slice(0, LOG_PATH_CHARS), upgrade: info.upgrade, started: performance.now() });
        }
        if (result.requests.length > 0) sinceIdle = undefined;
        return declined ? [] : result.forward;
      },
      fromPeer: (chunk) => {
        const result = watcher.push(chunk);
        if ('broken' in result) {
          // What came before the bad head goes out first (earlier answers, a 100 Continue).
          for (const part of result.forward) socket.write(part);
          for (const status of result.statuses) answered(status);
          answered(502);
          writeRawPage(socket, badGatewayPage(shown));
          return null;
        }
        for (const status of result.statuses) answered(status);
        if (declined && watcher.idle) {
          for (const part of result.forward) socket.write(part);
          socket.end();
          return null;
        }
        return result.forward;
      },
    };
    const bridge = this.#mux.bridge(socket, {
      filter,
      failureReason: () => 'visitor connection failed',
      onPeerReset: (reason) => {
        // The app could not be reached, or went away: a page if an answer is due and none began
        // (an upgrade's too: it waits for its 101).
        if (waiting.length > 0 && !watcher.closeDelimited) {
          answered(502);
          writeRawPage(socket, appUnreachablePageFor(shown, new StreamResetError(reason)));
        } else if (this.#mux.closed && hooks.release !== undefined && isIdle()) {
          // The tunnel dropped between two requests: the HTTP server answers the next ones (503).
          socket.off('timeout', onIdle);
          socket.setTimeout(0);
          bridge.detach();
          hooks.release(socket);
        } else {
          socket.destroy();
        }
      },
      onPeerEnd: () => {
        if (waiting.length > 0 && !watcher.closeDelimited) {
          answered(502);
          writeRawPage(socket, { ...badGatewayPage(shown), detail: `The tunnel to ${shown} closed before the app answered.` });
        } else {
          socket.end();
        }
      },
      onClose: () => {
        this.#connections.delete(connection);
        while (waiting.length > 0) answered(499);
      },
    });
    const connection = { busy: () => !isIdle() };
    this.#connections.add(connection);
    // Idle between requests (nothing due, no answer streaming, not upgraded): closed as a kept-alive
    // connection is. Node's socket timer fires once per silence, so a pause inside an answer is let be.
    const onIdle = (): void => {
      if (isIdle()) bridge.destroy('visitor connection idle');
    };
    socket.on('timeout', onIdle);
    socket.setTimeout(this.#idleTimeoutMs);
    bridge.feed(head);
  }

  /** Sends the request log entries not yet reported. */
  flushLog(): void {
    clearTimeout(this.#logTimer);
    this.#logTimer = undefined;
    if (this.#log.length === 0 || this.#mux.closed) return;
    const entries = this.#log;
    this.#log = [];
    this.#logBytes = 0;
    // Best-effort: dropped while the link is congested, so a flood of visitors cannot fill the
    // client's link with log lines (and get it disconnected for not reading, see Mux).
    this.#mux.sendControl({ type: 'requests', entries }, { droppable: true });
  }

  /** The tunnel is gone: drops idle streams and unsent log entries; later visitors get a 503. */
  close(): void {
    this.#closed = true;
    clearTimeout(this.#logTimer);
    this.#logTimer = undefined;
    this.#log = [];
    this.#agent.destroy();
  }

  #forward(req: IncomingMessage, res: ServerResponse, retried: boolean, onStatus: (status: number) => void): void {
    const proxyReq = openUpstreamRequest({
      // Node's HTTP client takes any object with `addRequest` as its agent (see StreamPool).
      agent: this.#agent as unknown as Agent,
      host: TUNNEL_HOST,
      method: req.method,
      path: req.url,
      headers: forwardedHeaders(req, this.#protocol),
    });
    if (proxyReq instanceof Error) {
      // Node refused the method, path or a header: nothing was sent.
      onStatus(502);
      return failResponse(res, badGatewayPage(displayHost(req)));
    }
    res.once('close', () => {
      // The visitor went away (or we finished): never leave the app's request running. Destroying
      // the request destroys its stream, whose RESET makes the client drop its app connection.
      if (!res.writableFinished) proxyReq.destroy();
    });
    req.once('error', () => proxyReq.destroy());

    relayResponse(proxyReq, res, {
      onStatus,
      onFailure: (err) => {
        // A kept-alive stream whose app connection was closing as we reused it: the app never saw
        // the request. Send it once more, on another stream, when that is safe.
        const replayable = !(err instanceof InvalidUpstreamAnswer) && IDEMPOTENT.has(req.method ?? '') && hasNoRequestBody(req);
        if (!retried && proxyReq.reusedSocket && replayable) {
          this.#forward(req, res, true, onStatus);
          return;
        }
        onStatus(502);
        failResponse(res, appUnreachablePage(req, err));
      },
    });

    if (hasNoRequestBody(req)) proxyReq.end();
    else req.pipe(proxyReq);
  }

  /** Queues a request log entry for the client; the batch leaves within {@link LOG_FLUSH_MS}. */
  #logRequest(req: IncomingMessage, status: number, started: number, now: boolean): void {
    this.#logEntry(req.method ?? 'GET', (req.url ?? '/').slice(0, LOG_PATH_CHARS), status, performance.now() - started, now);
  }

  #logEntry(method: string, path: string, status: number, ms: number, now: boolean): void {
    if (this.#closed || this.#mux.closed) return;
    this.#log.push([method, path, status, Math.round(ms)]);
    this.#logBytes += path.length + 32;
    if (now || this.#logBytes >= LOG_FLUSH_BYTES) {
      this.flushLog();
    } else if (this.#logTimer === undefined) {
      this.#logTimer = setTimeout(() => this.flushLog(), LOG_FLUSH_MS);
      this.#logTimer.unref();
    }
  }

  /** A 503 page when the request cannot get a stream right now. */
  #refusal(req: IncomingMessage): Page | undefined {
    return this.#refusalFor(displayHost(req));
  }

  #refusalFor(host: string): Page | undefined {
    if (this.#closed || this.#mux.closed) return unavailablePage(host, 'no tunnel client is connected');
    if (this.#active + this.#connections.size >= this.#maxStreams) {
      return unavailablePage(host, `the tunnel already carries ${this.#maxStreams} requests; try again shortly`);
    }
    return undefined;
  }
}

/**
 * Idle kept-alive tunnel streams, handed to Node's HTTP client as its `agent` (the client accepts
 * any object with `addRequest`). It does what an `http.Agent` does for one host and nothing more:
 * reuse the newest idle stream (LIFO) or open one, take it back when the client frees it after a
 * complete keep-alive exchange, close it after {@link IDLE_STREAM_MS} idle (or the app's shorter
 * `Keep-Alive: timeout=`, less a second, as Node's Agent does). An Agent's per-request bookkeeping
 * (pool names, socket counts, request queues) was ~10% of the server's CPU per small request, and
 * none of it is needed: the proxy's own `maxStreams` check bounds the requests in progress.
 */
class StreamPool {
  // Read by Node's HTTP client: keep-alive requests, default port and protocol of the (fake) host.
  readonly keepAlive = true;
  readonly maxSockets = Infinity;
  readonly defaultPort = 80;
  readonly protocol = 'http:';
  readonly #mux: Mux;
  /** Idle streams, newest last. */
  readonly #idle: TunnelStream[] = [];
  #destroyed = false;

  constructor(mux: Mux) {
    this.#mux = mux;
  }

  /** Called by Node's HTTP client for each request: gives it a stream (its "socket"). */
  addRequest(req: ClientRequest): void {
    let stream = this.#idle.pop();
    while (stream !== undefined && !usable(stream)) {
      stream.destroy();
      stream = this.#idle.pop();
    }
    if (stream !== undefined) {
      stream.setTimeout(0);
      // Tells the relay the app may have been closing this connection as the request went out.
      req.reusedSocket = true;
      req.onSocket(stream as unknown as Socket);
      return;
    }
    if (this.#destroyed || this.#mux.closed) {
      // Fails just this request (a 502 page), like an Agent whose connection could not be made.
      process.nextTick(() => req.destroy(new StreamResetError('tunnel closed')));
      return;
    }
    const fresh = this.#mux.open({ halfOpen: false });
    // Node's HTTP client emits 'free' once a keep-alive exchange on the stream is complete.
    fresh.on('free', () => this.#release(fresh));
    fresh.on('timeout', () => {
      if (this.#idle.includes(fresh)) fresh.destroy();
    });
    fresh.once('close', () => {
      const at = this.#idle.indexOf(fresh);
      if (at !== -1) this.#idle.splice(at, 1);
    });
    req.onSocket(fresh as unknown as Socket);
  }

  /** Closes every idle stream; later requests fail (the proxy answers 503 before asking). */
  destroy(): void {
    this.#destroyed = true;
    for (const stream of this.#idle.splice(0)) stream.destroy();
  }

  #release(stream: TunnelStream): void {
    const holder = stream as unknown as { _httpMessage: (ClientRequest & { res?: IncomingMessage }) | null };
    const req = holder._httpMessage;
    holder._httpMessage = null;
    const hint = req?.res?.headers['keep-alive'];
    const idleMs = keepAliveMs(typeof hint === 'string' ? hint : undefined);
    if (this.#destroyed || req?.shouldKeepAlive !== true || !usable(stream) || idleMs === 0 || this.#idle.length >= MAX_IDLE_STREAMS) {
      stream.destroy();
      return;
    }
    stream.setTimeout(idleMs);
    this.#idle.push(stream);
  }
}

/** True when a freed stream can carry another request. */
function usable(stream: TunnelStream): boolean {
  return !stream.destroyed && stream.writable && !stream.readableEnded;
}

/** How long a freed stream may stay idle, given the app's `Keep-Alive` header (0: do not keep it). */
function keepAliveMs(hint: string | undefined): number {
  const seconds = hint === undefined ? undefined : /^timeout=(\d+)/.exec(hint)?.[1];
  if (seconds === undefined) return IDLE_STREAM_MS;
  // Closed a second before the app would close it, so a request is rarely sent into a closing connection.
  return Math.min(IDLE_STREAM_MS, Math.max(0, Number(seconds) * 1000 - 1000));
}

/** A later request on a connection served whole names another host than its first (handed to the HTTP server when between requests). */
const OTHER_HOST = 'the request names another host than the connection\'s first request';

/** Why a request read on a connection served whole must be refused (as request-guard.ts refuses), or undefined. */
function rawRequestProblem(info: RequestInfo, connectionHost: string): string | undefined {
  const problem = hostHeaderProblem(info.host);
  if (problem !== undefined) return problem;
  const target = requestTarget(info.method, info.target, info.host);
  if (typeof target !== 'string') return target.problem;
  // The connection was routed on its first request's host: every later one must name the same.
  if (info.host === undefined || hostOf(info.host) !== connectionHost) return OTHER_HOST;
  return undefined;
}

/** True when the client could not connect to the local app at all. */
function isRefusal(err: Error): err is StreamResetError {
  return err instanceof StreamResetError && err.reason.startsWith(REFUSED_REASON);
}

/** 502: the app could not be reached through the tunnel, or closed before it answered. */
function appUnreachablePage(req: IncomingMessage, err: Error): Page {
  return appUnreachablePageFor(displayHost(req), err);
}

function appUnreachablePageFor(host: string, err: Error): Page {
  if (isRefusal(err)) {
    const cause = err.reason.slice(REFUSED_REASON.length).trim();
    return {
      ...badGatewayPage(host),
      detail: `The tunnel client could not connect to the app on its machine${cause === '' ? '' : ` (${cause})`}. Start the app, then reload.`,
    };
  }
  return { ...badGatewayPage(host), detail: `The tunnel to ${host} closed before the app answered.` };
}
