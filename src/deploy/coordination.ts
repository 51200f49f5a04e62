// The coordination port: what several control-plane instances on one database must agree on.
import type { Release } from './concurrency.js';

/**
 * Per-deployment and per-host locks, leadership and the route-change feed, across every instance sharing the
 * database. One instance (SQLite) holds them in memory (`memoryCoordination`); on PostgreSQL they
 * live in the database (`src/db/pg-coordination.ts`: session advisory locks and LISTEN on one
 * dedicated connection, never a pooled one).
 */
export interface Coordination {
  /** Waits for the deployment's lock (held by one operation on any instance); rejects if `signal` aborts first. */
  lockDeployment(deploymentId: string, signal?: AbortSignal): Promise<Release>;
  /**
   * Waits for a host's certificate lock (decisions §15: a certificate is issued once, whichever
   * instance asks); rejects if `signal` aborts first.
   */
  lockHost(hostname: string, signal?: AbortSignal): Promise<Release>;
  /** True while this instance is the leader (reconcile, certificate renewal, image pruning run only there). */
  isLeader(): boolean;
  /** Told each time this instance gains or loses leadership. Returns an unsubscribe function. */
  onLeadership(listener: (leader: boolean) => void): () => void;
  /** Tells every instance (this one too) that `id` changed: ids only, never a route itself. */
  announce(id: string): void;
  /**
   * Told each announced id (from any instance), and `null` after the feed (re)connected: changes
   * may have been missed meanwhile, so a full resync is due. Returns an unsubscribe function.
   */
  onAnnounce(listener: (id: string | null) => void): () => void;
  /** Why coordination cannot work now (the database unreachable), or undefined when it does. */
  problem(): string | undefined;
  close(): Promise<void>;
}

/** Runs `fn` holding the deployment's lock. */
export async function withDeploymentLock<T>(coordination: Coordination, deploymentId: string, fn: () => Promise<T>, signal?: AbortSignal): Promise<T> {
  const release = await coordination.lockDeployment(deploymentId, signal);
  try {
    return await fn();
  } finally {
    release();
  }
}
