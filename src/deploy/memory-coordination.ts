// Coordination for one instance (SQLite): locks in memory, always the leader, announcements told in process.
import { KeyedMutex } from './concurrency.js';
import type { Coordination } from './coordination.js';

/** The single-instance coordination: what Slipway did before there could be several instances. */
export function memoryCoordination(): Coordination {
  const locks = new KeyedMutex();
  const hostLocks = new KeyedMutex();
  const listeners = new Set<(id: string | null) => void>();
  return {
    lockDeployment: (deploymentId, signal) => locks.acquire(deploymentId, signal),
    lockHost: (hostname, signal) => hostLocks.acquire(hostname, signal),
    isLeader: () => true,
    onLeadership: (listener) => {
      listener(true);
      return () => undefined;
    },
    announce: (id) => {
      // Told on a later turn, like a notification from the database.
      queueMicrotask(() => {
        for (const listener of listeners) listener(id);
      });
    },
    onAnnounce: (listener) => {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    problem: () => undefined,
    close: async () => {
      listeners.clear();
    },
  };
}
