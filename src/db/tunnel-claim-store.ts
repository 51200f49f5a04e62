// The tunnel claim store on the database: the only place that queries `tunnels` (claims share `subdomain_claims` with deployments).
import type { TunnelClaimStore } from '../domain/tunnel-claims.js';
import { isUniqueViolation, nowIso, type Db } from './database.js';

/** TunnelClaimStore over the `tunnels` and `subdomain_claims` tables. */
export function databaseTunnelClaimStore(db: Db): TunnelClaimStore {
  return {
    async claim({ subdomain, tunnelId, owner, runner }) {
      try {
        return await db.transaction().execute(async (trx) => {
          // One table of claims holds deployments and tunnels; its primary key settles races.
          const held = await trx.selectFrom('subdomain_claims').select(['kind', 'owner_id', 'user_id']).where('subdomain', '=', subdomain).executeTakeFirst();
          if (held !== undefined && (held.kind !== 'tunnel' || held.user_id !== owner.userId)) return 'taken' as const;
          if (held !== undefined) {
            await trx.deleteFrom('subdomain_claims').where('subdomain', '=', subdomain).execute();
            await trx.deleteFrom('tunnels').where('id', '=', held.owner_id).execute();
          }
          const now = nowIso();
          await trx.insertInto('subdomain_claims').values({ subdomain, kind: 'tunnel', owner_id: tunnelId, user_id: owner.userId, created_at: now }).execute();
          await trx
            .insertInto('tunnels')
            .values({ id: tunnelId, user_id: owner.userId, api_key_id: owner.apiKeyId, subdomain, connected_at: now, runner })
            .execute();
          return 'ok' as const;
        });
      } catch (err) {
        if (isUniqueViolation(err)) return 'taken';
        throw err;
      }
    },

    async release(subdomain, tunnelId) {
      await db.transaction().execute(async (trx) => {
        await trx.deleteFrom('subdomain_claims').where('subdomain', '=', subdomain).where('kind', '=', 'tunnel').where('owner_id', '=', tunnelId).execute();
        await trx.deleteFrom('tunnels').where('subdomain', '=', subdomain).where('id', '=', tunnelId).execute();
      });
    },

    async releaseRunner(runner) {
      await db.transaction().execute(async (trx) => {
        const mine = trx
          .selectFrom('tunnels')
          .select('id')
          .where((eb) => eb.or([eb('runner', '=', runner), eb('runner', 'is', null)]));
        await trx.deleteFrom('subdomain_claims').where('kind', '=', 'tunnel').where('owner_id', 'in', mine).execute();
        await trx.deleteFrom('tunnels').where((eb) => eb.or([eb('runner', '=', runner), eb('runner', 'is', null)])).execute();
      });
    },

    async holders(subdomain) {
      let query = db.selectFrom('tunnels').select(['subdomain', 'id', 'runner', 'user_id', 'api_key_id', 'connected_at']);
      if (subdomain !== undefined) query = query.where('subdomain', '=', subdomain);
      const rows = await query.orderBy('connected_at').execute();
      return rows.map((row) => ({ subdomain: row.subdomain, tunnelId: row.id, runner: row.runner, userId: row.user_id, apiKeyId: row.api_key_id, connectedAt: row.connected_at }));
    },

    async revokedOwners(runner) {
      const [keys, users] = await Promise.all([
        db
          .selectFrom('tunnels')
          .leftJoin('api_keys', 'api_keys.id', 'tunnels.api_key_id')
          .select('tunnels.api_key_id as id')
          .distinct()
          .where('tunnels.runner', '=', runner)
          .where('api_keys.id', 'is', null)
          .execute(),
        db
          .selectFrom('tunnels')
          .innerJoin('users', 'users.id', 'tunnels.user_id')
          .select('tunnels.user_id as id')
          .distinct()
          .where('tunnels.runner', '=', runner)
          .where('users.disabled', '=', 1)
          .execute(),
      ]);
      return { apiKeyIds: keys.map((k) => k.id), userIds: users.map((u) => u.id) };
    },

    async releaseHeldOutside(live) {
      return db.transaction().execute(async (trx) => {
        let query = trx.selectFrom('tunnels').select(['id', 'subdomain']).where('runner', 'is not', null);
        if (live.length > 0) query = query.where('runner', 'not in', [...live]);
        const lost = await query.execute();
        if (lost.length === 0) return [];
        const ids = lost.map((row) => row.id);
        await trx.deleteFrom('subdomain_claims').where('kind', '=', 'tunnel').where('owner_id', 'in', ids).execute();
        await trx.deleteFrom('tunnels').where('id', 'in', ids).execute();
        return lost.map((row) => row.subdomain);
      });
    },
  };
}
