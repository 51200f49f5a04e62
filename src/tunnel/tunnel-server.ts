// Tunnel server: authenticates `slipway tunnel` clients, claims their subdomain and serves visitors through them.
import { randomBytes, randomInt, randomUUID } from 'node:crypto';
import { STATUS_CODES, type IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { WebSocketServer, type WebSocket } from 'ws';
import type { DataPlane } from '../proxy/data-plane.js';
import type { Route } from '../proxy/routing-table.js';
import { Mux } from './mux.js';
import { CLOSE_KEY_REVOKED, CLOSE_REPLACED, MAX_MESSAGE_BYTES, PROTOCOL_VERSION } from './protocol.js';
import { TunnelProxy } from './tunnel-proxy.js';
import { DNS_LABEL } from '../core/dns-label.js';
import { API_KEY_PREFIX, bearerToken } from '../core/credentials.js';

/** Who opened a tunnel. */
export interface TunnelOwner {
  userId: string;
  apiKeyId: string;
}

/** The server's view of keys and subdomain claims (the database implements it). */
export interface TunnelAuthority {
  /** Verifies an API key presented by a tunnel client (only `slw_k1_…` strings reach it), sets its last_used_at; null when invalid/revoked. */
  authenticateKey(key: string): Promise<TunnelOwner | null>;
  /**
   * Atomically claims `subdomain` for the owner: 'ok', or 'taken' when a deployment or ANOTHER user's
   * tunnel holds it, or 'invalid' (bad DNS label/reserved). The same user claiming a name they hold is 'ok'.
   */
  claimSubdomain(subdomain: string, owner: TunnelOwner, tunnelId: string): Promise<'ok' | 'taken' | 'invalid'>;
  /** Releases the claim if still held by tunnelId. */
  releaseSubdomain(subdomain: string, tunnelId: string): Promise<void>;
}

/** A live (or reconnect-pending) tunnel, as `GET /api/v1/tunnels` shows it. */
export interface TunnelInfo {
  id: string;
  subdomain: string;
  url: string;
  userId: string;
  apiKeyId: string;
  connectedAt: string;
  state: 'connected' | 'disconnected';
  streams: number;
}

export type TunnelLog = (level: 'info' | 'warn' | 'error', msg: string, detail?: Record<string, unknown>) => void;

export interface TunnelServerOptions {
  dataPlane: DataPlane;
  authority: TunnelAuthority;
  /** The public URL of `<subdomain>.<domain>`; its scheme is also sent as X-Forwarded-Proto. */
  publicUrlFor(subdomain: string): string;
  limits: { tunnelsPerKey: number; streamsPerTunnel: number };
  /** Ping interval; a link that misses one whole interval is dropped (default 10 s). */
  heartbeatMs?: number;
  /** How long a visitor connection may sit idle between requests (the keep-alive timeout; default 5 s). */
  idleTimeoutMs?: number;
  /** How long a disconnected tunnel's name is held for its owner (default 60 s). */
  graceMs?: number;
  log?: TunnelLog;
}

const DEFAULT_HEARTBEAT_MS = 10_000;
const DEFAULT_GRACE_MS = 60_000;
const RANDOM_ALPHABET = 'abcdefghijklmnopqrstuvwxyz0123456789';

const noop = (): void => {};

interface Connection {
  readonly id: string;
  readonly subdomain: string;
  readonly owner: TunnelOwner;
  readonly connectedAt: string;
  readonly ws: WebSocket;
  readonly mux: Mux;
  /** Serves the visitors (the route's target). */
  readonly proxy: TunnelProxy;
  route: Route;
  state: 'connected' | 'disconnected';
  /** Set once the connection is deliberately retired (key deleted, replaced, server closing): no grace period. */
  retired: boolean;
  /** True once the client answered a ping: it completed the handshake and reads what we send. */
  proven: boolean;
  /** The payload of the ping awaiting its pong, if any, and the heartbeat ticks it has waited. */
  ping: Buffer | undefined;
  pingTicks: number;
  heartbeat: NodeJS.Timeout | undefined;
  grace: NodeJS.Timeout | undefined;
}

interface Refusal {
  readonly status: number;
  readonly error: string;
  readonly message: string;
}

/**
 * Accepts tunnel connections on `/api/v1/tunnels/connect` and registers each as a `tunnel` route.
 *
 * Refusals are plain HTTP answers to the upgrade request, BEFORE any WebSocket handshake, with a JSON
 * `{error, message}` body: 401 `unauthorized` (no/unknown/revoked key, or a session token), 400
 * `validation_error` (bad name), 400 `subdomain_taken`, 429 `rate_limited` (live tunnels per key).
 * A client should print `message` and stop: none of these get better by retrying at once.
 * After the handshake the server may end a tunnel for good with a text control message
 * `{type:'error', error, message}` followed by close code 4401 (key deleted, or account disabled) or
 * 4409 (name taken over by a newer connection of the same user). Any other close is transient: reconnect.
 */
export class TunnelServer {
  readonly #dataPlane: DataPlane;
  readonly #authority: TunnelAuthority;
  readonly #publicUrlFor: (subdomain: string) => string;
  readonly #limits: { tunnelsPerKey: number; streamsPerTunnel: number };
  readonly #heartbeatMs: number;
  readonly #graceMs: number;
  readonly #idleTimeoutMs: number | undefined;
  readonly #log: TunnelLog;
  readonly #wss = new WebSocketServer({
    noServer: true,
    perMessageDeflate: false,
    maxPayload: MAX_MESSAGE_BYTES,
    clientTracking: false,
  });
  /** The connection holding each name: connected, or disconnected within its grace period. */
  readonly #byName = new Map<string, Connection>();
  /** Upgrades between authentication and handshake, so limits and key deletion see them. */
  readonly #pending = new Map<string, { owner: TunnelOwner; cancelled: boolean }>();
  #closed = false;

  constructor(options: TunnelServerOptions) {
    this.#dataPlane = options.dataPlane;
    this.#authority = options.authority;
    this.#publicUrlFor = options.publicUrlFor;
    this.#limits = options.limits;
    this.#heartbeatMs = options.heartbeatMs ?? DEFAULT_HEARTBEAT_MS;
    this.#graceMs = options.graceMs ?? DEFAULT_GRACE_MS;
    this.#idleTimeoutMs = options.idleTimeoutMs;
    this.#log = options.log ?? noop;
  }

  /**
   * Handles an HTTP upgrade whose path is /api/v1/tunnels/connect (the caller checks the path).
   * Auth: `Authorization: Bearer slw_k1_…`; name: `?subdomain=NAME` (random 8 characters when absent).
   */
  handleUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    socket.on('error', noop);
    this.#accept(req, socket, head).catch((err: unknown) => {
      this.#log('error', 'tunnel connect failed', { error: String(err) });
      refuse(socket, { status: 500, error: 'internal_error', message: 'The tunnel could not be opened.' });
    });
  }

  /** The user's tunnels (every user's when undefined), connected or waiting for their client to reconnect. */
  list(userId: string | undefined): TunnelInfo[] {
    const out: TunnelInfo[] = [];
    for (const conn of this.#byName.values()) {
      if (userId !== undefined && conn.owner.userId !== userId) continue;
      out.push({
        id: conn.id,
        subdomain: conn.subdomain,
        url: this.#publicUrlFor(conn.subdomain),
        userId: conn.owner.userId,
        apiKeyId: conn.owner.apiKeyId,
        connectedAt: conn.connectedAt,
        state: conn.state,
        streams: conn.proxy.active,
      });
    }
    return out;
  }

  /** Tunnels whose client is connected now, of every user (the `slipway_tunnels_live` metric). */
  connectedCount(): number {
    let count = 0;
    for (const conn of this.#byName.values()) if (conn.state === 'connected') count++;
    return count;
  }

  /** Closes every tunnel opened with this API key (the key was deleted) and frees their names at once. */
  closeForKey(apiKeyId: string): void {
    this.#closeWhere((owner) => owner.apiKeyId === apiKeyId, 'The API key this tunnel was opened with has been deleted.');
  }

  /** Closes every tunnel of this user (an administrator disabled the account) and frees their names at once. */
  closeForUser(userId: string): void {
    this.#closeWhere((owner) => owner.userId === userId, 'Your account has been disabled by an administrator; the tunnel is closed.');
  }

  /** Ends the matching tunnels for good (close code 4401, as a revoked key) and cancels their connects in progress. */
  #closeWhere(matches: (owner: TunnelOwner) => boolean, message: string): void {
    for (const pending of this.#pending.values()) if (matches(pending.owner)) pending.cancelled = true;
    for (const conn of [...this.#byName.values()]) {
      if (conn.retired || !matches(conn.owner)) continue;
      void this.#retire(conn, CLOSE_KEY_REVOKED, { error: 'unauthorized', message });
    }
  }

  /** The id of the tunnel holding `subdomain` here (connected, or waiting for its client), if any. */
  holding(subdomain: string): string | undefined {
    const conn = this.#byName.get(subdomain);
    return conn === undefined || conn.retired ? undefined : conn.id;
  }

  /**
   * The tunnel `tunnelId` lost its name to a newer connection on another instance (its client
   * reconnected there): it ends here, for good, and its route goes. The claim is already the other's.
   */
  relinquish(subdomain: string, tunnelId: string): void {
    const conn = this.#byName.get(subdomain);
    if (conn === undefined || conn.id !== tunnelId || conn.retired) return;
    void this.#retire(conn, CLOSE_REPLACED, { error: 'tunnel_replaced', message: `A newer connection on another instance took over ${subdomain}.` });
  }

  /** Closes every tunnel (clients will try to reconnect) and releases their names. */
  async close(): Promise<void> {
    this.#closed = true;
    for (const pending of this.#pending.values()) pending.cancelled = true;
    const releases = [...this.#byName.values()].map((conn) => this.#retire(conn, 1001, undefined));
    await Promise.all(releases);
    this.#wss.close();
  }

  async #accept(req: IncomingMessage, socket: Duplex, head: Buffer): Promise<void> {
    if (this.#closed) return refuse(socket, { status: 503, error: 'unavailable', message: 'The server is shutting down.' });
    const key = bearerToken(req.headers.authorization);
    if (key === undefined || !key.startsWith(API_KEY_PREFIX)) {
      return refuse(socket, { status: 401, error: 'unauthorized', message: 'A tunnel needs an API key (slw_k1_…); create one with `slipway keys create`.' });
    }
    const params = new URL(req.url ?? '/', 'http://tunnel.invalid').searchParams;
    const query = params.get('subdomain');
    // The same user's live tunnel on the name is replaced only when asked (a reconnect, or --force).
    const takeover = params.get('takeover') === '1';
    const requested = query === null || query === '' ? undefined : query.toLowerCase();
    if (requested !== undefined && !DNS_LABEL.test(requested)) {
      return refuse(socket, { status: 400, error: 'validation_error', message: `"${requested.slice(0, 80)}" is not a valid subdomain (a-z, 0-9 and -, at most 63).` });
    }
    const handshake = handshakeProblem(req);
    if (handshake !== undefined) return refuse(socket, { status: 400, error: 'validation_error', message: handshake });
    const owner = await this.#authority.authenticateKey(key);
    if (owner === null) {
      return refuse(socket, { status: 401, error: 'unauthorized', message: 'The API key is invalid or has been deleted, or its account is disabled.' });
    }
    const held = requested === undefined ? undefined : this.#byName.get(requested);
    if (held !== undefined && !held.retired && held.state === 'connected' && held.owner.userId === owner.userId && !takeover) {
      return refuse(socket, {
        status: 400,
        error: 'subdomain_taken',
        message: `You already have a live tunnel on "${requested}" (connected ${held.connectedAt}); run again with --force to take the name over from it.`,
      });
    }
    if (this.#liveTunnels(owner.apiKeyId, requested) >= this.#limits.tunnelsPerKey) {
      return refuse(socket, { status: 429, error: 'rate_limited', message: `This API key already has ${this.#limits.tunnelsPerKey} live tunnel(s); close one first.` });
    }

    const id = randomUUID();
    const pending = { owner, cancelled: false };
    this.#pending.set(id, pending);
    try {
      const { subdomain, result } = await this.#claim(requested, owner, id);
      if (result === 'taken') {
        return refuse(socket, { status: 400, error: 'subdomain_taken', message: `The subdomain "${subdomain}" is taken by a deployment or another tunnel.` });
      }
      if (result === 'invalid') {
        return refuse(socket, { status: 400, error: 'validation_error', message: `The subdomain "${subdomain}" is reserved or invalid.` });
      }
      // From here the claim is ours: every exit that does not attach must release it.
      if (pending.cancelled || this.#closed || !socket.readable || !socket.writable) {
        await this.#giveBack(subdomain, id);
        if (pending.cancelled && !this.#closed) {
          return refuse(socket, { status: 401, error: 'unauthorized', message: 'The API key is invalid or has been deleted, or its account is disabled.' });
        }
        socket.destroy();
        return;
      }
      // ws completes a handshake synchronously or not at all (bad upgrade headers: it answers 400
      // itself; a socket that closed meanwhile: it destroys it). Either way the name goes back.
      let outcome: 'pending' | 'attached' | 'failed' = 'pending';
      try {
        this.#wss.handleUpgrade(req, socket, head, (ws) => {
          if (outcome === 'failed') {
            ws.terminate();
            return;
          }
          outcome = 'attached';
          this.#attach(ws, socket, id, subdomain, owner);
        });
      } finally {
        if (outcome === 'pending') {
          outcome = 'failed';
          this.#log('info', 'tunnel handshake failed; name released', { subdomain, tunnelId: id });
          await this.#giveBack(subdomain, id);
        }
      }
    } finally {
      this.#pending.delete(id);
    }
  }

  /**
   * Returns a claim that will not be used. Claiming a name the same user's live tunnel holds moved
   * the claim to the new id: it goes back to that tunnel, which keeps serving.
   */
  async #giveBack(subdomain: string, id: string): Promise<void> {
    await this.#authority.releaseSubdomain(subdomain, id);
    const live = this.#byName.get(subdomain);
    if (live === undefined || live.retired) return;
    if ((await this.#authority.claimSubdomain(subdomain, live.owner, live.id)) !== 'ok' && this.#byName.get(subdomain) === live) {
      await this.#retire(live, CLOSE_REPLACED, { error: 'subdomain_taken', message: `${subdomain} was taken while a reconnect failed.` });
    }
  }

  /** Claims the requested name, or a random free one (a few tries) when none was asked for. */
  async #claim(requested: string | undefined, owner: TunnelOwner, id: string): Promise<{ subdomain: string; result: 'ok' | 'taken' | 'invalid' }> {
    if (requested !== undefined) return { subdomain: requested, result: await this.#authority.claimSubdomain(requested, owner, id) };
    for (let i = 0; ; i++) {
      const subdomain = randomName();
      const result = await this.#authority.claimSubdomain(subdomain, owner, id);
      if (result === 'ok' || i === 4) return { subdomain, result };
    }
  }

  /** Live tunnels of a key, not counting the one a reconnect of `subdomain` would replace. */
  #liveTunnels(apiKeyId: string, subdomain: string | undefined): number {
    let count = 0;
    for (const conn of this.#byName.values()) {
      if (conn.owner.apiKeyId === apiKeyId && conn.state === 'connected' && conn.subdomain !== subdomain) count++;
    }
    for (const pending of this.#pending.values()) if (pending.owner.apiKeyId === apiKeyId) count++;
    return count;
  }

  #attach(ws: WebSocket, socket: Duplex, id: string, subdomain: string, owner: TunnelOwner): void {
    const mux = new Mux(ws, { socket, onClose: (code, reason) => this.#onDisconnect(conn, code, reason) });
    const proxy = new TunnelProxy({
      mux,
      protocol: publicProtocol(this.#publicUrlFor(subdomain)),
      maxStreams: this.#limits.streamsPerTunnel,
      idleTimeoutMs: this.#idleTimeoutMs,
    });
    const conn: Connection = {
      id,
      subdomain,
      owner,
      connectedAt: new Date().toISOString(),
      ws,
      mux,
      proxy,
      route: { kind: 'tunnel', tunnelId: id, state: 'connected', target: proxy },
      state: 'connected',
      retired: false,
      proven: false,
      ping: undefined,
      pingTicks: 0,
      heartbeat: undefined,
      grace: undefined,
    };
    const previous = this.#byName.get(subdomain);
    this.#byName.set(subdomain, conn);
    if (previous !== undefined) {
      // Same user, same name (the authority said 'ok'): the newer connection wins.
      previous.retired = true;
      clearTimeout(previous.grace);
      clearInterval(previous.heartbeat);
      previous.proxy.flushLog();
      previous.mux.sendControl({ type: 'error', error: 'tunnel_replaced', message: `A newer connection took over ${subdomain}.` });
      previous.mux.close(CLOSE_REPLACED, 'replaced by a newer connection');
    }
    this.#dataPlane.publish(subdomain, conn.route);

    // Liveness is a pong echoing our latest ping's random payload: proof that the client reads what
    // we send. Other inbound traffic proves nothing (a client can send without ever reading).
    ws.on('pong', (data: Buffer) => {
      if (conn.ping === undefined || !data.equals(conn.ping)) return;
      conn.ping = undefined;
      conn.proven = true;
    });
    // The first ping goes out with READY: a client that completed the handshake answers it within a
    // round trip. One that does not within a heartbeat interval is dropped and holds no name; a
    // proven one gets two intervals per ping (a slow link may have a full send buffer to drain).
    this.#ping(conn);
    conn.heartbeat = setInterval(() => {
      if (conn.ping === undefined) {
        this.#ping(conn);
        return;
      }
      conn.pingTicks++;
      if (conn.pingTicks < (conn.proven ? 2 : 1)) return;
      this.#log('warn', 'tunnel missed its heartbeat; dropping it', { subdomain, tunnelId: id, proven: conn.proven });
      ws.terminate();
    }, this.#heartbeatMs);
    conn.heartbeat.unref();

    mux.sendControl({
      type: 'ready',
      version: PROTOCOL_VERSION,
      tunnelId: id,
      subdomain,
      url: this.#publicUrlFor(subdomain),
      heartbeatMs: this.#heartbeatMs,
      maxStreams: this.#limits.streamsPerTunnel,
    });
    this.#log('info', 'tunnel connected', { subdomain, tunnelId: id, userId: owner.userId, replaced: previous !== undefined });
  }

  #ping(conn: Connection): void {
    conn.ping = randomBytes(8);
    conn.pingTicks = 0;
    conn.mux.ping(conn.ping);
  }

  /**
   * The link dropped: hold the name for the owner (visitors get 503) until the grace period ends.
   * A client that never answered a ping (it did not complete the handshake), or that stopped
   * reading (its outbound queue reached the cap), gets no grace: its name is released at once.
   */
  #onDisconnect(conn: Connection, code: number, reason: string): void {
    clearInterval(conn.heartbeat);
    conn.proxy.close();
    if (conn.retired || this.#byName.get(conn.subdomain) !== conn) return;
    if (!conn.proven || conn.mux.overflowed) {
      this.#log('warn', conn.mux.overflowed ? 'tunnel client stopped reading; disconnected and name released' : 'tunnel client never answered a ping; name released', {
        subdomain: conn.subdomain,
        tunnelId: conn.id,
        peakOutboundBytes: conn.mux.peakOutbound,
      });
      conn.retired = true;
      void this.#release(conn);
      return;
    }
    this.#log('info', 'tunnel disconnected; holding its name', { subdomain: conn.subdomain, tunnelId: conn.id, code, reason });
    conn.state = 'disconnected';
    conn.route = { kind: 'tunnel', tunnelId: conn.id, state: 'disconnected' };
    this.#dataPlane.publish(conn.subdomain, conn.route);
    conn.grace = setTimeout(() => void this.#release(conn), this.#graceMs);
    conn.grace.unref();
  }

  /** Ends a connection for good (no grace) and frees its name. */
  #retire(conn: Connection, code: number, message: { error: string; message: string } | undefined): Promise<void> {
    conn.retired = true;
    if (conn.state === 'connected') {
      conn.proxy.flushLog();
      if (message !== undefined) conn.mux.sendControl({ type: 'error', ...message });
      conn.mux.close(code, message?.message ?? 'server closing');
    }
    return this.#release(conn);
  }

  async #release(conn: Connection): Promise<void> {
    clearTimeout(conn.grace);
    clearInterval(conn.heartbeat);
    if (this.#byName.get(conn.subdomain) !== conn) return;
    this.#byName.delete(conn.subdomain);
    this.#dataPlane.withdraw(conn.subdomain, conn.route);
    try {
      await this.#authority.releaseSubdomain(conn.subdomain, conn.id);
    } catch (err) {
      this.#log('error', 'could not release a tunnel subdomain', { subdomain: conn.subdomain, error: String(err) });
    }
  }
}

/**
 * Why a request is not a WebSocket handshake ws would complete (ws answers those itself, in text/html),
 * checked before any name is claimed; undefined when it is one.
 */
function handshakeProblem(req: IncomingMessage): string | undefined {
  if (req.method !== 'GET') return 'A tunnel connects with a WebSocket upgrade (GET).';
  if ((req.headers.upgrade ?? '').toLowerCase() !== 'websocket') return 'A tunnel connects with "Upgrade: websocket".';
  if (!/^[+/0-9A-Za-z]{22}==$/.test(req.headers['sec-websocket-key'] ?? '')) return 'Missing or invalid Sec-WebSocket-Key header.';
  const version = req.headers['sec-websocket-version'];
  if (version !== '13' && version !== '8') return 'Unsupported Sec-WebSocket-Version (use 13).';
  return undefined;
}

/** Answers an upgrade request with a plain HTTP error and a JSON `{error, message}` body. */
function refuse(socket: Duplex, refusal: Refusal): void {
  if (socket.destroyed || !socket.writable) {
    socket.destroy();
    return;
  }
  const body = JSON.stringify({ error: refusal.error, message: refusal.message });
  const lines = [
    `HTTP/1.1 ${refusal.status} ${STATUS_CODES[refusal.status] ?? 'Error'}`,
    'Content-Type: application/json; charset=utf-8',
    `Content-Length: ${Buffer.byteLength(body)}`,
    'Cache-Control: no-store',
    'Connection: close',
  ];
  if (refusal.status === 401) lines.push('WWW-Authenticate: Bearer');
  socket.end(`${lines.join('\r\n')}\r\n\r\n${body}`);
}

function randomName(): string {
  let name = '';
  for (let i = 0; i < 8; i++) name += RANDOM_ALPHABET[randomInt(RANDOM_ALPHABET.length)];
  return name;
}

function publicProtocol(url: string): string {
  try {
    return new URL(url).protocol.replace(/:$/, '');
  } catch {
    return 'http';
  }
}
