// A database left half-created by an instance that is gone: the leader finishes it within seconds, not at the next lone start.
import type { BackgroundTask } from '../core/background.js';
import type { DatabasesContext } from './database-context.js';
import { startInBackground } from './provisioning.js';

/** How often the leader looks for databases whose worker instance is gone. */
export const TAKEOVER_EVERY_MS = 5_000;

/**
 * One look: every `creating` database whose worker instance is no longer live (its heartbeat
 * stopped: killed, crashed, cut off) and that this instance is not already bringing up is started
 * here, which records this instance as its worker. Returns how many were taken over.
 */
export async function takeOverOrphans(ctx: DatabasesContext, liveInstances: () => Promise<readonly string[]>): Promise<number> {
  const creating = (await ctx.store.all()).filter((row) => row.status === 'creating' && !ctx.work.has(row.id));
  if (creating.length === 0) return 0;
  const live = new Set(await liveInstances());
  let taken = 0;
  for (const row of creating) {
    if (row.worker_instance !== null && live.has(row.worker_instance)) continue;
    ctx.log('info', `database ${row.id} was left half-created by instance ${row.worker_instance ?? '(none)'}: finishing it here`);
    startInBackground(ctx, row.id);
    taken += 1;
  }
  return taken;
}

/** The leader-only background task that runs `takeOverOrphans` every few seconds (`everyMs`). */
export function takeoverTask(ctx: DatabasesContext, liveInstances: () => Promise<readonly string[]>, everyMs = TAKEOVER_EVERY_MS): BackgroundTask {
  return {
    name: 'finishing databases left half-created by a lost instance',
    scope: 'leaderOnly',
    everyMs,
    run: async () => {
      await takeOverOrphans(ctx, liveInstances);
    },
  };
}
