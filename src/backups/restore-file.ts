// Restoring a `file` dump (Redis's RDB) into a database's own service: the file streamed into its volume, the server run once on it, its own data rebuilt from it, then run as usual again and checked.
import { setTimeout as sleep } from 'node:timers/promises';
import type { Readable } from 'node:stream';
import { startDatabaseContainer } from '../databases/database-containers.js';
import type { DatabaseRun } from '../databases/database-containers.js';
import type { DatabaseCredentials, EngineAdapter } from '../databases/engine-adapter.js';
import { ENGINES } from '../databases/engines.js';
import { serviceContainer } from '../runtime/service.js';
import type { BackupRow } from './backup-store.js';
import { BackupStepError, inventoryMismatch, lastLine, takeInventory } from './backup-steps.js';
import type { BackupsContext } from './backups-context.js';
import { pipeDump } from './verify-backup.js';

/** Time the server has to make the loaded file its own data (a rewrite of the whole dataset). */
const ADOPTION_TIMEOUT_MS = 30 * 60_000;

/**
 * Replaces database `databaseId`'s data with `dump` (a `file` engine's restore). The file is written
 * under a name of its own while the server runs; the server is then run once on that file, the
 * adapter's adoption makes it the server's own data, and the usual server starts on it. A failure
 * before the adoption ended starts the usual server again on the data it had. The key count is
 * compared with the backup's source at the end (step `check`).
 */
export async function restoreFileIntoService(ctx: BackupsContext, databaseId: string, backup: BackupRow, dump: Readable, signal: AbortSignal): Promise<void> {
  const { engine, instanceId } = ctx.databases;
  const db = await ctx.databases.store.get(databaseId);
  const credentials = await ctx.databases.store.credentials(databaseId);
  const container = await serviceContainer(engine, instanceId, databaseId);
  if (db === undefined || credentials === undefined || container === undefined || !container.running) throw new BackupStepError('restore', 'the database has no running container');
  const adapter = ENGINES[db.engine];
  if (adapter.restoreCommand === undefined || adapter.adoptRestore === undefined || adapter.adoption === undefined || adapter.adopted === undefined) {
    throw new BackupStepError('restore', `a ${db.engine} database cannot take a restored file`);
  }
  const run: DatabaseRun = {
    id: db.id,
    name: db.name,
    image: db.image,
    memoryBytes: db.memory_bytes ?? ctx.databases.limits.defaultMemoryBytes,
    nanoCpus: db.nano_cpus ?? ctx.databases.limits.defaultNanoCpus,
  };
  await pipeDump(engine, container.id, adapter, credentials, dump, { clean: true, signal });
  let adopted = false;
  try {
    const loading = await startDatabaseContainer(ctx.databases, { ...adapter, command: adapter.restoreCommand }, run, credentials, signal).catch((err: unknown) => {
      throw new BackupStepError('restore', `the server did not start on the restored file: ${err instanceof Error ? err.message : String(err)}`);
    });
    await adopt(ctx, loading, adapter, credentials, signal);
    adopted = true;
    await engine.stopContainer(loading, 30);
  } finally {
    // Back to the usual server: on the restored data, or (a failure) on the data it had.
    const id = await startDatabaseContainer(ctx.databases, adapter, run, credentials, adopted ? signal : AbortSignal.timeout(300_000));
    await ctx.databases.store.update(db.id, { container_id: id, status: 'running', error: null });
    if (adapter.restoreFile !== undefined) await engine.execInContainer!(id, ['rm', '-f', '--', adapter.restoreFile], { timeoutMs: 30_000 }).catch(() => undefined);
  }
  const after = await serviceContainer(engine, instanceId, databaseId);
  if (after === undefined) throw new BackupStepError('check', 'the database has no container after the restore');
  const restored = await takeInventory(engine, after.id, adapter.inventory(credentials), adapter.parseInventory, 'check');
  const mismatch = inventoryMismatch(backup.source_counts ?? [], restored);
  if (mismatch !== undefined) throw new BackupStepError('check', mismatch);
}

/** Runs the adapter's adoption commands in the loading server, then waits until it says they ended. */
async function adopt(ctx: BackupsContext, containerId: string, adapter: EngineAdapter, credentials: DatabaseCredentials, signal: AbortSignal): Promise<void> {
  const exec = ctx.databases.engine.execInContainer!.bind(ctx.databases.engine);
  for (const step of adapter.adoptRestore!(credentials)) {
    const result = await exec(containerId, step.argv, { env: step.env, timeoutMs: 60_000 });
    if (result.exitCode !== 0 || /^\(?error\)?|^ERR/im.test(result.output)) throw new BackupStepError('restore', `${step.argv[0]} failed: ${lastLine(result.output)}`);
  }
  const probe = adapter.adoption!(credentials);
  const deadline = Date.now() + ADOPTION_TIMEOUT_MS;
  for (;;) {
    const state = adapter.adopted!(await exec(containerId, probe.argv, { env: probe.env, timeoutMs: 30_000 }));
    if (state === true) return;
    if (typeof state === 'string') throw new BackupStepError('restore', state);
    if (Date.now() > deadline) throw new BackupStepError('restore', `the server did not take the restored data within ${ADOPTION_TIMEOUT_MS / 60_000} min`);
    await sleep(300, undefined, { signal });
  }
}
