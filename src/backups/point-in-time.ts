// Point-in-time recovery (decisions §20): `restore {at, into}` creates a database, lays the newest base backup before `at` in its volume with the archived log, replays to `at` and promotes.
import crypto from 'node:crypto';
import type { Readable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import { createGunzip } from 'node:zlib';
import { DomainError } from '../core/errors.js';
import type { Principal } from '../core/principal.js';
import { getDatabaseRow } from '../databases/database-access.js';
import { DATABASE_CAPABILITIES, DATABASE_PIDS_LIMIT } from '../databases/database-containers.js';
import type { DatabaseRow } from '../databases/database-store.js';
import { createDatabase, databaseRecord } from '../databases/databases.js';
import type { DatabaseCredentials } from '../databases/engine-adapter.js';
import { ENGINES } from '../databases/engines.js';
import { startNow } from '../databases/provisioning.js';
import type { WalArchiving } from '../databases/wal-archiving.js';
import type { ContainerEngine } from '../runtime/engine.js';
import { lastOutput } from '../runtime/release.js';
import { serviceContainer, serviceLabels, serviceVolumeName } from '../runtime/service.js';
import type { RestoreRow } from './backup-store.js';
import { BackupStepError, HashingCounter, chain, lastLine } from './backup-steps.js';
import { BackupCorruptError, decryptStream } from './backup-stream.js';
import type { BackupsContext } from './backups-context.js';
import { openDestination } from './destinations.js';
import { errorDetail } from './object-store.js';
import { newRestoreRow } from './backups.js';
import type { BaseBackupRow, WalFileRow } from './pitr-store.js';
import { checkRecoveryTime, chooseBaseBackup, recoverableWindow, walFilesFor } from './point-in-time-window.js';
import { stepOf } from './take-backup.js';
import { runScript } from './wal-archiver.js';

/** Time a whole recovery may take. */
const RECOVERY_TIMEOUT_MS = 6 * 3_600_000;
/** Memory of the helper and recovering containers. */
const HELPER_MEMORY_BYTES = 1024 * 1024 * 1024;
/** Where the archived log is staged inside the data directory (removed once recovered). */
const STAGING = 'slipway-restore-wal';

/**
 * Starts a recovery of database `databaseId` to `at` into a new database `into` (202 with the
 * restore record). Refused: not PostgreSQL or without `pitr` (409), no `into` or `at` outside the
 * recoverable window (400, naming the window).
 */
export async function startPointInTimeRestore(ctx: BackupsContext, principal: Principal, databaseId: string, input: { at?: unknown; into?: unknown; backup_id?: unknown }): Promise<RestoreRow> {
  const source = await getDatabaseRow(ctx.databases, principal, databaseId, 'change');
  if (ENGINES[source.engine].pointInTime === undefined) throw new DomainError('invalid_state', `point-in-time recovery is offered for PostgreSQL databases; "${source.name}" is ${source.engine}`);
  const bases = await ctx.pitr.bases(source.id);
  if ((await ctx.store.getSchedule(source.id))?.pitr !== true && bases.length === 0) {
    throw new DomainError('invalid_state', `database "${source.name}" has no point-in-time recovery: set its backup schedule's pitr to true first (PATCH backup {schedule, destination_id, pitr: true})`);
  }
  if (input.backup_id !== undefined) throw new DomainError('validation_error', 'give either at (a point in time) or backup_id (a backup), not both');
  if (typeof input.into !== 'string' || input.into.trim() === '') throw new DomainError('validation_error', 'into is required with at: a point-in-time recovery restores into a new database (into: NAME)');
  const window = recoverableWindow(bases, (await ctx.pitr.state(source.id))?.archived_until);
  const at = checkRecoveryTime(input.at, window);
  const base = chooseBaseBackup(bases, at);
  if (base === undefined) throw new DomainError('validation_error', 'no base backup ended before that time');
  const sourceCredentials = await ctx.databases.store.credentials(source.id);
  if (sourceCredentials === undefined) throw new DomainError('not_found', 'database not found');
  const target = await createDatabase(ctx.databases, principal, { name: input.into, engine: source.engine, team_id: source.team_id });
  const row = newRestoreRow(source.id, base.id, target.id);
  await ctx.store.createRestore(row, databaseRecord(principal, source, 'database.restore'));
  const files = walFilesFor(await ctx.pitr.walFiles(source.id), base, at);
  ctx.work.run(`restore-${row.id}`, (signal) =>
    recoverInto(ctx, row, { source, sourceDatabase: sourceCredentials.database, base, files, at }, AbortSignal.any([signal, AbortSignal.timeout(RECOVERY_TIMEOUT_MS)])),
  );
  return row;
}

interface Recovery {
  readonly source: DatabaseRow;
  /** The source's database inside the server: renamed to the new one's after recovery. */
  readonly sourceDatabase: string;
  readonly base: BaseBackupRow;
  readonly files: readonly WalFileRow[];
  readonly at: Date;
}

/** Runs the recovery and records its outcome on the restore. */
async function recoverInto(ctx: BackupsContext, restore: RestoreRow, recovery: Recovery, signal: AbortSignal): Promise<void> {
  try {
    await recover(ctx, restore.target_database_id, recovery, signal);
    await ctx.store.updateRestore(restore.id, { status: 'succeeded', finished_at: new Date().toISOString() });
    ctx.log('info', `database ${recovery.source.name} recovered to ${recovery.at.toISOString()} into database ${restore.target_database_id}`);
  } catch (err) {
    const { step, message } = stepOf(err, 'recover');
    await ctx.store.updateRestore(restore.id, { status: 'failed', error: `${step}: ${message}`, finished_at: new Date().toISOString() });
    ctx.log('warn', `point-in-time restore ${restore.id} failed at ${step}`, { message });
  }
}

/** Recovery of `recovery` into the new database `targetId`: data laid, log replayed, promoted, then the database started as usual. */
export async function recover(ctx: BackupsContext, targetId: string, recovery: Recovery, signal: AbortSignal): Promise<void> {
  const { engine, instanceId } = ctx.databases;
  const adapter = ENGINES[recovery.source.engine];
  const wal = adapter.pointInTime!;
  // Its first start is cut short (its fresh data would be thrown away): its network and volume are
  // made; the recovered data takes the volume, and the database is started once, at the end.
  await ctx.databases.work.abort(targetId);
  const credentials = await ctx.databases.store.credentials(targetId);
  if (credentials === undefined) throw new BackupStepError('create', 'the new database no longer exists');
  await ctx.databases.store.update(targetId, { status: 'creating', error: null });
  const fresh = await serviceContainer(engine, instanceId, targetId);
  if (fresh !== undefined) await engine.removeContainer(fresh.id);
  await ctx.databases.engine.ensureVolume({ name: serviceVolumeName(instanceId, targetId), labels: serviceLabels(instanceId, targetId) });

  const volume = serviceVolumeName(instanceId, targetId);
  const dataDir = `${adapter.dataDir}/${wal.dataSubdir}`;
  const staging = `${dataDir}/${STAGING}`;
  const helper = (command: { entrypoint?: readonly string[]; command: readonly string[]; env: Record<string, string>; user?: string }) =>
    engine.runContainer({
      image: recovery.source.image,
      name: `slipway-pitr-${targetId.replace(/-/g, '').slice(0, 12)}-${crypto.randomBytes(3).toString('hex')}`,
      labels: serviceLabels(instanceId, `pitr-${targetId}`),
      env: command.env,
      ...(command.entrypoint === undefined ? {} : { entrypoint: command.entrypoint }),
      command: command.command,
      ...(command.user === undefined ? {} : { user: command.user }),
      containerPort: adapter.port,
      publish: false,
      restartOnCrash: false,
      memoryBytes: HELPER_MEMORY_BYTES,
      nanoCpus: ctx.databases.limits.defaultNanoCpus,
      pidsLimit: DATABASE_PIDS_LIMIT,
      network: 'none',
      volumes: [{ source: volume, target: adapter.dataDir }],
      capabilities: DATABASE_CAPABILITIES,
    });

  // 1. The base backup and the log, laid in the volume by a helper of the same image (its own user).
  const layer = await helper({ entrypoint: ['sleep'], command: ['infinity'], env: {}, user: wal.user });
  try {
    await exec(engine, layer.id, ['mkdir', '-p', '-m', '700', '--', dataDir], 'lay out');
    await exec(engine, layer.id, ['find', dataDir, '-mindepth', '1', '-delete'], 'lay out');
    await pipeIn(engine, layer.id, ['tar', '-x', '-f', '-', '-C', dataDir], await openStored(ctx, recovery.base.destination_id, recovery.base.location, recovery.base.sha256, false, signal), 'base backup', signal);
    await exec(engine, layer.id, ['mkdir', '-p', '--', staging], 'lay out');
    for (const file of recovery.files) {
      const { name, gzip } = wal.restoredName(file.name);
      await pipeIn(engine, layer.id, ['dd', `of=${staging}/${name}`, 'bs=1M', 'status=none'], await openStored(ctx, file.destination_id, file.location, file.sha256, gzip, signal), 'log', signal);
    }
    await exec(engine, layer.id, ['touch', '--', `${dataDir}/${wal.recoverySignal}`], 'lay out');
  } finally {
    await engine.removeContainer(layer.id).catch(() => undefined);
  }

  // 2. Replay to `at`. When no commit after `at` was archived, the target is never met: everything
  // archived is then the state at `at` (the window guarantees it holds every commit before), so it
  // is replayed to its end instead.
  let ended = await replay(ctx, helper, wal, recovery.at, dataDir, staging, credentials, signal);
  if (ended.beyond) ended = await replay(ctx, helper, wal, undefined, dataDir, staging, credentials, signal);
  if (ended.containerId === undefined) throw new BackupStepError('recover', ended.message);
  try {
    // 3. The recovered data becomes the new database's: its name and password.
    await runScript(engine, ended.containerId, wal.adopt(recovery.sourceDatabase, credentials), signal).catch((err: unknown) => {
      throw new BackupStepError('adopt', errorDetail(err));
    });
    await exec(engine, ended.containerId, ['rm', '-rf', '--', staging], 'adopt');
    await engine.stopContainer(ended.containerId, 60);
  } finally {
    await engine.removeContainer(ended.containerId).catch(() => undefined);
  }
  // 4. Started as any database is (its own container, network, probe with its own credentials).
  await startNow(ctx.databases, targetId, signal);
  const started = await ctx.databases.store.get(targetId);
  if (started?.status !== 'running') throw new BackupStepError('start', started?.error ?? 'the recovered database did not start');
}

type Helper = (command: { entrypoint?: readonly string[]; command: readonly string[]; env: Record<string, string>; user?: string }) => ReturnType<ContainerEngine['runContainer']>;

/** Runs the server recovering to `at` (undefined: the end of the log) until it is promoted: its container, or why it stopped. */
async function replay(
  ctx: BackupsContext,
  helper: Helper,
  wal: WalArchiving,
  at: Date | undefined,
  dataDir: string,
  staging: string,
  credentials: DatabaseCredentials,
  signal: AbortSignal,
): Promise<{ containerId?: string; beyond: boolean; message: string }> {
  const { engine } = ctx.databases;
  const server = await helper({ command: wal.recover(staging, at), env: { PGDATA: dataDir } });
  const probe = wal.recovered(credentials);
  for (;;) {
    signal.throwIfAborted();
    const info = await engine.inspectContainer(server.id);
    if (info === null || (!info.running && info.state !== 'created')) {
      const output = await lastOutput(engine, server.id, 50);
      await engine.removeContainer(server.id).catch(() => undefined);
      return { beyond: at !== undefined && wal.targetBeyondLog.test(output), message: `the recovering server stopped: ${lastLine(output.split('\n').filter((l) => /FATAL|PANIC|ERROR/.test(l)).join('\n') || output)}` };
    }
    const result = await engine.execInContainer!(server.id, probe.argv, { env: probe.env, timeoutMs: 10_000 }).catch(() => undefined);
    if (result?.exitCode === 0 && result.output.trim() === 'f') return { containerId: server.id, beyond: false, message: '' };
    await sleep(250, undefined, { signal });
  }
}

/** A stored object as its plaintext (then gunzipped when `gzip`); its SHA-256 is checked at its end, every GCM tag on the way. */
async function openStored(ctx: BackupsContext, destinationId: string, location: string, sha256: string | null, gzip: boolean, signal: AbortSignal): Promise<Readable> {
  const destination = await ctx.store.getDestination(destinationId);
  if (destination === undefined) throw new BackupStepError('read', 'the backup destination no longer exists');
  const stored = await (await openDestination(ctx, destination)).get(location, signal);
  const counter = new HashingCounter();
  const decrypt = decryptStream(ctx.streamKey);
  counter.on('end', () => {
    if (sha256 !== null && counter.digest() !== sha256) decrypt.destroy(new BackupCorruptError('its SHA-256 differs from the one recorded'));
  });
  const plain = chain(chain(stored, counter), decrypt);
  return gzip ? chain(plain, createGunzip()) : plain;
}

/** Pipes `input` into a command in the container; a corrupt object or a failed command is the step `step`. */
async function pipeIn(engine: ContainerEngine, containerId: string, argv: readonly string[], input: Readable, step: string, signal: AbortSignal): Promise<void> {
  let broken: unknown;
  input.on('error', (err) => {
    broken = err;
  });
  const run = await engine.execStream!(containerId, argv, { stdin: input, signal });
  run.stdout.resume();
  const result = await run.done.catch((err: unknown) => {
    throw new BackupStepError(step, errorDetail(broken ?? err));
  });
  if (broken !== undefined) throw new BackupStepError(step, errorDetail(broken));
  if (result.exitCode !== 0) throw new BackupStepError(step, `${argv[0]} exited with ${result.exitCode}: ${lastLine(result.output)}`);
}

async function exec(engine: ContainerEngine, containerId: string, argv: readonly string[], step: string): Promise<void> {
  const result = await engine.execInContainer!(containerId, argv, { timeoutMs: 300_000 });
  if (result.exitCode !== 0) throw new BackupStepError(step, `${argv[0]} exited with ${result.exitCode}: ${lastLine(result.output)}`);
}

/** What the API shows of a database's point-in-time recovery: whether it is on, its recoverable window, the archiver's last error. */
export async function getRecoveryWindow(ctx: BackupsContext, principal: Principal, databaseId: string): Promise<{ pitr: boolean; from: string | null; until: string | null; base_backups: number; error: string | null }> {
  const db = await getDatabaseRow(ctx.databases, principal, databaseId, 'read');
  const bases = await ctx.pitr.bases(db.id);
  const state = await ctx.pitr.state(db.id);
  const window = recoverableWindow(bases, state?.archived_until);
  return {
    pitr: (await ctx.store.getSchedule(db.id))?.pitr === true,
    from: window?.from.toISOString() ?? null,
    until: window?.until.toISOString() ?? null,
    base_backups: bases.filter((b) => b.status === 'succeeded').length,
    error: state?.error ?? bases.filter((b) => b.status === 'failed').pop()?.error ?? null,
  };
}
