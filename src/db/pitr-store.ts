// The point-in-time recovery store on the database: `pitr_base_backups`, `pitr_wal_files` and `pitr_state`.
import type { BaseBackupRow, PitrStore, WalFileRow } from '../backups/pitr-store.js';
import type { Db } from './database.js';

const now = (): string => new Date().toISOString();

export function databasePitrStore(db: Db): PitrStore {
  const toBase = (r: { size_bytes: number | string | null } & Omit<BaseBackupRow, 'size_bytes'>): BaseBackupRow => ({ ...r, status: r.status, size_bytes: r.size_bytes === null ? null : Number(r.size_bytes) });
  return {
    async addBase(row) {
      await db.insertInto('pitr_base_backups').values(row).execute();
    },
    async updateBase(id, changes) {
      if (Object.keys(changes).length === 0) return;
      await db.updateTable('pitr_base_backups').set(changes).where('id', '=', id).execute();
    },
    async getBase(id) {
      const row = await db.selectFrom('pitr_base_backups').selectAll().where('id', '=', id).executeTakeFirst();
      return row === undefined ? undefined : toBase(row as BaseBackupRow);
    },
    async bases(databaseId) {
      const rows = await db.selectFrom('pitr_base_backups').selectAll().where('database_id', '=', databaseId).orderBy('started_at').orderBy('id').execute();
      return rows.map((r) => toBase(r as BaseBackupRow));
    },
    async removeBase(id) {
      await db.deleteFrom('pitr_base_backups').where('id', '=', id).execute();
    },
    async addWal(row) {
      await db.insertInto('pitr_wal_files').values(row).onConflict((oc) => oc.columns(['database_id', 'name']).doNothing()).execute();
    },
    async walFiles(databaseId) {
      const rows = await db.selectFrom('pitr_wal_files').selectAll().where('database_id', '=', databaseId).orderBy('name').execute();
      return rows.map((r): WalFileRow => ({ ...r, size_bytes: Number(r.size_bytes) }));
    },
    async removeWal(databaseId, name) {
      await db.deleteFrom('pitr_wal_files').where('database_id', '=', databaseId).where('name', '=', name).execute();
    },
    async setArchivedUntil(databaseId, at, error) {
      const values = { database_id: databaseId, archived_until: at, error, updated_at: now() };
      // An error keeps the time reached so far; a time clears the error.
      await db
        .insertInto('pitr_state')
        .values(values)
        .onConflict((oc) => oc.column('database_id').doUpdateSet(at === null ? { error, updated_at: values.updated_at } : { archived_until: at, error, updated_at: values.updated_at }))
        .execute();
    },
    async state(databaseId) {
      return db.selectFrom('pitr_state').select(['archived_until', 'error', 'updated_at']).where('database_id', '=', databaseId).executeTakeFirst();
    },
  };
}
