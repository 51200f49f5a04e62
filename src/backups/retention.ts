// Retention (decisions §20): `keep` counts a database's verified backups; older ones are deleted, their object in the destination first.
import { DomainError } from '../core/errors.js';
import type { BackupRow } from './backup-store.js';
import type { BackupsContext } from './backups-context.js';
import { openDestination } from './destinations.js';
import { errorDetail } from './object-store.js';

/** Deletes a backup's object; a destination that is gone leaves nothing to delete. */
export async function removeBackupObject(ctx: Pick<BackupsContext, 'store' | 'dataDir' | 'allowPrivateTargets'>, backup: BackupRow): Promise<void> {
  const destination = await ctx.store.getDestination(backup.destination_id);
  if (destination === undefined) return;
  const objects = await openDestination(ctx, destination);
  try {
    await objects.delete(backup.location, AbortSignal.timeout(30_000));
  } catch (err) {
    throw new DomainError('invalid_state', `the backup's object could not be deleted from its destination: ${errorDetail(err)}`);
  }
}

/** Keeps the `keep` newest verified backups of a database; older verified ones are deleted with their objects (one that cannot be is logged and tried again next time). */
export async function pruneBackups(ctx: BackupsContext, databaseId: string, keep: number): Promise<void> {
  for (const old of (await ctx.store.verifiedBackups(databaseId)).slice(keep)) {
    try {
      await removeBackupObject(ctx, old);
      await ctx.store.removeBackup(old.id);
    } catch (err) {
      ctx.log('warn', `an old backup ${old.id} could not be deleted`, { err: err instanceof Error ? err.message : String(err) });
    }
  }
}

/** After a backup of the database is verified: its schedule's `keep` applied (a database without a schedule keeps everything). */
export async function applyRetention(ctx: BackupsContext, databaseId: string): Promise<void> {
  const schedule = await ctx.store.getSchedule(databaseId).catch(() => undefined);
  if (schedule !== undefined) await pruneBackups(ctx, databaseId, schedule.keep);
}
