// The write-ahead log archiver (decisions §20, `pitr`): the leader's round keeps a receiver companion beside each such database, closes its log when written to, uploads each completed file encrypted, and takes base backups.
import crypto from 'node:crypto';
import { Readable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import type { BackgroundTask } from '../core/background.js';
import type { DatabaseRow } from '../databases/database-store.js';
import type { DatabaseCredentials, EngineAdapter } from '../databases/engine-adapter.js';
import { ENGINES } from '../databases/engines.js';
import type { ScriptCommand, WalArchiving } from '../databases/wal-archiving.js';
import type { ContainerEngine } from '../runtime/engine.js';
import { LABEL_COMPANION_OF, LABEL_SERVICE_OF, companionLabels, serviceContainer, serviceNetworkName } from '../runtime/service.js';
import type { BackupSchedule } from './backup-store.js';
import { BackupStepError, HashingCounter, chain, lastLine } from './backup-steps.js';
import { encryptStream } from './backup-stream.js';
import type { BackupsContext } from './backups-context.js';
import { openDestination } from './destinations.js';
import { errorDetail, type ObjectStore } from './object-store.js';
import type { BaseBackupRow } from './pitr-store.js';
import { baseBackupKey, segmentPosition, walFileKey } from './point-in-time-window.js';
import { dueTime } from './schedule.js';

/** Marks a companion container or volume as a log receiver (with LABEL_COMPANION_OF naming its database). */
const LABEL_COMPANION_ROLE = 'dev.slipway.companion';
const RECEIVER_ROLE = 'wal-receiver';
/** A receiver needs little: it writes what it reads. */
const RECEIVER_MEMORY_BYTES = 128 * 1024 * 1024;
const RECEIVER_PIDS_LIMIT = 64;
/** Time the round waits for the receiver to hold the file it just closed. */
const RECEIVE_WAIT_MS = 10_000;
/** Time one file's upload, or one base backup, may take. */
const UPLOAD_TIMEOUT_MS = 10 * 60_000;
const BASE_BACKUP_TIMEOUT_MS = 6 * 3_600_000;

const receiverLabels = (instanceId: string, databaseId: string): Record<string, string> => ({ ...companionLabels(instanceId, databaseId), [LABEL_COMPANION_ROLE]: RECEIVER_ROLE });
/** The receiver's volume: what it received survives its restarts until uploaded. */
export const receiverVolumeName = (instanceId: string, databaseId: string): string => `slipway-${instanceId.slice(0, 8)}-wal-${databaseId}`;

/** Runs a command whose script goes on stdin; throws with its last line when it fails. Resolves with its stdout. */
export async function runScript(engine: ContainerEngine, containerId: string, command: ScriptCommand, signal: AbortSignal): Promise<string> {
  const exec = await engine.execStream!(containerId, command.argv, { env: command.env, stdin: Readable.from([Buffer.from(command.stdin)]), signal });
  const out: Buffer[] = [];
  exec.stdout.on('data', (chunk: Buffer) => out.push(chunk));
  const result = await exec.done;
  if (result.exitCode !== 0) throw new Error(`${command.argv[0]} exited with ${result.exitCode}: ${lastLine(result.output)}`);
  return Buffer.concat(out).toString('utf8');
}

/** Runs a short command in a container; its output, or an error with its last line. */
async function run(engine: ContainerEngine, containerId: string, argv: readonly string[], env: Record<string, string> = {}, timeoutMs = 30_000): Promise<string> {
  const result = await engine.execInContainer!(containerId, argv, { env, timeoutMs });
  if (result.exitCode !== 0) throw new Error(`${argv[0]} exited with ${result.exitCode}: ${lastLine(result.output)}`);
  return result.output;
}

/** The archiver of this instance: what it prepared is remembered per database container (a new container is prepared again). */
export class WalArchiver {
  readonly #ctx: BackupsContext;
  readonly #prepared = new Map<string, string>();

  constructor(ctx: BackupsContext) {
    this.#ctx = ctx;
  }

  /** One round: receivers of databases without `pitr` removed (their slot dropped), then each `pitr` database archived. */
  async round(signal: AbortSignal = new AbortController().signal): Promise<void> {
    const ctx = this.#ctx;
    const schedules = new Map((await ctx.store.allSchedules()).filter((s) => s.pitr).map((s) => [s.database_id, s]));
    await this.#removeStale(schedules);
    for (const schedule of schedules.values()) {
      if (signal.aborted) return;
      const db = await ctx.databases.store.get(schedule.database_id);
      if (db === undefined || db.status !== 'running' || ENGINES[db.engine].pointInTime === undefined) continue;
      try {
        await this.archive(db, schedule, signal);
      } catch (err) {
        // A round cut short by a shutdown or a lost leadership is no failure of the archive.
        if (signal.aborted) return;
        const message = errorDetail(err);
        ctx.log('warn', `the write-ahead log of database ${db.name} was not archived this round`, { message });
        await ctx.pitr.setArchivedUntil(db.id, null, message);
      }
    }
  }

  /**
   * A receiver's volume marks a database whose log is archived. Without `pitr` any more: its
   * receiver goes, and once the database runs its slot is dropped (else its server would keep
   * log for ever) and the volume removed. A database that does not run loses its receiver only.
   */
  async #removeStale(schedules: ReadonlyMap<string, BackupSchedule>): Promise<void> {
    const { engine, instanceId } = this.#ctx.databases;
    const role = { [LABEL_SERVICE_OF]: instanceId, [LABEL_COMPANION_ROLE]: RECEIVER_ROLE };
    const ids = new Set([...(await engine.listVolumes(role)), ...(await engine.listContainers(role))].map((o) => o.labels[LABEL_COMPANION_OF] ?? ''));
    for (const id of ids) {
      if (id === '') continue;
      const db = await this.#ctx.databases.store.get(id);
      const keep = db !== undefined && schedules.has(id);
      if (keep && db.status === 'running') continue;
      for (const c of await engine.listContainers(receiverLabels(instanceId, id))) await engine.removeContainer(c.id);
      if (keep) continue;
      if (db !== undefined) {
        if (db.status !== 'running') continue;
        const container = await serviceContainer(engine, instanceId, id);
        const credentials = await this.#ctx.databases.store.credentials(id);
        const wal = ENGINES[db.engine].pointInTime;
        if (container === undefined || credentials === undefined || wal === undefined) continue;
        await runScript(engine, container.id, wal.dropSlot(credentials), AbortSignal.timeout(60_000));
      }
      await engine.removeVolume(receiverVolumeName(instanceId, id));
      this.#prepared.delete(id);
      this.#ctx.log('info', `point-in-time recovery of database ${db?.name ?? id} stopped: its log receiver removed`);
    }
  }

  /** Archives one database: its receiver ensured, its log closed when written to, every completed file uploaded; then base backups as due. */
  async archive(db: DatabaseRow, schedule: BackupSchedule, signal: AbortSignal): Promise<void> {
    const ctx = this.#ctx;
    const { engine, instanceId } = ctx.databases;
    const adapter = ENGINES[db.engine];
    const wal = adapter.pointInTime!;
    const credentials = await ctx.databases.store.credentials(db.id);
    const container = await serviceContainer(engine, instanceId, db.id);
    if (credentials === undefined || container === undefined || !container.running) return;
    if (this.#prepared.get(db.id) !== container.id) {
      await runScript(engine, container.id, wal.prepare(credentials), AbortSignal.timeout(60_000));
      this.#prepared.set(db.id, container.id);
    }
    const receiver = await this.#ensureReceiver(db, adapter, wal, credentials);
    const destination = await ctx.store.getDestination(schedule.destination_id);
    if (destination === undefined) throw new Error('the backup destination no longer exists');
    const objects = await openDestination(ctx, destination);

    // Everything committed before `now` is in the file `needed` or earlier.
    const now = new Date();
    const needed = (await run(engine, container.id, wal.switchLog(credentials).argv, wal.switchLog(credentials).env)).trim();
    const deadline = Date.now() + RECEIVE_WAIT_MS;
    for (;;) {
      const archived = await this.#uploadCompleted(db, receiver, adapter.dataDir, wal, objects, schedule.destination_id, signal);
      if (archived.has(needed) || archived.has(`${needed}.gz`)) {
        await ctx.pitr.setArchivedUntil(db.id, now.toISOString(), null);
        break;
      }
      if (Date.now() >= deadline) throw new Error(`the log receiver did not receive ${needed} within ${RECEIVE_WAIT_MS / 1000} s`);
      await sleep(250, undefined, { signal });
    }
    await this.#baseBackupIfDue(db, schedule);
  }

  /** The receiver's container, created (with its volume) or started as needed. */
  async #ensureReceiver(db: DatabaseRow, adapter: EngineAdapter, wal: WalArchiving, credentials: DatabaseCredentials): Promise<string> {
    const { engine, instanceId, limits } = this.#ctx.databases;
    const labels = receiverLabels(instanceId, db.id);
    const existing = (await engine.listContainers(labels))[0];
    if (existing !== undefined) {
      if (!existing.running) await engine.startContainer(existing.id);
      return existing.id;
    }
    const volume = receiverVolumeName(instanceId, db.id);
    await engine.ensureVolume({ name: volume, labels });
    const command = wal.receive(credentials, db.name, adapter.dataDir);
    const created = await engine.runContainer({
      image: db.image,
      name: `slipway-wal-${db.id.replace(/-/g, '').slice(0, 12)}-${crypto.randomBytes(3).toString('hex')}`,
      labels,
      env: command.env,
      command: command.argv,
      user: wal.user,
      containerPort: adapter.port,
      publish: false,
      // The engine restarts it when it dies; the round recreates it when it is gone.
      restartOnCrash: true,
      memoryBytes: RECEIVER_MEMORY_BYTES,
      nanoCpus: limits.defaultNanoCpus,
      pidsLimit: RECEIVER_PIDS_LIMIT,
      // The database's own network: it reaches the server by its name, never a published port.
      network: serviceNetworkName(instanceId, db.id),
      volumes: [{ source: volume, target: adapter.dataDir }],
      capabilities: [],
    });
    this.#ctx.log('info', `database ${db.name}: write-ahead log receiver started`);
    return created.id;
  }

  /** Uploads every completed file the receiver holds that is not archived yet (then deletes it there); the names archived. */
  async #uploadCompleted(db: DatabaseRow, receiverId: string, dir: string, wal: WalArchiving, objects: ObjectStore, destinationId: string, stop: AbortSignal): Promise<Set<string>> {
    const ctx = this.#ctx;
    const { engine } = ctx.databases;
    const listing = await run(engine, receiverId, ['find', dir, '-maxdepth', '1', '-type', 'f', '-printf', '%f %T@\\n']);
    const files = listing
      .split('\n')
      .map((line) => line.trim().split(' '))
      .filter((parts): parts is [string, string] => parts.length === 2 && wal.completed(parts[0]!))
      .sort(([a], [b]) => (a < b ? -1 : 1));
    const archived = new Set((await ctx.pitr.walFiles(db.id)).map((f) => f.name));
    for (const [name, mtime] of files) {
      if (!archived.has(name)) {
        const key = walFileKey(db, name);
        const signal = AbortSignal.any([stop, AbortSignal.timeout(UPLOAD_TIMEOUT_MS)]);
        const exec = await engine.execStream!(receiverId, ['cat', '--', `${dir}/${name}`], { signal });
        const counter = new HashingCounter();
        await objects.put(key, chain(chain(exec.stdout, encryptStream(ctx.streamKey)), counter), signal);
        const ended = await exec.done;
        if (ended.exitCode !== 0) {
          await objects.delete(key, AbortSignal.timeout(30_000)).catch(() => undefined);
          throw new Error(`reading ${name} from the receiver failed: ${lastLine(ended.output)}`);
        }
        await ctx.pitr.addWal({
          database_id: db.id,
          name,
          destination_id: destinationId,
          location: key,
          closed_at: new Date(Math.round(Number(mtime) * 1000)).toISOString(),
          size_bytes: counter.bytes,
          sha256: counter.digest(),
          uploaded_at: new Date().toISOString(),
        });
        archived.add(name);
      }
      await run(engine, receiverId, ['rm', '-f', '--', `${dir}/${name}`]);
    }
    return archived;
  }

  /** Starts a base backup when there is none yet or the schedule is due; a running one whose work is gone is failed. */
  async #baseBackupIfDue(db: DatabaseRow, schedule: BackupSchedule): Promise<void> {
    const ctx = this.#ctx;
    const bases = await ctx.pitr.bases(db.id);
    for (const lost of bases.filter((b) => b.status === 'running' && !ctx.work.has(baseWorkKey(b.database_id)))) {
      await ctx.pitr.updateBase(lost.id, { status: 'failed', error: 'instance lost: the instance taking it stopped before it ended', finished_at: new Date().toISOString(), runner: null });
    }
    if (ctx.work.has(baseWorkKey(db.id))) return;
    const newest = bases.filter((b) => b.status === 'succeeded').pop();
    const due = newest === undefined || dueTime(schedule.schedule, new Date(newest.started_at), new Date()) !== undefined;
    if (!due) return;
    ctx.work.run(baseWorkKey(db.id), (signal) => takeBaseBackup(ctx, db, schedule, signal).then(() => undefined));
  }
}

const baseWorkKey = (databaseId: string): string => `pitr-base-${databaseId}`;

/** A base backup of a running database streamed encrypted to the schedule's destination; older ones beyond `keep` pruned with the log only they needed. */
export async function takeBaseBackup(ctx: BackupsContext, db: DatabaseRow, schedule: Pick<BackupSchedule, 'destination_id' | 'keep'>, signal: AbortSignal): Promise<BaseBackupRow> {
  const { engine, instanceId } = ctx.databases;
  const wal = ENGINES[db.engine].pointInTime!;
  const cut = AbortSignal.any([signal, AbortSignal.timeout(BASE_BACKUP_TIMEOUT_MS)]);
  const container = await serviceContainer(engine, instanceId, db.id);
  const credentials = await ctx.databases.store.credentials(db.id);
  if (container === undefined || credentials === undefined) throw new Error('the database has no container');
  const destination = await ctx.store.getDestination(schedule.destination_id);
  if (destination === undefined) throw new Error('the backup destination no longer exists');
  const objects = await openDestination(ctx, destination);
  const startWal = (await run(engine, container.id, wal.currentLog(credentials).argv, wal.currentLog(credentials).env)).trim();
  const id = crypto.randomUUID();
  const started = new Date();
  const row: BaseBackupRow = {
    id,
    database_id: db.id,
    destination_id: destination.id,
    location: baseBackupKey(db, id, started),
    start_wal: startWal,
    status: 'running',
    size_bytes: null,
    sha256: null,
    runner: ctx.runner,
    error: null,
    started_at: started.toISOString(),
    finished_at: null,
  };
  await ctx.pitr.addBase(row);
  try {
    const command = wal.baseBackup(credentials);
    const exec = await engine.execStream!(container.id, command.argv, { env: command.env, signal: cut });
    const counter = new HashingCounter();
    await objects.put(row.location, chain(chain(exec.stdout, encryptStream(ctx.streamKey)), counter), cut);
    const ended = await exec.done;
    if (ended.exitCode !== 0) {
      await objects.delete(row.location, AbortSignal.timeout(30_000)).catch(() => undefined);
      throw new BackupStepError('base backup', `${command.argv[0]} exited with ${ended.exitCode}: ${lastLine(ended.output)}`);
    }
    const done = { status: 'succeeded' as const, size_bytes: counter.bytes, sha256: counter.digest(), finished_at: new Date().toISOString(), runner: null };
    await ctx.pitr.updateBase(id, done);
    await pruneBaseBackups(ctx, db.id, schedule.keep);
    ctx.log('info', `database ${db.name}: base backup ${id} taken`);
    return { ...row, ...done };
  } catch (err) {
    const message = errorDetail(err);
    await ctx.pitr.updateBase(id, { status: 'failed', error: message, finished_at: new Date().toISOString(), runner: null });
    ctx.log('warn', `database ${db.name}: base backup ${id} failed`, { message });
    ctx.events.emit({ type: 'backup.failed', databaseId: db.id, databaseName: db.name, backupId: id, step: 'base backup', message });
    throw err;
  }
}

/** Keeps the `keep` newest base backups that succeeded; older ones and the log before the oldest kept one's start are deleted from the destination. */
export async function pruneBaseBackups(ctx: BackupsContext, databaseId: string, keep: number): Promise<void> {
  const bases = await ctx.pitr.bases(databaseId);
  const succeeded = bases.filter((b) => b.status === 'succeeded');
  const kept = succeeded.slice(-keep);
  const oldest = kept[0];
  if (oldest === undefined) return;
  const drop = bases.filter((b) => b.status !== 'running' && b.started_at < oldest.started_at);
  const start = segmentPosition(oldest.start_wal) ?? '';
  const files = (await ctx.pitr.walFiles(databaseId)).filter((f) => {
    const position = segmentPosition(f.name);
    return position !== undefined && position < start;
  });
  for (const item of [...drop.map((b) => ({ destination_id: b.destination_id, location: b.location, forget: () => ctx.pitr.removeBase(b.id) })), ...files.map((f) => ({ destination_id: f.destination_id, location: f.location, forget: () => ctx.pitr.removeWal(databaseId, f.name) }))]) {
    try {
      const destination = await ctx.store.getDestination(item.destination_id);
      if (destination !== undefined) await (await openDestination(ctx, destination)).delete(item.location, AbortSignal.timeout(30_000));
      await item.forget();
    } catch (err) {
      ctx.log('warn', `an old point-in-time recovery object ${item.location} could not be deleted`, { err: errorDetail(err) });
    }
  }
}

/** The archiver's round as a background task (the leader's, every SLIPWAY_PITR_ROUND_SECONDS). */
export function walArchiveTask(archiver: WalArchiver, everyMs: number): BackgroundTask {
  return { name: 'archiving write-ahead logs', scope: 'leaderOnly', everyMs, immediately: true, run: (signal) => archiver.round(signal) };
}
