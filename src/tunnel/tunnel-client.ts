// Tunnel client (`slipway tunnel PORT`): keeps a tunnel connected and pipes its streams to a local port.
import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import WebSocket from 'ws';
import { Mux, type BridgeOptions } from './mux.js';
import { connectLent } from './socket-bridge.js';
import { CLOSE_KEY_REVOKED, CLOSE_REPLACED, CONNECT_PATH, MAX_MESSAGE_BYTES, PROTOCOL_VERSION, REFUSED_REASON } from './protocol.js';

export type TunnelClientEvent =
  | { type: 'connected'; url: string; subdomain: string }
  /**
   * One per finished visitor request (an upgrade: once the app answered), as the server reports
   * them (batched, so up to ~100 ms late). `status` 499 means the visitor gave up before an answer.
   */
  | { type: 'request'; method: string; path: string; status: number; ms: number }
  | { type: 'disconnected'; reason: string; retryInMs: number }
  | { type: 'error'; message: string };

export interface TunnelClientOptions {
  /** The Slipway server, e.g. `http://localhost:8080` (`https:` connects with `wss:`). */
  serverUrl: string;
  apiKey: string;
  port: number;
  /** Where the local app listens (default 127.0.0.1). */
  host?: string;
  subdomain?: string;
  /** Take `subdomain` over from the same user's other live tunnel (otherwise that is refused). */
  force?: boolean;
  signal: AbortSignal;
  onEvent(event: TunnelClientEvent): void;
  /** The WebSocket class (tests may wrap ws's); default ws. */
  WebSocketImpl?: typeof WebSocket;
  /** Longest pause between reconnects before jitter (default 10 s). */
  maxBackoffMs?: number;
}

/** A refusal that reconnecting cannot fix (bad key, name taken, key deleted): `code` is the server's error code. */
export class TunnelRefusedError extends Error {
  readonly code: string;
  constructor(code: string, message: string) {
    super(message);
    this.name = 'TunnelRefusedError';
    this.code = code;
  }
}

/** Refusal codes that end the client instead of retrying. */
const FATAL_CODES = new Set(['unauthorized', 'subdomain_taken', 'validation_error', 'rate_limited', 'tunnel_replaced', 'forbidden']);
const BASE_BACKOFF_MS = 250;
const DEFAULT_MAX_BACKOFF_MS = 10_000;
const HANDSHAKE_TIMEOUT_MS = 10_000;
/** Heartbeat before the server said its own (READY carries it). */
const DEFAULT_HEARTBEAT_MS = 10_000;

interface Outcome {
  /** The tunnel went live before it dropped (resets the backoff). */
  readonly wasReady: boolean;
  readonly reason: string;
}

/**
 * Connects, serves the tunnel, and reconnects with exponential backoff (jittered, capped at ~10 s)
 * keeping the same subdomain, until `signal` aborts (then resolves). Rejects with a
 * {@link TunnelRefusedError} when the server refuses for good (unauthorized, subdomain_taken, …).
 */
export async function runTunnelClient(options: TunnelClientOptions): Promise<void> {
  let subdomain = options.subdomain;
  let attempt = 0;
  // A reconnect takes its own name back from the connection the server may still think live.
  let takeover = options.force === true;
  while (!options.signal.aborted) {
    const outcome = await connectOnce(options, subdomain, takeover, (name) => (subdomain = name));
    if (options.signal.aborted) return;
    if (outcome.wasReady) {
      attempt = 0;
      takeover = true;
    }
    const cap = Math.min(options.maxBackoffMs ?? DEFAULT_MAX_BACKOFF_MS, BASE_BACKOFF_MS * 2 ** attempt);
    const delay = Math.round(cap / 2 + Math.random() * (cap / 2));
    attempt = Math.min(attempt + 1, 16);
    options.onEvent({ type: 'disconnected', reason: outcome.reason, retryInMs: delay });
    try {
      await sleep(delay, undefined, { signal: options.signal });
    } catch {
      return; // aborted while waiting
    }
  }
}

/** One connection: resolves when it drops (transiently) or the signal aborts; rejects on a final refusal. */
function connectOnce(
  options: TunnelClientOptions,
  subdomain: string | undefined,
  takeover: boolean,
  onName: (subdomain: string) => void,
): Promise<Outcome> {
  const WebSocketImpl = options.WebSocketImpl ?? WebSocket;
  return new Promise<Outcome>((resolve, reject) => {
    let settled = false;
    let ready = false;
    let fatal: TunnelRefusedError | undefined;
    let heartbeat: NodeJS.Timeout | undefined;
    let alive = true;

    const ws = new WebSocketImpl(connectUrl(options.serverUrl, subdomain, takeover), {
      headers: { authorization: `Bearer ${options.apiKey}` },
      perMessageDeflate: false,
      maxPayload: MAX_MESSAGE_BYTES,
      handshakeTimeout: HANDSHAKE_TIMEOUT_MS,
      // RFC 6455 masking shields intermediaries from attacker-chosen bytes (the app may echo a
      // visitor's input). Over TLS or loopback no intermediary can read them, so skip its cost (a
      // byte-by-byte XOR without ws's optional native addon: 3x the throughput in bench/tunnel.ts).
      ...(unmaskedIsSafe(options.serverUrl) ? { generateMask: (mask: Buffer) => void mask.fill(0) } : {}),
    });
    const finish = (outcome: Outcome | TunnelRefusedError): void => {
      if (settled) return;
      settled = true;
      clearInterval(heartbeat);
      options.signal.removeEventListener('abort', onAbort);
      if (outcome instanceof TunnelRefusedError) reject(outcome);
      else resolve(outcome);
    };
    const onAbort = (): void => {
      if (ws.readyState === WebSocket.OPEN) {
        mux.close(1000, 'client stopped');
        // The close handshake normally takes a round trip; never let a dead server hold the process.
        setTimeout(() => ws.terminate(), 1000).unref();
      } else {
        ws.terminate();
      }
      finish({ wasReady: ready, reason: 'stopped' });
    };
    options.signal.addEventListener('abort', onAbort, { once: true });

    const mux = new Mux(ws, {
      onSocketStream: () => appConnection(options.host ?? '127.0.0.1', options.port),
      onControl: (message) => {
        if (message.type === 'requests') {
          for (const [method, path, status, ms] of message.entries) options.onEvent({ type: 'request', method, path, status, ms });
          return;
        }
        if (message.type === 'error') {
          fatal = new TunnelRefusedError(message.error, message.message);
          return;
        }
        if (message.version !== PROTOCOL_VERSION) {
          fatal = new TunnelRefusedError('unsupported_version', `The server speaks tunnel protocol ${message.version}; this client speaks ${PROTOCOL_VERSION}.`);
          ws.close(1002, 'unsupported protocol version');
          return;
        }
        ready = true;
        onName(message.subdomain);
        startHeartbeat(message.heartbeatMs);
        options.onEvent({ type: 'connected', url: message.url, subdomain: message.subdomain });
      },
      onClose: (code, reason) => {
        if (fatal !== undefined) return finish(fatal);
        if (code === CLOSE_KEY_REVOKED) return finish(new TunnelRefusedError('unauthorized', reason || 'The API key was deleted.'));
        if (code === CLOSE_REPLACED) return finish(new TunnelRefusedError('tunnel_replaced', reason || 'A newer connection took over this subdomain.'));
        finish({ wasReady: ready, reason: reason || describeClose(code, ready) });
      },
    });

    ws.once('upgrade', (res: IncomingMessage) => mux.attachSocket(res.socket));
    // A refusal arrives as an HTTP answer to the upgrade with a JSON {error, message} body.
    ws.on('unexpected-response', (_req, res: IncomingMessage) => {
      readJson(res)
        .then((body) => {
          const code = typeof body?.['error'] === 'string' ? body['error'] : undefined;
          const message = typeof body?.['message'] === 'string' ? body['message'] : `The server answered ${res.statusCode ?? '?'}.`;
          const status = res.statusCode ?? 0;
          if (code !== undefined && status >= 400 && status < 500 && FATAL_CODES.has(code)) {
            fatal = new TunnelRefusedError(code, message);
            finish(fatal);
          } else {
            finish({ wasReady: false, reason: `server answered ${status}: ${message}` });
          }
        })
        .finally(() => ws.terminate());
    });
    ws.on('error', (err) => {
      if (!ready && ws.readyState !== WebSocket.OPEN) finish({ wasReady: false, reason: err.message });
    });

    // Either side's pings count: a link silent for two intervals is dead (e.g. a NAT dropped it).
    const startHeartbeat = (intervalMs: number): void => {
      const period = intervalMs > 0 ? intervalMs : DEFAULT_HEARTBEAT_MS;
      ws.on('pong', () => (alive = true));
      ws.on('ping', () => (alive = true));
      ws.on('message', () => (alive = true));
      heartbeat = setInterval(() => {
        if (!alive) {
          options.onEvent({ type: 'error', message: 'The tunnel stopped answering; reconnecting.' });
          ws.terminate();
          return;
        }
        alive = false;
        ws.ping();
      }, period);
      heartbeat.unref();
    };
  });
}

/** The buffer every read from a local app lands in (see appConnection). */
const APP_READ_BUFFER = Buffer.allocUnsafe(64 * 1024);

/**
 * A stream's connection to the local app, joined to the stream byte for byte (a SocketBridge: the
 * server speaks HTTP or WebSocket through it; nothing here parses a byte). Bytes the server sends
 * while the connect is under way wait in the socket. A failed connect resets the stream with a
 * `refused …` reason, which the server turns into a 502 page.
 */
function appConnection(host: string, port: number): { socket: Socket; options: BridgeOptions } {
  // Reads land in one buffer shared by every app connection: no Buffer and no stream event per
  // read. The bridge copies each read into a frame, or aside while it waits for credit.
  const { socket, lentReads } = connectLent(host, port, APP_READ_BUFFER);
  let connected = false;
  socket.once('connect', () => (connected = true));
  const failureReason = (err: NodeJS.ErrnoException): string => (connected ? 'app connection failed' : `${REFUSED_REASON} ${err.code ?? err.message}`);
  return { socket, options: { failureReason, lentReads } };
}


/** `http(s)://host[:port][/prefix]` → `ws(s)://host[:port][/prefix]/api/v1/tunnels/connect?subdomain=…`. */
function connectUrl(serverUrl: string, subdomain: string | undefined, takeover: boolean): string {
  const url = new URL(serverUrl);
  if (url.protocol === 'https:') url.protocol = 'wss:';
  else if (url.protocol === 'http:') url.protocol = 'ws:';
  url.pathname = `${url.pathname.replace(/\/+$/, '')}${CONNECT_PATH}`;
  url.search = '';
  if (subdomain !== undefined) url.searchParams.set('subdomain', subdomain);
  if (subdomain !== undefined && takeover) url.searchParams.set('takeover', '1');
  return url.toString();
}

/** True when the tunnel runs over TLS or stays on this machine. */
function unmaskedIsSafe(serverUrl: string): boolean {
  const url = new URL(serverUrl);
  if (url.protocol === 'https:' || url.protocol === 'wss:') return true;
  const host = url.hostname.replace(/^\[|\]$/g, '');
  return host === 'localhost' || host.endsWith('.localhost') || host === '::1' || /^127\./.test(host);
}

function describeClose(code: number, wasReady: boolean): string {
  if (!wasReady) return `connection closed before the tunnel was ready (code ${code})`;
  if (code === 1001) return 'the server is restarting';
  if (code === 1006) return 'the connection was lost';
  return `connection closed (code ${code})`;
}

/** Reads a small JSON body (a refusal), or null. */
async function readJson(res: IncomingMessage): Promise<Record<string, unknown> | null> {
  const chunks: Buffer[] = [];
  let size = 0;
  try {
    for await (const chunk of res) {
      size += (chunk as Buffer).length;
      if (size > 64 * 1024) break;
      chunks.push(chunk as Buffer);
    }
    const value: unknown = JSON.parse(Buffer.concat(chunks).toString('utf8'));
    return typeof value === 'object' && value !== null ? (value as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}
