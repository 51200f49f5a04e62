// Tunnel data plane: serves one tunnel's visitors by speaking HTTP to the local app over raw tunnel streams.
import { Agent, type ClientRequestArgs, type IncomingMessage, type ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import { displayHost, forwardedHeaders, hasNoRequestBody, upgradeRequestHead } from '../proxy/app-proxy.js';
import { badGatewayPage, unavailablePage, writePage, writeRawPage, type Page } from '../proxy/pages.js';
import { InvalidUpstreamAnswer, failResponse, openUpstreamRequest, relayResponse } from '../proxy/relay.js';
import type { StreamTarget } from '../proxy/routing-table.js';
import { StreamResetError, joinSocket, type Mux } from './mux.js';
import { REFUSED_REASON, type RequestLogEntry } from './protocol.js';

/** Idle kept-alive streams per tunnel: enough for a burst's worth of reuse, few enough to cost little. */
const MAX_IDLE_STREAMS = 64;
/**
 * An idle kept-alive stream is closed after this long: below the 5 s keep-alive timeout of Node's
 * own servers (and many others), so we close first and rarely send a request into a closing one.
 * An app announcing a shorter `Keep-Alive: timeout=` is honoured by the Agent.
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
/** Host name the Agent pools streams under; never resolved: every connection is a tunnel stream. */
const TUNNEL_HOST = 'tunnel.invalid';

export interface TunnelProxyOptions {
  mux: Mux;
  /** X-Forwarded-Proto for the tunnel's visitors. */
  protocol: string;
  /** Requests and upgrades in progress at once; more are answered 503. */
  maxStreams: number;
}

/**
 * The route target of one connected tunnel. A tunnel stream is a raw byte pipe to a TCP connection
 * the client opened to the local app; this side is an HTTP client over it, with an Agent that keeps
 * streams alive between requests, so the client's connection to the app is reused as well and
 * costs the client only byte copying. Upgrades get a fresh stream each, written the raw request
 * head. Each finished request is reported to the client for its log (`requests` control messages).
 */
export class TunnelProxy implements StreamTarget {
  readonly #mux: Mux;
  readonly #agent: TunnelAgent;
  readonly #protocol: string;
  readonly #maxStreams: number;
  #active = 0;
  #closed = false;
  /** Finished requests not yet reported to the client. */
  #log: RequestLogEntry[] = [];
  #logBytes = 0;
  #logTimer: NodeJS.Timeout | undefined;

  constructor(options: TunnelProxyOptions) {
    this.#mux = options.mux;
    this.#protocol = options.protocol;
    this.#maxStreams = options.maxStreams;
    this.#agent = new TunnelAgent(options.mux, options.maxStreams);
  }

  /** Visitor requests and upgrades in progress (idle kept-alive streams do not count). */
  get active(): number {
    return this.#active;
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
      agent: this.#agent,
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
    if (this.#closed || this.#mux.closed) return;
    const path = (req.url ?? '/').slice(0, LOG_PATH_CHARS);
    this.#log.push([req.method ?? 'GET', path, status, Math.round(performance.now() - started)]);
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
    if (this.#closed || this.#mux.closed) return unavailablePage(displayHost(req), 'no tunnel client is connected');
    if (this.#active >= this.#maxStreams) {
      return unavailablePage(displayHost(req), `the tunnel already carries ${this.#maxStreams} requests; try again shortly`);
    }
    return undefined;
  }
}

/** An HTTP Agent whose connections are tunnel streams (kept alive and reused like sockets). */
class TunnelAgent extends Agent {
  readonly #mux: Mux;

  constructor(mux: Mux, maxStreams: number) {
    super({ keepAlive: true, maxSockets: maxStreams, maxFreeSockets: MAX_IDLE_STREAMS, timeout: IDLE_STREAM_MS, scheduling: 'lifo' });
    this.#mux = mux;
  }

  /** A new stream; it has the part of the `net.Socket` surface the HTTP client uses (see mux.ts). */
  override createConnection(_options: ClientRequestArgs, callback?: (err: Error | null, stream: Duplex) => void): Duplex | null | undefined {
    if (this.#mux.closed) {
      // Through the callback the Agent fails just this request (a 502 page); a throw would escape
      // (the Agent also opens connections from socket 'close' handlers, for queued requests). On an
      // error Node passes no stream, though @types/node types it as always present.
      callback?.(new StreamResetError('tunnel closed'), undefined as unknown as Duplex);
      return undefined;
    }
    return this.#mux.open({ halfOpen: false });
  }
}

/** True when the client could not connect to the local app at all. */
function isRefusal(err: Error): err is StreamResetError {
  return err instanceof StreamResetError && err.reason.startsWith(REFUSED_REASON);
}

/** 502: the app could not be reached through the tunnel, or closed before it answered. */
function appUnreachablePage(req: IncomingMessage, err: Error): Page {
  const host = displayHost(req);
  if (isRefusal(err)) {
    const cause = err.reason.slice(REFUSED_REASON.length).trim();
    return {
      ...badGatewayPage(host),
      detail: `The tunnel client could not connect to the app on its machine${cause === '' ? '' : ` (${cause})`}. Start the app, then reload.`,
    };
  }
  return { ...badGatewayPage(host), detail: `The tunnel to ${host} closed before the app answered.` };
}
