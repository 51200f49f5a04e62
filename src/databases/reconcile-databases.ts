// At start: databases left `creating` (a server killed mid-creation) are finished, and `running` ones whose container is gone or stopped are started again.
import type { DatabasesContext } from './database-context.js';
import { startInBackground } from './provisioning.js';

/**
 * Brings the engine in line with the records: a `creating` database is started again (it ends
 * `running` or `failed`, never lost track of); a `running` one whose container is missing or
 * stopped is started from its volume. `stopped` and `failed` ones are left as they are. The starts
 * run in the background; returns how many were begun.
 */
export async function reconcileDatabases(ctx: DatabasesContext): Promise<number> {
  let begun = 0;
  for (const row of await ctx.store.all()) {
    if (row.status === 'creating') {
      startInBackground(ctx, row.id);
      begun += 1;
    } else if (row.status === 'running') {
      const container = await ctx.services.container(ctx.instanceId, row.id);
      if (container === undefined || !container.running) {
        startInBackground(ctx, row.id);
        begun += 1;
      }
    }
  }
  if (begun > 0) ctx.log('info', `databases: ${begun} started again after the server's start`);
  return begun;
}
