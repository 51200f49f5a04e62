// Backup use-cases of a database (decisions §20): take one now, list, read, delete, download decrypted; each authorized through the database's policy.
import crypto from 'node:crypto';
import { Readable } from 'node:stream';
import { DomainError } from '../core/errors.js';
import type { Principal } from '../core/principal.js';
import { pageFromRows, type Page, type PageRequest } from '../core/page.js';
import { getDatabaseRow } from '../databases/database-access.js';
import type { DatabaseRow } from '../databases/database-store.js';
import { databaseRecord } from '../databases/databases.js';
import type { AuditRecord } from '../domain/audit.js';
import { ENGINES } from '../databases/engines.js';
import { assertUuid } from '../domain/deployments.js';
import type { BackupRow, BackupTrigger, RestoreRow } from './backup-store.js';
import type { BackupsContext } from './backups-context.js';
import { getDestinationRow } from './destinations.js';
import { removeBackupObject } from './retention.js';
import { errorDetail } from './object-store.js';
import { takeBackup } from './take-backup.js';
import { openBackupPlaintext } from './verify-backup.js';
import { BackupCorruptError } from './backup-stream.js';

const notFound = (): DomainError => new DomainError('not_found', 'backup not found');

/** The object key of a backup: by database, then time, so a bucket listing reads in order. */
export function backupKey(db: Pick<DatabaseRow, 'id' | 'name' | 'engine'>, backupId: string, at: Date): string {
  const stamp = at.toISOString().replace(/[-:]/g, '').replace(/\.\d+Z$/, 'Z');
  return `${db.name}-${db.id.slice(0, 8)}/${stamp}-${backupId}.${ENGINES[db.engine].dumpExtension}.slwb`;
}

/** A new `running` restore record: `backupId` of database `databaseId` into `targetId` (the same database, or a new one). */
export function newRestoreRow(databaseId: string, backupId: string, targetId: string): RestoreRow {
  return {
    id: crypto.randomUUID(),
    database_id: databaseId,
    backup_id: backupId,
    target_database_id: targetId,
    safety_backup_id: null,
    status: 'running',
    error: null,
    started_at: new Date().toISOString(),
    finished_at: null,
  };
}

/** A new `running` backup record of `db` into destination `destinationId` (not yet started). */
export function newBackupRow(ctx: Pick<BackupsContext, 'runner'>, db: DatabaseRow, destinationId: string, trigger: BackupTrigger, dueAt: string | null = null): Omit<BackupRow, 'seq'> {
  const id = crypto.randomUUID();
  const now = new Date();
  return {
    id,
    database_id: db.id,
    database_name: db.name,
    engine: db.engine,
    image: db.image,
    user_id: db.user_id,
    team_id: db.team_id,
    destination_id: destinationId,
    status: 'running',
    trigger,
    size_bytes: null,
    sha256: null,
    // The object's key under the destination's prefix.
    location: backupKey(db, id, now),
    source_counts: null,
    runner: ctx.runner,
    due_at: dueAt,
    started_at: now.toISOString(),
    finished_at: null,
    verified_at: null,
    error: null,
  };
}

/**
 * Starts a backup of a running database now (202): into `destination_id`, or its schedule's
 * destination. It runs in the background: `succeeded`, then `verified` or `failed` with the step.
 */
export async function startBackup(ctx: BackupsContext, principal: Principal, databaseId: string, body: { destination_id?: string | undefined }): Promise<BackupRow> {
  const db = await getDatabaseRow(ctx.databases, principal, databaseId, 'change');
  const destinationId = body.destination_id ?? (await ctx.store.getSchedule(db.id))?.destination_id;
  if (destinationId === undefined) throw new DomainError('validation_error', 'name a destination_id (or set the database\'s backup schedule first)');
  const destination = await getDestinationRow(ctx, principal, destinationId, 'read');
  if (db.status !== 'running') throw new DomainError('invalid_state', `database "${db.name}" is ${db.status}: start it first (slipway db start ${db.name})`);
  const created = await recordAndTake(ctx, newBackupRow(ctx, db, destination.id, 'manual'), databaseRecord(principal, db, 'database.backup.create'));
  return created!;
}

/** Records a new backup and takes it in the background; undefined when its due time was taken already (another instance). */
export async function recordAndTake(ctx: BackupsContext, row: Omit<BackupRow, 'seq'>, audit?: AuditRecord): Promise<BackupRow | undefined> {
  ctx.work.hold(row.id);
  // A scheduled backup's claim: (database, due time) is unique, so one instance alone records it.
  if ((await ctx.store.createBackup(row, audit)) === 'due_taken') {
    ctx.work.drop(row.id);
    return undefined;
  }
  const created = (await ctx.store.getBackup(row.id))!;
  ctx.work.run(row.id, (signal) => takeBackup(ctx, created, signal).then(() => undefined));
  return created;
}

/** A backup of the database the caller may `action` on; anything else is 404. */
export async function getBackupRow(ctx: BackupsContext, principal: Principal, databaseId: string, backupId: string, action: 'read' | 'change' | 'manage'): Promise<BackupRow> {
  await getDatabaseRow(ctx.databases, principal, databaseId, action);
  try {
    assertUuid(backupId, 'backup');
  } catch {
    throw notFound();
  }
  const backup = await ctx.store.getBackup(backupId);
  if (backup === undefined || backup.database_id !== databaseId) throw notFound();
  return backup;
}

export type BackupPosition = readonly [seq: number];

/** A page of a database's backups, newest first. */
export async function listBackups(ctx: BackupsContext, principal: Principal, databaseId: string, page: PageRequest<BackupPosition>): Promise<Page<BackupRow, BackupPosition>> {
  const db = await getDatabaseRow(ctx.databases, principal, databaseId, 'read');
  const rows = await ctx.store.listBackups(db.id, page.after?.[0], page.limit + 1);
  return pageFromRows(rows, page.limit, (row) => [row.seq] as const);
}

/** Deletes a backup: its object in the destination, then its record. A running one is refused. */
export async function deleteBackup(ctx: BackupsContext, principal: Principal, databaseId: string, backupId: string): Promise<void> {
  const backup = await getBackupRow(ctx, principal, databaseId, backupId, 'change');
  if (backup.status === 'running') throw new DomainError('invalid_state', 'the backup is still running: wait for it to end');
  await removeBackupObject(ctx, backup);
  await ctx.store.removeBackup(backup.id, databaseRecord(principal, { id: backup.database_id, team_id: backup.team_id }, 'database.backup.delete'));
}

/** The backup's dump, decrypted, as a stream (owner or developer); a failed or running backup has none. */
export async function downloadBackup(ctx: BackupsContext, principal: Principal, databaseId: string, backupId: string, signal: AbortSignal): Promise<{ stream: Readable; filename: string }> {
  const backup = await getBackupRow(ctx, principal, databaseId, backupId, 'change');
  if (backup.status !== 'succeeded' && backup.status !== 'verified') throw new DomainError('invalid_state', `the backup is ${backup.status}: there is nothing to download`);
  const plain = await openBackupPlaintext(ctx, backup, signal).catch((err: unknown) => {
    throw new DomainError('invalid_state', `the backup could not be read from its destination: ${errorDetail(err)}`);
  });
  // The first chunk is read (and its tag checked) before answering: a tampered object is a 409, not a cut 200.
  const chunks = plain[Symbol.asyncIterator]();
  let first: IteratorResult<Buffer>;
  try {
    first = (await chunks.next()) as IteratorResult<Buffer>;
  } catch (err) {
    throw new DomainError('invalid_state', err instanceof BackupCorruptError ? err.message : `the backup could not be read from its destination: ${errorDetail(err)}`);
  }
  const stream = Readable.from(
    (async function* () {
      if (first.done === true) return;
      yield first.value;
      for (let next = await chunks.next(); next.done !== true; next = await chunks.next()) yield next.value as Buffer;
    })(),
  );
  const stamp = backup.started_at.replace(/[-:]/g, '').replace(/\.\d+Z$/, 'Z');
  return { stream, filename: `${backup.database_name}-${stamp}.${ENGINES[backup.engine].dumpExtension}` };
}

/** What the API shows of a backup. */
export function presentBackup(row: BackupRow) {
  return {
    id: row.id,
    database_id: row.database_id,
    destination_id: row.destination_id,
    status: row.status,
    trigger: row.trigger,
    size_bytes: row.size_bytes,
    sha256: row.sha256,
    location: row.location,
    started_at: row.started_at,
    finished_at: row.finished_at,
    verified_at: row.verified_at,
    error: row.error,
  };
}
