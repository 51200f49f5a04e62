// A deleted database's backups removed with it (decisions §19: `DELETE …/databases/{id}?delete_backups=true`): every backup's object and record, and its point-in-time base backups and log files.
import type { BackupsContext } from './backups-context.js';
import { openDestination } from './destinations.js';
import { removeBackupObject } from './retention.js';
import type { ObjectStore } from './object-store.js';

/**
 * Deletes every backup of `databaseId` (a database already deleted, its authorization checked by
 * that deletion): its record, then its object in the destination. Record first, for a backup still
 * running: its runner, finding the record gone when its upload ends, deletes what it stored, and an
 * upload that ended before the record went is deleted here. An object that cannot be deleted is
 * logged all the same: the database it belonged to is gone.
 */
export async function deleteDatabaseBackups(ctx: BackupsContext, databaseId: string): Promise<void> {
  const warn = (what: string, err: unknown): void => ctx.log('warn', `a deleted database's ${what} could not be deleted from its destination`, { databaseId, err: err instanceof Error ? err.message : String(err) });
  for (let page = await ctx.store.listBackups(databaseId, undefined, 100); page.length > 0; page = await ctx.store.listBackups(databaseId, undefined, 100)) {
    for (const backup of page) {
      await ctx.store.removeBackup(backup.id);
      await removeBackupObject(ctx, backup).catch((err: unknown) => warn(`backup ${backup.id}`, err));
    }
  }
  const stores = new Map<string, ObjectStore | null>();
  const objectsIn = async (destinationId: string): Promise<ObjectStore | null> => {
    if (!stores.has(destinationId)) {
      const row = await ctx.store.getDestination(destinationId);
      stores.set(destinationId, row === undefined ? null : await openDestination(ctx, row).catch(() => null));
    }
    return stores.get(destinationId) ?? null;
  };
  const removeObject = async (destinationId: string, location: string, what: string): Promise<void> => {
    const objects = await objectsIn(destinationId);
    await objects?.delete(location, AbortSignal.timeout(30_000)).catch((err: unknown) => warn(what, err));
  };
  for (const base of await ctx.pitr.bases(databaseId)) {
    await removeObject(base.destination_id, base.location, `base backup ${base.id}`);
    await ctx.pitr.removeBase(base.id);
  }
  for (const wal of await ctx.pitr.walFiles(databaseId)) {
    await removeObject(wal.destination_id, wal.location, `log file ${wal.name}`);
    await ctx.pitr.removeWal(databaseId, wal.name);
  }
}
