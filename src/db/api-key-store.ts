// The API key store on the database: keys' records and their last use (authentication reads them in the account store).
import { appendRecord } from './audit-log.js';
import type { ApiKeyStore } from '../domain/api-keys.js';
import type { Db } from './database.js';

/** ApiKeyStore over the `api_keys` table. */
export function databaseApiKeyStore(db: Db): ApiKeyStore {
  return {
    async create(row, audit) {
      await db.transaction().execute(async (trx) => {
        await trx.insertInto('api_keys').values(row).execute();
        await appendRecord(trx, audit);
      });
    },

    async page(userId, after, limit) {
      let query = db.selectFrom('api_keys').select(['id', 'name', 'key_prefix', 'created_at', 'last_used_at']).where('user_id', '=', userId);
      if (after !== undefined) {
        const [createdAt, id] = after;
        query = query.where((eb) => eb.or([eb('created_at', '<', createdAt), eb.and([eb('created_at', '=', createdAt), eb('id', '>', id)])]));
      }
      return query.orderBy('created_at', 'desc').orderBy('id').limit(limit).execute();
    },

    owner: (id) => db.selectFrom('api_keys').select('user_id').where('id', '=', id).executeTakeFirst(),

    async remove(id, audit) {
      await db.transaction().execute(async (trx) => {
        await trx.deleteFrom('api_keys').where('id', '=', id).execute();
        await appendRecord(trx, audit);
      });
    },

    async recordUses(uses) {
      await db.transaction().execute(async (trx) => {
        for (const [id, at] of uses) await trx.updateTable('api_keys').set({ last_used_at: at }).where('id', '=', id).execute();
      });
    },
  };
}
