// The account store on the database: users, sessions, and the credential reads of the API's hot path (compiled once).
import type { AccountStore, KeyCredential, SessionCredential } from '../domain/account-store.js';
import type { TeamRole } from '../core/principal.js';
import { isUniqueViolation, nowIso, type Db } from './database.js';
import { preparedQuery } from './prepared-query.js';
import { appendRecord } from './audit-log.js';
import type { Database } from './schema.js';

/**
 * AccountStore over `users`, `sessions`, `api_keys` (read) and `team_members` (read). The three
 * reads of authentication are compiled once per store: every authenticated request makes one of
 * them, and building a Kysely query per request cost more than the read. Each is one indexed
 * lookup by the credential's digest (unique index), joined to its user.
 */
export function databaseAccountStore(db: Db): AccountStore {
  const apiKey = preparedQuery<Database, KeyCredential>(
    db,
    db
      .selectFrom('api_keys')
      .innerJoin('users', 'users.id', 'api_keys.user_id')
      .select(['api_keys.id', 'api_keys.user_id', 'api_keys.key_hash', 'api_keys.key_prefix', 'users.is_admin', 'users.disabled'])
      .where('api_keys.key_hash', '=', ''),
  );
  const session = preparedQuery<Database, SessionCredential>(
    db,
    db
      .selectFrom('sessions')
      .innerJoin('users', 'users.id', 'sessions.user_id')
      .select(['sessions.id', 'sessions.user_id', 'sessions.token_hash', 'sessions.expires_at', 'users.is_admin', 'users.disabled'])
      .where('sessions.token_hash', '=', ''),
  );
  const teams = preparedQuery<Database, { team_id: string; role: TeamRole }>(db, db.selectFrom('team_members').select(['team_id', 'role']).where('user_id', '=', ''));
  const USER_COLUMNS = ['id', 'email', 'password_hash', 'is_admin', 'created_at', 'updated_at', 'totp_secret', 'totp_enabled', 'totp_last_step', 'disabled'] as const;

  return {
    hasUsers: async () => (await db.selectFrom('users').select('id').limit(1).executeTakeFirst()) !== undefined,

    async createUser(row, audit) {
      try {
        await db.transaction().execute(async (trx) => {
          await trx.insertInto('users').values(row).execute();
          await appendRecord(trx, audit);
        });
        return 'created';
      } catch (err) {
        if (isUniqueViolation(err)) return 'email_taken';
        throw err;
      }
    },

    userById: (id) => db.selectFrom('users').select(USER_COLUMNS).where('id', '=', id).executeTakeFirst(),
    userByEmail: (email) => db.selectFrom('users').select(USER_COLUMNS).where('email', '=', email).executeTakeFirst(),

    async createSession(row, audit) {
      await db.transaction().execute(async (trx) => {
        await trx.insertInto('sessions').values(row).execute();
        await appendRecord(trx, audit);
      });
    },

    async endSession(id) {
      await db.deleteFrom('sessions').where('id', '=', id).execute();
    },

    async setPassword(userId, passwordHash, { keepSession, clearTwoFactor = false }, audit) {
      await db.transaction().execute(async (trx) => {
        const twoFactorOff = clearTwoFactor ? { totp_secret: null, totp_enabled: 0, totp_last_step: null } : {};
        await trx.updateTable('users').set({ password_hash: passwordHash, ...twoFactorOff, updated_at: nowIso() }).where('id', '=', userId).execute();
        let revoke = trx.deleteFrom('sessions').where('user_id', '=', userId);
        if (keepSession !== undefined) revoke = revoke.where('id', '!=', keepSession);
        await revoke.execute();
        await appendRecord(trx, audit);
      });
    },

    async setTwoFactor(userId, change, audit, endSessions) {
      await db.transaction().execute(async (trx) => {
        await trx.updateTable('users').set({ ...change, updated_at: nowIso() }).where('id', '=', userId).execute();
        if (endSessions !== undefined) {
          let revoke = trx.deleteFrom('sessions').where('user_id', '=', userId);
          if (endSessions.keepSession !== undefined) revoke = revoke.where('id', '!=', endSessions.keepSession);
          await revoke.execute();
        }
        await appendRecord(trx, audit);
      });
    },

    async takeTotpStep(userId, step) {
      const taken = await db
        .updateTable('users')
        .set({ totp_last_step: step })
        .where('id', '=', userId)
        .where((eb) => eb.or([eb('totp_last_step', 'is', null), eb('totp_last_step', '<', step)]))
        .executeTakeFirst();
      return taken.numUpdatedRows > 0n;
    },

    async audit(record) {
      await db.transaction().execute((trx) => appendRecord(trx, record));
    },

    async pageUsers(after, limit) {
      let query = db.selectFrom('users').select(USER_COLUMNS).orderBy('email').orderBy('id').limit(limit);
      if (after !== undefined) query = query.where((eb) => eb.or([eb('email', '>', after[0]), eb.and([eb('email', '=', after[0]), eb('id', '>', after[1])])]));
      return query.execute();
    },

    async setDisabled(userId, disabled, audit) {
      return db.transaction().execute(async (trx) => {
        const result = await trx.updateTable('users').set({ disabled: disabled ? 1 : 0, updated_at: nowIso() }).where('id', '=', userId).executeTakeFirst();
        if (Number(result.numUpdatedRows) === 0) return false;
        if (disabled) await trx.deleteFrom('sessions').where('user_id', '=', userId).execute();
        await appendRecord(trx, audit);
        return true;
      });
    },

    keyByDigest: async (digest) => (await apiKey(digest))[0],
    sessionByDigest: async (digest) => (await session(digest))[0],
    teamRoles: async (userId) => new Map((await teams(userId)).map((r) => [r.team_id, r.role])),
  };
}
