// Taking a backup (decisions §20), a pipeline of named steps: reach the destination, list the source, dump with the engine's own tool → encrypt → hash → multipart upload, record, then verify by restore.
import type { Readable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import type { ContainerCommand, DatabaseCredentials } from '../databases/engine-adapter.js';
import { ENGINES } from '../databases/engines.js';
import { serviceContainer } from '../runtime/service.js';
import type { BackupRow } from './backup-store.js';
import { BackupStepError, HashingCounter, chain, lastLine, takeInventory } from './backup-steps.js';
import { encryptStream } from './backup-stream.js';
import type { BackupsContext } from './backups-context.js';
import { openDestination } from './destinations.js';
import { DestinationError, errorDetail, type ObjectStore } from './object-store.js';
import { openSnapshotSession, type SnapshotSession } from './snapshot-session.js';
import { verifyBackup } from './verify-backup.js';
import { applyRetention, removeBackupObject } from './retention.js';

/** Time a whole backup (dump and upload) may take. */
const BACKUP_TIMEOUT_MS = 6 * 3_600_000;

/** Records a backup as failed with its step and message and tells the events port (backup.failed). */
export async function failBackup(ctx: Pick<BackupsContext, 'store' | 'events' | 'log'>, backup: BackupRow, step: string, message: string): Promise<void> {
  await ctx.store.updateBackup(backup.id, { status: 'failed', error: `${step}: ${message}`, finished_at: backup.finished_at ?? new Date().toISOString(), runner: null });
  ctx.log('warn', `backup ${backup.id} of database ${backup.database_name} failed at ${step}`, { message });
  ctx.events.emit({ type: 'backup.failed', databaseId: backup.database_id, databaseName: backup.database_name, backupId: backup.id, step, message });
}

/**
 * Whether the backup's record is gone: its database was deleted with its backups (or the backup by
 * hand while it was being verified) as it ran. Its outcome is then nobody's to record or be told of.
 */
async function recordGone(ctx: Pick<BackupsContext, 'store'>, backup: BackupRow): Promise<boolean> {
  return (await ctx.store.getBackup(backup.id).catch(() => backup)) === undefined;
}

/** How long a failed backup waits to see whether its database is being deleted. */
const DELETION_SETTLE_MS = 10_000;
/** A container seen running this long, throughout, is not one being deleted (a deletion kills it at once). */
const STILL_RUNNING_MS = 2_000;

/**
 * Whether the backup's database was deleted as it ran (a deletion kills and removes its container,
 * then its record): true once the record is gone within a few seconds; false as soon as the
 * container is seen running throughout 2 s, or after 10 s.
 */
async function databaseDeleted(ctx: BackupsContext, backup: BackupRow): Promise<boolean> {
  const { engine, instanceId, store } = ctx.databases;
  const deadline = Date.now() + DELETION_SETTLE_MS;
  let runningSince: number | null = null;
  for (;;) {
    if ((await store.get(backup.database_id).catch(() => null)) === undefined) return true;
    const container = await serviceContainer(engine, instanceId, backup.database_id).catch(() => undefined);
    runningSince = container?.running === true ? (runningSince ?? Date.now()) : null;
    if (runningSince !== null && Date.now() - runningSince >= STILL_RUNNING_MS) return false;
    if (Date.now() >= deadline) return false;
    await sleep(200);
  }
}

/** The step and message of any failure of the pipeline. */
export function stepOf(err: unknown, fallback: string): { step: string; message: string } {
  if (err instanceof BackupStepError) return { step: err.step, message: err.message };
  if (err instanceof DestinationError) return { step: err.step === 'write' ? 'upload' : err.step, message: err.message };
  return { step: fallback, message: errorDetail(err) };
}

/**
 * Runs a recorded (`running`) backup to its end: `succeeded` then `verified`, or `failed` with the
 * step. Nothing is held whole in memory or written to local disk; a failed upload leaves nothing
 * in the destination. `verify: false` stops after the upload (a safety backup before a restore).
 */
export async function takeBackup(ctx: BackupsContext, backup: BackupRow, signal: AbortSignal, options: { verify: boolean } = { verify: true }): Promise<'verified' | 'succeeded' | 'failed'> {
  const cut = AbortSignal.any([signal, AbortSignal.timeout(BACKUP_TIMEOUT_MS)]);
  ctx.work.hold(backup.id);
  try {
    const stored = await dumpAndUpload(ctx, backup, cut);
    if (await recordGone(ctx, backup)) {
      // Deleted while it ran (its database, with its backups): what was just stored goes too.
      await removeBackupObject(ctx, backup).catch((err: unknown) => ctx.log('warn', `the object of deleted backup ${backup.id} could not be deleted`, { err: errorDetail(err) }));
      return 'failed';
    }
    const done = { ...backup, ...stored, status: 'succeeded' as const, finished_at: new Date().toISOString() };
    await ctx.store.updateBackup(backup.id, { status: 'succeeded', ...stored, finished_at: done.finished_at });
    if (!options.verify) {
      await ctx.store.updateBackup(backup.id, { runner: null });
      return 'succeeded';
    }
    return await verifyAndRecord(ctx, done, cut);
  } catch (err) {
    if (await recordGone(ctx, backup)) return 'failed'; // deleted meanwhile: nobody to tell
    if (await databaseDeleted(ctx, backup)) {
      // Its database was deleted under it (the backups kept): a failure the user caused and knows of, not one to be told.
      await ctx.store.updateBackup(backup.id, { status: 'failed', error: 'dump: the database was deleted while it was being backed up', finished_at: new Date().toISOString(), runner: null });
      return 'failed';
    }
    const { step, message } = stepOf(err, 'dump');
    await failBackup(ctx, backup, step, cut.aborted && !signal.aborted ? `did not finish within ${BACKUP_TIMEOUT_MS / 3_600_000} h` : message);
    return 'failed';
  } finally {
    ctx.work.drop(backup.id);
  }
}

/** Verifies a stored backup and records the outcome (verified, or failed naming the step), telling the events port. */
export async function verifyAndRecord(ctx: BackupsContext, backup: BackupRow, signal: AbortSignal): Promise<'verified' | 'failed'> {
  try {
    await verifyBackup(ctx, backup, signal);
  } catch (err) {
    if (await recordGone(ctx, backup)) return 'failed'; // deleted while being verified: nobody to tell
    const { step, message } = stepOf(err, 'verify');
    await failBackup(ctx, backup, step.startsWith('verify') ? step : `verify: ${step}`, message);
    return 'failed';
  }
  await ctx.store.updateBackup(backup.id, { status: 'verified', verified_at: new Date().toISOString(), runner: null, error: null });
  ctx.events.emit({ type: 'backup.verified', databaseId: backup.database_id, databaseName: backup.database_name, backupId: backup.id });
  await applyRetention(ctx, backup.database_id);
  return 'verified';
}

async function dumpAndUpload(ctx: BackupsContext, backup: BackupRow, signal: AbortSignal): Promise<Pick<BackupRow, 'size_bytes' | 'sha256' | 'source_counts'>> {
  const adapter = ENGINES[backup.engine];
  // The destination is checked while the source is made ready (the two are independent); its
  // failure is the one named when both fail, and nothing is dumped unless it passed.
  const [reached, opened] = await Promise.allSettled([reachDestination(ctx, backup, signal), openSource(ctx, backup, signal)]);
  if (reached.status === 'rejected') {
    if (opened.status === 'fulfilled') opened.value.session?.abort();
    throw reached.reason;
  }
  if (opened.status === 'rejected') throw opened.reason;
  const objects = reached.value;
  const { containerId, credentials, session } = opened.value;
  const { engine } = ctx.databases;
  try {
    const before = session === undefined ? await takeInventory(engine, containerId, adapter.inventory(credentials), adapter.parseInventory, 'dump') : undefined;
    const command = session === undefined ? adapter.dump(credentials) : adapter.snapshotDump!.dump(credentials, session.snapshot);
    const stored = await dumpInto(ctx, objects, backup, command, containerId, signal);
    const counts = session === undefined ? [before!, await takeInventory(engine, containerId, adapter.inventory(credentials), adapter.parseInventory, 'dump')] : [await session.finish()];
    return { ...stored, source_counts: counts };
  } catch (err) {
    session?.abort();
    throw err;
  }
}

/** The backup's destination, reached and its credentials checked (steps `resolve`, `auth`). */
async function reachDestination(ctx: BackupsContext, backup: BackupRow, signal: AbortSignal): Promise<ObjectStore> {
  const destination = await ctx.store.getDestination(backup.destination_id);
  if (destination === undefined) throw new BackupStepError('resolve', 'the backup destination no longer exists');
  const objects = await openDestination(ctx, destination);
  await objects.reach(signal);
  await objects.authorize(signal);
  return objects;
}

/**
 * The source's running container and credentials; where the engine can share a snapshot, a session
 * holding it, whose inventory (counted once, in the dump's own snapshot, while the dump runs)
 * replaces the counts before and after the dump that a plain dump needs (a restored count must lie between).
 */
async function openSource(ctx: BackupsContext, backup: BackupRow, signal: AbortSignal): Promise<{ containerId: string; credentials: DatabaseCredentials; session: SnapshotSession | undefined }> {
  const { engine, instanceId } = ctx.databases;
  const adapter = ENGINES[backup.engine];
  const container = await serviceContainer(engine, instanceId, backup.database_id);
  if (container === undefined || !container.running) throw new BackupStepError('dump', `database "${backup.database_name}" is not running: start it first`);
  const credentials = await ctx.databases.store.credentials(backup.database_id);
  if (credentials === undefined) throw new BackupStepError('dump', 'the database no longer exists');
  if (engine.execStream === undefined) throw new BackupStepError('dump', 'this engine cannot stream a command\'s output');
  const session = adapter.snapshotDump === undefined ? undefined : await openSnapshotSession(engine, container.id, adapter.snapshotDump, credentials, adapter.parseInventory, signal);
  return { containerId: container.id, credentials, session };
}

/** Streams `command`'s output through the encryption and the hash into the object; a failed dump leaves no object. */
async function dumpInto(ctx: BackupsContext, objects: ObjectStore, backup: BackupRow, command: ContainerCommand, containerId: string, signal: AbortSignal): Promise<Pick<BackupRow, 'size_bytes' | 'sha256'>> {
  const { engine } = ctx.databases;
  const dumpCut = new AbortController();
  const cut = AbortSignal.any([signal, dumpCut.signal]);
  const exec = await engine.execStream!(containerId, command.argv, { env: command.env, signal: cut });
  const counter = new HashingCounter();
  const body: Readable = chain(chain(exec.stdout, encryptStream(ctx.streamKey)), counter);
  try {
    await objects.put(backup.location, body, cut);
  } catch (err) {
    dumpCut.abort(new Error('the upload failed'));
    // The dump's own failure explains a cut stream better than the upload's.
    const ended = await Promise.race([exec.done.catch(() => undefined), new Promise<undefined>((r) => setTimeout(() => r(undefined), 2000).unref())]);
    if (ended !== undefined && ended.exitCode !== 0) throw new BackupStepError('dump', `${command.argv[0]} exited with ${ended.exitCode}: ${lastLine(ended.output)}`);
    throw err;
  }
  const ended = await exec.done;
  if (ended.exitCode !== 0) {
    await objects.delete(backup.location, AbortSignal.timeout(30_000)).catch(() => undefined);
    throw new BackupStepError('dump', `${command.argv[0]} exited with ${ended.exitCode}: ${lastLine(ended.output)}`);
  }
  return { size_bytes: counter.bytes, sha256: counter.digest() };
}
