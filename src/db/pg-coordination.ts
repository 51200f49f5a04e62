// Coordination on PostgreSQL: session advisory locks, leadership and LISTEN on one dedicated connection (never pooled).
import crypto from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type pg from 'pg';
import { DomainError } from '../core/errors.js';
import { KeyedMutex, type Release } from '../deploy/concurrency.js';
import type { Coordination } from '../deploy/coordination.js';

/** Advisory lock namespaces (the first of the two int4 keys): 'SLPL' leadership, 'SLPD' deployments, 'SLPC' certificates. */
const LEADER_SPACE = 0x534c504c;
const DEPLOYMENT_SPACE = 0x534c5044;
const HOST_SPACE = 0x534c5043;
const CHANNEL = 'slipway_changes';

export interface PgCoordinationOptions {
  readonly url: string;
  /** How often a follower tries to become the leader, and the connection is checked (default 1 s). */
  readonly pollMs?: number;
  /** How long a waiting lock sleeps between tries (default 50 ms). */
  readonly lockPollMs?: number;
  readonly log: (level: 'info' | 'warn' | 'error', msg: string, detail?: object) => void;
}

/** A lock's key in its namespace: 32 bits of its name's SHA-256 (a collision only serializes two deployments or hosts). */
function lockKey(id: string): number {
  return crypto.createHash('sha256').update(id).digest().readInt32BE(0);
}

/**
 * Starts coordinating on PostgreSQL. Any loss of the dedicated connection is a loss of leadership
 * and of every lock it held; it is reconnected every `pollMs`, and listeners are told `null`
 * (resync) once it is back, since notifications are not replayed.
 */
export async function pgCoordination(options: PgCoordinationOptions): Promise<Coordination> {
  const { default: pgModule } = await import('pg');
  const pollMs = options.pollMs ?? 1000;
  const lockPollMs = options.lockPollMs ?? 50;
  const local = new KeyedMutex();
  const leadershipListeners = new Set<(leader: boolean) => void>();
  const announceListeners = new Set<(id: string | null) => void>();
  let client: pg.Client | undefined;
  let connecting: Promise<void> | undefined;
  let leader = false;
  let lastError = 'not connected yet';
  let closed = false;

  const setLeader = (value: boolean): void => {
    if (leader === value) return;
    leader = value;
    options.log(value ? 'info' : 'warn', value ? 'this instance is now the leader' : 'this instance is no longer the leader');
    for (const listener of leadershipListeners) listener(value);
  };
  const tell = (id: string | null): void => {
    for (const listener of announceListeners) listener(id);
  };
  const lost = (which: pg.Client, err: unknown): void => {
    if (client !== which) return;
    client = undefined;
    lastError = err instanceof Error ? err.message : String(err);
    options.log('warn', `coordination connection lost: ${lastError}`);
    setLeader(false);
    which.removeAllListeners('notification');
    which.on('error', () => undefined);
    void which.end().catch(() => undefined);
  };
  const connect = async (): Promise<void> => {
    // One statement at a time on this connection: a query that hangs for 5 s counts as a lost connection.
    const fresh = new pgModule.Client({ connectionString: options.url, application_name: 'slipway-coordination', keepAlive: true, query_timeout: 5000, connectionTimeoutMillis: 5000 });
    fresh.on('error', (err) => lost(fresh, err));
    fresh.on('end', () => lost(fresh, new Error('the connection ended')));
    fresh.on('notification', (message) => {
      if (message.channel === CHANNEL && message.payload !== undefined && message.payload !== '') tell(message.payload);
    });
    try {
      await fresh.connect();
      await fresh.query(`LISTEN ${CHANNEL}`);
    } catch (err) {
      lastError = err instanceof Error ? err.message : String(err);
      fresh.removeAllListeners('end');
      await fresh.end().catch(() => undefined);
      return;
    }
    if (closed) {
      await fresh.end().catch(() => undefined);
      return;
    }
    client = fresh;
    tell(null);
  };
  /** Runs one statement on the dedicated connection; a failure there is a lost connection. */
  const query = async (text: string, values: readonly unknown[] = []): Promise<pg.QueryResult | undefined> => {
    const current = client;
    if (current === undefined) return undefined;
    try {
      return await current.query(text, [...values]);
    } catch (err) {
      lost(current, err);
      return undefined;
    }
  };
  const tick = async (): Promise<void> => {
    if (client === undefined) {
      connecting ??= connect().finally(() => (connecting = undefined));
      await connecting;
    }
    if (client === undefined) return;
    if (leader) {
      await query('select 1');
    } else {
      const result = await query('select pg_try_advisory_lock($1, 0) as ok', [LEADER_SPACE]);
      if (result?.rows[0]?.ok === true && client !== undefined) setLeader(true);
    }
  };
  await tick();
  const timer = setInterval(() => {
    void tick().catch((err: unknown) => options.log('warn', 'coordination check failed', { err }));
  }, pollMs);
  timer.unref();

  /** Waits for the advisory lock (`space`, key of `name`), polling every `everyMs`, so the wait stays abortable. */
  const lockIn = async (space: number, name: string, signal: AbortSignal | undefined, everyMs: number): Promise<Release> => {
    const releaseLocal = await local.acquire(`${space}:${name}`, signal);
    const key = lockKey(name);
    try {
      for (;;) {
        signal?.throwIfAborted();
        const holder = client;
        if (holder === undefined) throw new DomainError('unavailable', `the database is unreachable (${lastError})`);
        const result = await query('select pg_try_advisory_lock($1, $2) as ok', [space, key]);
        if (result?.rows[0]?.ok === true) {
          let released = false;
          return () => {
            if (released) return;
            released = true;
            // On a connection lost meanwhile, the lock went with it.
            if (client === holder) void query('select pg_advisory_unlock($1, $2)', [space, key]).finally(releaseLocal);
            else releaseLocal();
          };
        }
        await sleep(everyMs, undefined, signal === undefined ? undefined : { signal });
      }
    } catch (err) {
      releaseLocal();
      throw err;
    }
  };

  return {
    lockDeployment: (deploymentId, signal) => lockIn(DEPLOYMENT_SPACE, deploymentId, signal, lockPollMs),
    // An issuance holds a host's lock for seconds to minutes: its waiters ask less often.
    lockHost: (hostname, signal) => lockIn(HOST_SPACE, hostname, signal, Math.max(lockPollMs, 250)),
    isLeader: () => leader,
    onLeadership(listener) {
      leadershipListeners.add(listener);
      listener(leader);
      return () => leadershipListeners.delete(listener);
    },
    announce(id: string): void {
      void query('select pg_notify($1, $2)', [CHANNEL, id]);
    },
    onAnnounce(listener) {
      announceListeners.add(listener);
      return () => announceListeners.delete(listener);
    },
    problem: () => (client === undefined ? `the database is unreachable (${lastError})` : undefined),
    async close(): Promise<void> {
      closed = true;
      clearInterval(timer);
      await connecting;
      const current = client;
      client = undefined;
      leader = false;
      leadershipListeners.clear();
      announceListeners.clear();
      if (current !== undefined) {
        current.removeAllListeners('end');
        current.removeAllListeners('error');
        current.on('error', () => undefined);
        await current.end().catch(() => undefined);
      }
    },
  };
}
