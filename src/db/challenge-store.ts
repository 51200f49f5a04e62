// ACME HTTP-01 challenge answers in the database, so whichever instance the CA reaches answers (decisions §15).
import type { ChallengeStore } from '../tls/http-challenges.js';
import { nowIso, type Db } from './database.js';

/** Answers older than this were left by an instance that died mid-order (an order is bounded to 5 minutes). */
const STALE_MS = 24 * 3_600_000;

/** The challenge store over the `acme_challenges` table (key authorizations are public: the CA reads them over plain HTTP). */
export function databaseChallengeStore(db: Db): ChallengeStore {
  return {
    async set(token, keyAuthorization) {
      await db.deleteFrom('acme_challenges').where('created_at', '<', new Date(Date.now() - STALE_MS).toISOString()).execute();
      await db
        .insertInto('acme_challenges')
        .values({ token, key_authorization: keyAuthorization, created_at: nowIso() })
        .onConflict((oc) => oc.column('token').doUpdateSet({ key_authorization: keyAuthorization }))
        .execute();
    },
    async delete(token) {
      await db.deleteFrom('acme_challenges').where('token', '=', token).execute();
    },
    async get(token) {
      const row = await db.selectFrom('acme_challenges').select('key_authorization').where('token', '=', token).executeTakeFirst();
      return row?.key_authorization;
    },
  };
}
