// The backup store on the database: destinations in `backup_destinations` (secret AES-256-GCM encrypted, bound to its row), records in `backups`, schedules in `backup_schedules`.
import type { Selectable, Transaction } from 'kysely';
import type { BackupRow, BackupSchedule, BackupStore, DestinationRow, RestoreRow, S3Settings } from '../backups/backup-store.js';
import type { ValueCipher } from '../secrets/value-cipher.js';
import { appendRecord } from './audit-log.js';
import { isUniqueViolation, type Db } from './database.js';
import type { BackupDestinationsTable, BackupsTable, Database } from './schema.js';

/** Associated data of a destination's secret: the ciphertext only opens in its own row. */
const secretContext = (destinationId: string): string => `backup-destination:${destinationId}`;
const ownerKey = (row: { user_id: string; team_id: string | null }): string => (row.team_id === null ? `user:${row.user_id}` : `team:${row.team_id}`);
const now = (): string => new Date().toISOString();

function toDestination(r: Selectable<BackupDestinationsTable>): DestinationRow {
  return {
    id: r.id,
    seq: Number(r.seq),
    name: r.name,
    type: r.type as DestinationRow['type'],
    user_id: r.user_id,
    team_id: r.team_id,
    settings: r.type === 's3' ? (JSON.parse(r.settings) as S3Settings) : null,
    created_at: r.created_at,
    updated_at: r.updated_at,
  };
}

function toBackup(r: Selectable<BackupsTable>): BackupRow {
  return {
    ...r,
    seq: Number(r.seq),
    engine: r.engine as BackupRow['engine'],
    status: r.status as BackupRow['status'],
    trigger: r.trigger as BackupRow['trigger'],
    size_bytes: r.size_bytes === null ? null : Number(r.size_bytes),
    source_counts: r.source_counts === null ? null : (JSON.parse(r.source_counts) as BackupRow['source_counts']),
  };
}

const toSchedule = (r: { database_id: string; schedule: string; destination_id: string; keep: number; pitr: number; updated_at: string }): BackupSchedule => ({
  database_id: r.database_id,
  schedule: r.schedule,
  destination_id: r.destination_id,
  keep: Number(r.keep),
  pitr: Number(r.pitr) === 1,
  updated_at: r.updated_at,
});

/** BackupStore over its three tables, destination secrets sealed with `cipher`. */
export function databaseBackupStore(db: Db, cipher: ValueCipher): BackupStore {
  return {
    async createDestination(row, secret, audit) {
      try {
        await db.transaction().execute(async (trx) => {
          await trx
            .insertInto('backup_destinations')
            .values({
              id: row.id,
              name: row.name,
              type: row.type,
              user_id: row.user_id,
              team_id: row.team_id,
              owner_key: ownerKey(row),
              settings: JSON.stringify(row.settings ?? {}),
              secret: secret === null ? null : cipher.encrypt(secret, secretContext(row.id)),
              created_at: row.created_at,
              updated_at: row.updated_at,
            })
            .execute();
          await appendRecord(trx, audit);
        });
        return 'created';
      } catch (err) {
        if (isUniqueViolation(err)) return 'name_taken';
        throw err;
      }
    },

    async getDestination(id) {
      const row = await db.selectFrom('backup_destinations').selectAll().where('id', '=', id).executeTakeFirst();
      return row === undefined ? undefined : toDestination(row);
    },

    async destinationSecret(id) {
      const row = await db.selectFrom('backup_destinations').select('secret').where('id', '=', id).executeTakeFirst();
      return row?.secret == null ? null : cipher.decrypt(row.secret, secretContext(id));
    },

    async listDestinations(userId, teamIds, before, limit) {
      let query = db.selectFrom('backup_destinations').selectAll().where((eb) =>
        teamIds.length === 0
          ? eb.and([eb('user_id', '=', userId), eb('team_id', 'is', null)])
          : eb.or([eb.and([eb('user_id', '=', userId), eb('team_id', 'is', null)]), eb('team_id', 'in', [...teamIds])]),
      );
      if (before !== undefined) query = query.where('seq', '<', before);
      return (await query.orderBy('seq', 'desc').limit(limit).execute()).map(toDestination);
    },

    async updateDestination(id, changes, secret, audit) {
      try {
        return await db.transaction().execute(async (trx) => {
          const current = await trx.selectFrom('backup_destinations').select('id').where('id', '=', id).executeTakeFirst();
          if (current === undefined) return 'gone' as const;
          await trx
            .updateTable('backup_destinations')
            .set({
              ...(changes.name === undefined ? {} : { name: changes.name }),
              ...(changes.settings === undefined ? {} : { settings: JSON.stringify(changes.settings) }),
              ...(secret === undefined ? {} : { secret: cipher.encrypt(secret, secretContext(id)) }),
              updated_at: now(),
            })
            .where('id', '=', id)
            .execute();
          await appendRecord(trx, audit);
          return 'updated' as const;
        });
      } catch (err) {
        if (isUniqueViolation(err)) return 'name_taken';
        throw err;
      }
    },

    async removeDestination(id, audit) {
      await db.transaction().execute(async (trx) => {
        await trx.deleteFrom('backup_destinations').where('id', '=', id).execute();
        await appendRecord(trx, audit);
      });
    },

    async schedulesUsing(destinationId) {
      return db
        .selectFrom('backup_schedules')
        .innerJoin('managed_databases', 'managed_databases.id', 'backup_schedules.database_id')
        .select(['backup_schedules.database_id', 'managed_databases.name as database_name'])
        .where('backup_schedules.destination_id', '=', destinationId)
        .orderBy('managed_databases.name')
        .execute();
    },

    async backupsIn(destinationId) {
      const row = await db.selectFrom('backups').select((eb) => eb.fn.countAll<number>().as('n')).where('destination_id', '=', destinationId).executeTakeFirst();
      return Number(row?.n ?? 0);
    },

    async createBackup(row, audit) {
      try {
        await db.transaction().execute(async (trx) => {
          await trx
            .insertInto('backups')
            .values({ ...row, source_counts: row.source_counts === null ? null : JSON.stringify(row.source_counts) })
            .execute();
          await appendRecord(trx, audit);
        });
        return 'created';
      } catch (err) {
        if (isUniqueViolation(err)) return 'due_taken';
        throw err;
      }
    },

    async getBackup(id) {
      const row = await db.selectFrom('backups').selectAll().where('id', '=', id).executeTakeFirst();
      return row === undefined ? undefined : toBackup(row);
    },

    async listBackups(databaseId, before, limit) {
      let query = db.selectFrom('backups').selectAll().where('database_id', '=', databaseId);
      if (before !== undefined) query = query.where('seq', '<', before);
      return (await query.orderBy('seq', 'desc').limit(limit).execute()).map(toBackup);
    },

    async updateBackup(id, changes) {
      const { source_counts: counts, ...rest } = changes;
      await db
        .updateTable('backups')
        .set({ ...rest, ...(counts === undefined ? {} : { source_counts: counts === null ? null : JSON.stringify(counts) }) })
        .where('id', '=', id)
        .execute();
    },

    async removeBackup(id, audit) {
      await db.transaction().execute(async (trx) => {
        await trx.deleteFrom('backups').where('id', '=', id).execute();
        await appendRecord(trx, audit);
      });
    },

    async runningOn(runners) {
      if (runners.length === 0) return [];
      return (await db.selectFrom('backups').selectAll().where('status', '=', 'running').where('runner', 'in', [...runners]).execute()).map(toBackup);
    },

    async allRunning() {
      // `succeeded` with a runner: being verified.
      return (await db.selectFrom('backups').selectAll().where((eb) => eb.or([eb('status', '=', 'running'), eb.and([eb('status', '=', 'succeeded'), eb('runner', 'is not', null)])])).execute()).map(toBackup);
    },

    async createRestore(row, audit) {
      await db.transaction().execute(async (trx) => {
        await trx.insertInto('backup_restores').values({ ...row }).execute();
        await appendRecord(trx, audit);
      });
    },

    async updateRestore(id, changes) {
      await db.updateTable('backup_restores').set(changes).where('id', '=', id).execute();
    },

    async getRestore(id) {
      const row = await db.selectFrom('backup_restores').selectAll().where('id', '=', id).executeTakeFirst();
      return row === undefined ? undefined : { ...row, status: row.status as RestoreRow['status'] };
    },

    async lastDue(databaseId) {
      const row = await db.selectFrom('backups').select((eb) => eb.fn.max('due_at').as('due')).where('database_id', '=', databaseId).executeTakeFirst();
      return row?.due ?? undefined;
    },

    async releaseDue(id) {
      await db.updateTable('backups').set({ due_at: null }).where('id', '=', id).execute();
    },

    async verifiedBackups(databaseId) {
      return (await db.selectFrom('backups').selectAll().where('database_id', '=', databaseId).where('status', '=', 'verified').orderBy('seq', 'desc').execute()).map(toBackup);
    },

    async getSchedule(databaseId) {
      const row = await db.selectFrom('backup_schedules').selectAll().where('database_id', '=', databaseId).executeTakeFirst();
      return row === undefined ? undefined : toSchedule(row);
    },

    async setSchedule(schedule, audit) {
      await db.transaction().execute(async (trx) => {
        if ('remove' in schedule) {
          await trx.deleteFrom('backup_schedules').where('database_id', '=', schedule.database_id).execute();
        } else {
          const values = { database_id: schedule.database_id, schedule: schedule.schedule, destination_id: schedule.destination_id, keep: schedule.keep, pitr: schedule.pitr ? 1 : 0, updated_at: now() };
          await trx
            .insertInto('backup_schedules')
            .values(values)
            .onConflict((oc) => oc.column('database_id').doUpdateSet({ schedule: values.schedule, destination_id: values.destination_id, keep: values.keep, pitr: values.pitr, updated_at: values.updated_at }))
            .execute();
        }
        await appendRecord(trx, audit);
      });
    },

    async allSchedules() {
      return (await db.selectFrom('backup_schedules').selectAll().execute()).map(toSchedule);
    },

    async schedulesOf(databaseIds) {
      if (databaseIds.length === 0) return [];
      return (await db.selectFrom('backup_schedules').selectAll().where('database_id', 'in', [...databaseIds]).execute()).map(toSchedule);
    },
  };
}

/** Re-encrypts every destination's secret from `from` to `to` (a key rotation); returns how many. */
export async function reencryptDestinationSecrets(trx: Transaction<Database>, from: ValueCipher, to: ValueCipher): Promise<number> {
  let count = 0;
  for (const r of await trx.selectFrom('backup_destinations').select(['id', 'secret']).execute()) {
    if (r.secret === null) continue;
    const context = secretContext(r.id);
    await trx.updateTable('backup_destinations').set({ secret: to.encrypt(from.decrypt(r.secret, context), context) }).where('id', '=', r.id).execute();
    count += 1;
  }
  return count;
}
