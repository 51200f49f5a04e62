// The managed-database store on the database: rows in `managed_databases` (credentials AES-256-GCM encrypted, bound to their row) and links in `database_links`.
import type { DatabaseCredentials } from '../databases/engine-adapter.js';
import type { DatabaseChanges, DatabaseLink, DatabaseRow, DatabaseStore, NewDatabase } from '../databases/database-store.js';
import type { ValueCipher } from '../secrets/value-cipher.js';
import { appendRecord } from './audit-log.js';
import { isUniqueViolation, type Db } from './database.js';
import type { Kysely, Transaction } from 'kysely';
import type { Database } from './schema.js';

/** Associated data of a database's credentials: the ciphertext only opens in its own row. */
const credentialsContext = (databaseId: string): string => `database:${databaseId}`;

/** Names are unique per owner: the team's when it has one, else its creator's. */
const ownerKey = (row: { user_id: string; team_id: string | null }): string => (row.team_id === null ? `user:${row.user_id}` : `team:${row.team_id}`);

const COLUMNS = ['id', 'seq', 'name', 'engine', 'image', 'status', 'error', 'user_id', 'team_id', 'memory_bytes', 'nano_cpus', 'container_id', 'size_bytes', 'worker_instance', 'created_at', 'updated_at'] as const;

const now = (): string => new Date().toISOString();

function toRow(r: DatabaseRow): DatabaseRow {
  return {
    ...r,
    seq: Number(r.seq),
    size_bytes: Number(r.size_bytes),
    memory_bytes: r.memory_bytes === null ? null : Number(r.memory_bytes),
    nano_cpus: r.nano_cpus === null ? null : Number(r.nano_cpus),
  };
}

function parseCredentials(json: string): DatabaseCredentials {
  const parsed = JSON.parse(json) as Record<string, unknown>;
  return { username: String(parsed['username']), password: String(parsed['password']), database: String(parsed['database']) };
}

/** DatabaseStore over `managed_databases` and `database_links`, credentials sealed with `cipher`. */
export function databaseManagedDatabaseStore(db: Db, cipher: ValueCipher): DatabaseStore {
  const select = (executor: Kysely<Database> | Transaction<Database>) => executor.selectFrom('managed_databases').select([...COLUMNS]);
  return {
    async create(row: NewDatabase, credentials, audit) {
      try {
        await db.transaction().execute(async (trx) => {
          await trx
            .insertInto('managed_databases')
            .values({ ...row, owner_key: ownerKey(row), credentials: cipher.encrypt(JSON.stringify(credentials), credentialsContext(row.id)) })
            .execute();
          await appendRecord(trx, audit);
        });
        return 'created';
      } catch (err) {
        if (isUniqueViolation(err)) return 'name_taken';
        throw err;
      }
    },

    async get(id) {
      const row = await select(db).where('id', '=', id).executeTakeFirst();
      return row === undefined ? undefined : toRow(row);
    },

    async list(userId, teamIds, before, limit) {
      let query = select(db).where((eb) =>
        teamIds.length === 0
          ? eb.and([eb('user_id', '=', userId), eb('team_id', 'is', null)])
          : eb.or([eb.and([eb('user_id', '=', userId), eb('team_id', 'is', null)]), eb('team_id', 'in', [...teamIds])]),
      );
      if (before !== undefined) query = query.where('seq', '<', before);
      return (await query.orderBy('seq', 'desc').limit(limit).execute()).map(toRow);
    },

    async all() {
      return (await select(db).orderBy('seq').execute()).map(toRow);
    },

    async update(id, changes: DatabaseChanges, audit) {
      try {
        return await db.transaction().execute(async (trx) => {
          const current = await trx.selectFrom('managed_databases').select(['user_id', 'team_id']).where('id', '=', id).executeTakeFirst();
          if (current === undefined) return 'gone' as const;
          await trx.updateTable('managed_databases').set({ ...changes, updated_at: now() }).where('id', '=', id).execute();
          await appendRecord(trx, audit);
          return 'updated' as const;
        });
      } catch (err) {
        if (isUniqueViolation(err)) return 'name_taken';
        throw err;
      }
    },

    async remove(id, audit) {
      await db.transaction().execute(async (trx) => {
        await trx.deleteFrom('database_links').where('database_id', '=', id).execute();
        await trx.deleteFrom('managed_databases').where('id', '=', id).execute();
        await appendRecord(trx, audit);
      });
    },

    async credentials(id, audit) {
      return db.transaction().execute(async (trx) => {
        const row = await trx.selectFrom('managed_databases').select('credentials').where('id', '=', id).executeTakeFirst();
        if (row === undefined) return undefined;
        await appendRecord(trx, audit);
        return parseCredentials(cipher.decrypt(row.credentials, credentialsContext(id)));
      });
    },

    async link(link: DatabaseLink, audit) {
      const taken = async (trx: Kysely<Database>): Promise<'env_taken' | 'already_linked' | undefined> => {
        const rows = await trx
          .selectFrom('database_links')
          .select(['database_id', 'env'])
          .where('deployment_id', '=', link.deployment_id)
          .where((eb) => eb.or([eb('database_id', '=', link.database_id), eb('env', '=', link.env)]))
          .execute();
        if (rows.some((r) => r.database_id === link.database_id)) return 'already_linked';
        return rows.length > 0 ? 'env_taken' : undefined;
      };
      try {
        return await db.transaction().execute(async (trx) => {
          const refused = await taken(trx);
          if (refused !== undefined) return refused;
          await trx.insertInto('database_links').values({ ...link }).execute();
          await appendRecord(trx, audit);
          return 'linked' as const;
        });
      } catch (err) {
        if (isUniqueViolation(err)) return (await taken(db)) ?? 'already_linked';
        throw err;
      }
    },

    async unlink(databaseId, deploymentId, audit) {
      return db.transaction().execute(async (trx) => {
        const removed = await trx.deleteFrom('database_links').where('database_id', '=', databaseId).where('deployment_id', '=', deploymentId).executeTakeFirst();
        if (removed.numDeletedRows === 0n) return false;
        await appendRecord(trx, audit);
        return true;
      });
    },

    async linksOfDeployment(deploymentId) {
      return db.selectFrom('database_links').selectAll().where('deployment_id', '=', deploymentId).orderBy('created_at').orderBy('env').execute();
    },

    async linksOfDatabase(databaseId) {
      return db
        .selectFrom('database_links')
        .innerJoin('deployments', 'deployments.id', 'database_links.deployment_id')
        .select(['database_links.database_id', 'database_links.deployment_id', 'database_links.env', 'database_links.created_at', 'deployments.name as deployment_name'])
        .where('database_links.database_id', '=', databaseId)
        .orderBy('database_links.created_at')
        .execute();
    },
  };
}

/** Re-encrypts every database's credentials from `from` to `to` inside `trx` (a key rotation); returns how many. */
export async function reencryptDatabaseCredentials(trx: Transaction<Database>, from: ValueCipher, to: ValueCipher): Promise<number> {
  let count = 0;
  for (const r of await trx.selectFrom('managed_databases').select(['id', 'credentials']).execute()) {
    const context = credentialsContext(r.id);
    await trx.updateTable('managed_databases').set({ credentials: to.encrypt(from.decrypt(r.credentials, context), context) }).where('id', '=', r.id).execute();
    count += 1;
  }
  return count;
}
