// Bringing a database to `running`: its container started from its record and credentials, the outcome recorded (`failed` with the reason, never a credential).
import type { DatabasesContext } from './database-context.js';
import { DatabaseStartError, measureSize, startDatabaseContainer } from './database-containers.js';
import { ENGINES } from './engines.js';

/**
 * Starts database `id` and records `running`, or `failed` with why. An aborted start (a deletion,
 * a shutdown) records nothing: the next start of the server finishes it.
 */
async function provision(ctx: DatabasesContext, id: string, signal: AbortSignal): Promise<void> {
  const row = await ctx.store.get(id);
  if (row === undefined) return;
  const credentials = await ctx.store.credentials(id);
  if (credentials === undefined) return;
  if (row.worker_instance !== ctx.self) await ctx.store.update(id, { worker_instance: ctx.self });
  const adapter = ENGINES[row.engine];
  try {
    const containerId = await startDatabaseContainer(
      ctx,
      adapter,
      {
        id: row.id,
        name: row.name,
        image: row.image,
        memoryBytes: row.memory_bytes ?? ctx.limits.defaultMemoryBytes,
        nanoCpus: row.nano_cpus ?? ctx.limits.defaultNanoCpus,
      },
      credentials,
      signal,
    );
    await ctx.store.update(id, { status: 'running', error: null, container_id: containerId });
    // Measured once it runs, not before: `du` is off the path to `running` (a GET measures again anyway).
    const size = await measureSize(ctx.engine, containerId, adapter);
    if (size !== null) await ctx.store.update(id, { size_bytes: size });
  } catch (err) {
    if (signal.aborted) throw err;
    const message =
      err instanceof DatabaseStartError ? err.message : `the database could not be started: ${(err instanceof Error ? err.message : String(err)).split('\n')[0]?.slice(0, 300)}`;
    ctx.log('warn', `database ${row.id} failed to start`, { reason: message });
    // A failed database does not restart in a loop: its container stays, stopped, for its logs.
    await ctx.services.stop(ctx.instanceId, row.id, 5).catch(() => undefined);
    const container = await ctx.services.container(ctx.instanceId, row.id).catch(() => undefined);
    await ctx.store.update(id, { status: 'failed', error: message, container_id: container?.id ?? null });
  }
}

/** Starts database `id` in the background (one start at a time per database on this instance). */
export function startInBackground(ctx: DatabasesContext, id: string): void {
  ctx.work.run(id, (signal) => provision(ctx, id, signal));
}

/** Starts database `id` and waits for the outcome (recorded in its row), within `signal`. */
export async function startNow(ctx: DatabasesContext, id: string, signal: AbortSignal): Promise<void> {
  ctx.work.run(id, (own) => provision(ctx, id, AbortSignal.any([own, signal])));
  await ctx.work.settled(id);
}
