// Restoring a backup (decisions §20): in place (the object checked whole first, a safety backup of the current data, then the data replaced and linked apps restarted) or into a new database.
import { setTimeout as sleep } from 'node:timers/promises';
import { DomainError } from '../core/errors.js';
import type { Principal } from '../core/principal.js';
import { getDatabaseRow } from '../databases/database-access.js';
import type { DatabaseRow } from '../databases/database-store.js';
import { createDatabase, databaseRecord } from '../databases/databases.js';
import { ENGINES } from '../databases/engines.js';
import { serviceContainer } from '../runtime/service.js';
import type { BackupRow, RestoreRow } from './backup-store.js';
import { BackupStepError } from './backup-steps.js';
import type { BackupsContext } from './backups-context.js';
import { getBackupRow, newBackupRow, newRestoreRow } from './backups.js';
import { failBackup, stepOf, takeBackup } from './take-backup.js';
import { checkBackupObject, loadDump, openBackupPlaintext } from './verify-backup.js';
import { restoreFileIntoService } from './restore-file.js';

/** Time a whole restore may take. */
const RESTORE_TIMEOUT_MS = 6 * 3_600_000;
/** How often a restore into a new database looks whether that database runs. */
const STARTED_POLL_MS = 100;

export interface RestoreInput {
  readonly backup_id?: unknown;
  readonly into?: unknown;
}

/**
 * Starts a restore of one of the database's backups (202 with the restore record). A backup that
 * failed or still runs is refused (409). `into`: a new database of that name gets the data.
 */
export async function startRestore(ctx: BackupsContext, principal: Principal, databaseId: string, input: RestoreInput): Promise<RestoreRow> {
  if (typeof input.backup_id !== 'string') throw new DomainError('validation_error', 'backup_id is required');
  const backup = await getBackupRow(ctx, principal, databaseId, input.backup_id, 'change');
  if (backup.status === 'failed') throw new DomainError('invalid_state', `backup ${backup.id} failed (${backup.error ?? 'unknown'}): it cannot be restored`);
  if (backup.status === 'running') throw new DomainError('invalid_state', `backup ${backup.id} is still running`);
  const source = await getDatabaseRow(ctx.databases, principal, databaseId, 'change');
  let targetId = source.id;
  if (input.into !== undefined) {
    const created = await createDatabase(ctx.databases, principal, { name: input.into, engine: source.engine, team_id: source.team_id });
    targetId = created.id;
  } else if (source.status !== 'running') {
    throw new DomainError('invalid_state', `database "${source.name}" is ${source.status}: start it first (slipway db start ${source.name})`);
  }
  const row = newRestoreRow(source.id, backup.id, targetId);
  await ctx.store.createRestore(row, databaseRecord(principal, source, 'database.restore'));
  ctx.work.run(`restore-${row.id}`, (signal) => runRestore(ctx, principal, row, backup, AbortSignal.any([signal, AbortSignal.timeout(RESTORE_TIMEOUT_MS)])));
  return row;
}

async function runRestore(ctx: BackupsContext, principal: Principal, restore: RestoreRow, backup: BackupRow, signal: AbortSignal): Promise<void> {
  const inPlace = restore.target_database_id === restore.database_id;
  try {
    // The whole object is read and checked first (every GCM tag, the SHA-256): a tampered backup restores nothing.
    try {
      await checkBackupObject(ctx, backup, signal);
    } catch (err) {
      const { step, message } = stepOf(err, 'read');
      await failBackup(ctx, backup, step, message);
      throw new BackupStepError(step, message);
    }
    // The database restored into, as it is before the data goes in (its CPU share sizes the restore).
    let target: DatabaseRow | undefined;
    if (inPlace) {
      const db = await ctx.databases.store.get(restore.database_id);
      if (db === undefined) throw new BackupStepError('restore', 'the database no longer exists');
      target = db;
      const safety = newBackupRow(ctx, db, backup.destination_id, 'safety');
      ctx.work.hold(safety.id);
      await ctx.store.createBackup(safety);
      await ctx.store.updateRestore(restore.id, { safety_backup_id: safety.id });
      const outcome = await takeBackup(ctx, (await ctx.store.getBackup(safety.id))!, signal, { verify: false });
      if (outcome === 'failed') throw new BackupStepError('safety backup', `the backup of the current data failed (see backup ${safety.id}): nothing was replaced`);
    } else {
      target = await untilStarted(ctx, restore.target_database_id, signal);
      if (target?.status !== 'running') throw new BackupStepError('restore', `the new database did not start: ${target?.error ?? 'unknown'}`);
    }
    const { engine, instanceId } = ctx.databases;
    const container = await serviceContainer(engine, instanceId, restore.target_database_id);
    const credentials = await ctx.databases.store.credentials(restore.target_database_id);
    if (container === undefined || credentials === undefined) throw new BackupStepError('restore', 'the database has no running container');
    const adapter = ENGINES[backup.engine];
    const dump = await openBackupPlaintext(ctx, backup, signal);
    if (adapter.restoreMode === 'file') await restoreFileIntoService(ctx, restore.target_database_id, backup, dump, signal);
    else await loadDump(engine, container.id, adapter, credentials, dump, { clean: inPlace, cpus: (target.nano_cpus ?? ctx.databases.limits.defaultNanoCpus) / 1e9, signal });
    if (inPlace) await restartLinkedApps(ctx, principal, restore.database_id);
    await ctx.store.updateRestore(restore.id, { status: 'succeeded', finished_at: new Date().toISOString() });
    ctx.log('info', `backup ${backup.id} restored into database ${restore.target_database_id}`);
  } catch (err) {
    const { step, message } = stepOf(err, 'restore');
    await ctx.store.updateRestore(restore.id, { status: 'failed', error: `${step}: ${message}`, finished_at: new Date().toISOString() });
    ctx.log('warn', `restore ${restore.id} failed at ${step}`, { message });
  }
}

/**
 * The new database's row once its start ended or it runs: the start's last step (measuring the
 * data directory's size) is not waited for.
 */
async function untilStarted(ctx: BackupsContext, databaseId: string, signal: AbortSignal): Promise<DatabaseRow | undefined> {
  const settled = ctx.databases.work.settled(databaseId).then(() => true);
  for (;;) {
    const row = await ctx.databases.store.get(databaseId);
    if (row?.status !== 'creating') return row;
    if (await Promise.race([settled, sleep(STARTED_POLL_MS, false, { signal })])) return ctx.databases.store.get(databaseId);
  }
}

/** Restarts the apps linked to a database (their connections to the replaced data are stale); one that cannot be restarted is logged. */
async function restartLinkedApps(ctx: BackupsContext, principal: Principal, databaseId: string): Promise<void> {
  for (const link of await ctx.databases.store.linksOfDatabase(databaseId)) {
    try {
      await ctx.restartApp(principal, link.deployment_id);
    } catch (err) {
      ctx.log('warn', `app ${link.deployment_id} linked to a restored database was not restarted`, { err: err instanceof Error ? err.message : String(err) });
    }
  }
}

/** A restore of the database's backups the caller may read. */
export async function getRestore(ctx: BackupsContext, principal: Principal, databaseId: string, restoreId: string): Promise<RestoreRow> {
  const db = await getDatabaseRow(ctx.databases, principal, databaseId, 'read');
  const row = /^[0-9a-f-]{36}$/i.test(restoreId) ? await ctx.store.getRestore(restoreId) : undefined;
  if (row === undefined || row.database_id !== db.id) throw new DomainError('not_found', 'restore not found');
  return row;
}
