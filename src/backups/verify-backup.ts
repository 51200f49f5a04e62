// Verification by restore (decisions §20): the stored object read back (its SHA-256 and every GCM tag checked), restored into a throwaway container of the same image, and compared with the source.
import crypto from 'node:crypto';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { DATABASE_CAPABILITIES, DATABASE_PIDS_LIMIT, waitReady } from '../databases/database-containers.js';
import { newPassword } from '../databases/databases.js';
import { ENGINES } from '../databases/engines.js';
import { serviceLabels } from '../runtime/service.js';
import type { ContainerEngine } from '../runtime/engine.js';
import type { DatabaseCredentials, EngineAdapter, RestoreOptions } from '../databases/engine-adapter.js';
import type { BackupRow } from './backup-store.js';
import { BackupStepError, HashingCounter, chain, inventoryMismatch, lastLine, takeInventory } from './backup-steps.js';
import { BackupCorruptError, decryptStream } from './backup-stream.js';
import type { BackupsContext } from './backups-context.js';
import { openDestination } from './destinations.js';
import { DestinationError } from './object-store.js';

/** Memory of a throwaway database: enough for a restore, bounded. */
const THROWAWAY_MEMORY_BYTES = 1024 * 1024 * 1024;
/** Time a throwaway database has to accept logins. */
const THROWAWAY_START_MS = 180_000;

/**
 * The stored object as a stream of the plaintext dump, its SHA-256 compared with the record at
 * its end; a mismatch, a failed tag or a cut fails the stream ("tampered or corrupt").
 */
export async function openBackupPlaintext(ctx: BackupsContext, backup: BackupRow, signal: AbortSignal): Promise<Readable> {
  const destination = await ctx.store.getDestination(backup.destination_id);
  if (destination === undefined) throw new BackupStepError('read', 'the backup destination no longer exists');
  const objects = await openDestination(ctx, destination);
  const stored = await objects.get(backup.location, signal);
  const counter = new HashingCounter();
  const expected = backup.sha256;
  const checked = chain(stored, counter);
  const decrypt = decryptStream(ctx.streamKey);
  counter.on('end', () => {
    if (expected !== null && counter.digest() !== expected) decrypt.destroy(new BackupCorruptError('its SHA-256 differs from the one recorded'));
  });
  return chain(checked, decrypt);
}

/** Reads the whole object through every check without keeping it (before a restore replaces data). */
export async function checkBackupObject(ctx: BackupsContext, backup: BackupRow, signal: AbortSignal): Promise<void> {
  try {
    await pipeline(await openBackupPlaintext(ctx, backup, signal), async function* (source) {
      for await (const _ of source) yield* [];
    });
  } catch (err) {
    throw asStepError(err, 'read');
  }
}

function asStepError(err: unknown, step: string): unknown {
  if (err instanceof BackupCorruptError) return new BackupStepError(step, err.message);
  if (err instanceof DestinationError || err instanceof BackupStepError) return err;
  return new BackupStepError(step, err instanceof Error ? err.message : String(err));
}

/** A throwaway database of `image` (no network, no port, unique name), removed by the caller. */
export async function startThrowaway(ctx: BackupsContext, adapter: EngineAdapter, image: string, databaseName: string, tag: string, signal: AbortSignal): Promise<{ id: string; credentials: DatabaseCredentials }> {
  const { engine, instanceId } = ctx.databases;
  // The source's database name (a MariaDB dump names its database), with a password of its own.
  const credentials = adapter.credentials(databaseName, newPassword());
  const fast = adapter.restoreMode === 'stream' ? adapter.throwaway?.(credentials) : undefined;
  const command = adapter.restoreMode === 'file' && adapter.restoreCommand !== undefined ? adapter.restoreCommand(credentials) : (fast?.command ?? adapter.command(credentials));
  const container = await engine.runContainer({
    image,
    name: `slipway-verify-${tag.replace(/[^a-z0-9]/g, '').slice(0, 12)}-${crypto.randomBytes(4).toString('hex')}`,
    labels: serviceLabels(instanceId, `verify-${tag}`),
    env: { ...adapter.environment(credentials), ...fast?.env },
    ...(command === undefined ? {} : { command }),
    containerPort: adapter.port,
    publish: false,
    restartOnCrash: false,
    memoryBytes: THROWAWAY_MEMORY_BYTES,
    nanoCpus: ctx.databases.limits.defaultNanoCpus,
    pidsLimit: DATABASE_PIDS_LIMIT,
    network: 'none',
    capabilities: DATABASE_CAPABILITIES,
  });
  try {
    await waitReady(engine, container.id, adapter, credentials, THROWAWAY_START_MS, signal);
  } catch (err) {
    await engine.removeContainer(container.id).catch(() => undefined);
    throw err;
  }
  return { id: container.id, credentials };
}

/**
 * Pipes `dump` into a database: a `stream` engine's restore tool reads it on stdin; a `file` engine
 * (Redis) gets the file written, then its server restarted to load it. Errors name `step`.
 */
export async function loadDump(engine: ContainerEngine, containerId: string, adapter: EngineAdapter, credentials: DatabaseCredentials, dump: Readable, options: RestoreOptions & { signal: AbortSignal }): Promise<void> {
  await pipeDump(engine, containerId, adapter, credentials, dump, options);
  if (adapter.restoreMode === 'file') {
    await engine.stopContainer(containerId, 30);
    await engine.startContainer(containerId);
    await waitReady(engine, containerId, adapter, credentials, THROWAWAY_START_MS, options.signal);
  }
}

/** Streams `dump` into the adapter's restore command (a `file` engine's writes the file); errors name the step `restore`. */
export async function pipeDump(engine: ContainerEngine, containerId: string, adapter: EngineAdapter, credentials: DatabaseCredentials, dump: Readable, options: RestoreOptions & { signal: AbortSignal }): Promise<void> {
  const command = adapter.restore(credentials, { clean: options.clean, ...(options.cpus === undefined ? {} : { cpus: options.cpus }) });
  let corrupt: unknown;
  dump.on('error', (err) => {
    corrupt = err;
  });
  const exec = await engine.execStream!(containerId, command.argv, { env: command.env, stdin: dump, signal: options.signal });
  exec.stdout.resume();
  let result;
  try {
    result = await exec.done;
  } catch (err) {
    throw asStepError(corrupt ?? err, 'restore');
  }
  if (corrupt !== undefined) throw asStepError(corrupt, 'restore');
  if (result.exitCode !== 0) throw new BackupStepError('restore', `${command.argv[0]} exited with ${result.exitCode}: ${lastLine(result.output)}`);
}

/** Restores `backup` into a throwaway container of its image and checks it; throws BackupStepError naming the failed step. */
export async function verifyBackup(ctx: BackupsContext, backup: BackupRow, signal: AbortSignal): Promise<void> {
  const adapter = ENGINES[backup.engine];
  const { engine } = ctx.databases;
  let throwaway: { id: string; credentials: DatabaseCredentials } | undefined;
  try {
    try {
      throwaway = await startThrowaway(ctx, adapter, backup.image, backup.database_name, backup.id, signal);
    } catch (err) {
      throw new BackupStepError('verify: start', err instanceof Error ? err.message : String(err));
    }
    const dump = await openBackupPlaintext(ctx, backup, signal).catch((err: unknown) => {
      throw asStepError(err, 'verify: read');
    });
    try {
      await loadDump(engine, throwaway.id, adapter, throwaway.credentials, dump, { clean: false, cpus: ctx.databases.limits.defaultNanoCpus / 1e9, signal });
    } catch (err) {
      const step = err instanceof BackupStepError ? err : (asStepError(err, 'restore') as BackupStepError);
      throw new BackupStepError(`verify: ${step.step}`, step.message);
    }
    const restored = await takeInventory(engine, throwaway.id, adapter.inventory(throwaway.credentials), adapter.parseInventory, 'verify: check');
    const mismatch = inventoryMismatch(backup.source_counts ?? [], restored);
    if (mismatch !== undefined) throw new BackupStepError('verify: check', mismatch);
  } finally {
    // The throwaway container goes whatever happened.
    if (throwaway !== undefined) await engine.removeContainer(throwaway.id).catch(() => undefined);
  }
}
