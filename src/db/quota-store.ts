// The quota store on the database: overrides in `user_quotas`, usage counted from the tables it limits.
import type { QuotaName, QuotaStore } from '../domain/quotas.js';
import { nowIso, type Db } from './database.js';
import { appendRecord } from './audit-log.js';

/** QuotaStore over `user_quotas`, `deployments`, `builds`, `api_keys` and `managed_databases`. */
export function databaseQuotaStore(db: Db): QuotaStore {
  return {
    async userExists(userId) {
      return (await db.selectFrom('users').select('id').where('id', '=', userId).executeTakeFirst()) !== undefined;
    },

    async overrides(userId) {
      const row = await db.selectFrom('user_quotas').selectAll().where('user_id', '=', userId).executeTakeFirst();
      const overrides: Partial<Record<QuotaName, number>> = {};
      if (row === undefined) return overrides;
      if (row.deployments !== null) overrides.deployments = row.deployments;
      if (row.concurrent_builds !== null) overrides.concurrent_builds = row.concurrent_builds;
      if (row.upload_bytes !== null) overrides.upload_bytes = Number(row.upload_bytes);
      if (row.api_keys !== null) overrides.api_keys = row.api_keys;
      if (row.databases !== null) overrides.databases = row.databases;
      return overrides;
    },

    async setOverrides(userId, change, audit) {
      const values = { ...change, updated_at: nowIso() };
      await db.transaction().execute(async (trx) => {
        await trx
          .insertInto('user_quotas')
          .values({ user_id: userId, ...values })
          .onConflict((oc) => oc.column('user_id').doUpdateSet(values))
          .execute();
        await appendRecord(trx, audit);
      });
    },

    async usage(userId, exceptDeploymentId) {
      const except = exceptDeploymentId ?? '';
      const [deployments, uploads, builds, keys, databases] = await Promise.all([
        // Previews (decisions §17) are not deployments the user created: at most 10 per deployment, counted apart.
        db.selectFrom('deployments').select((eb) => eb.fn.countAll<number>().as('n')).where('user_id', '=', userId).where('parent_id', 'is', null).executeTakeFirstOrThrow(),
        db
          .selectFrom('deployments')
          .select((eb) => eb.fn.sum<number | null>('upload_size').as('n'))
          .where('user_id', '=', userId)
          .where('id', '!=', except)
          .executeTakeFirstOrThrow(),
        db
          .selectFrom('builds')
          .innerJoin('deployments', 'deployments.id', 'builds.deployment_id')
          .select((eb) => eb.fn.countAll<number>().as('n'))
          .where('deployments.user_id', '=', userId)
          .where('builds.status', '=', 'building')
          .where('deployments.id', '!=', except)
          .executeTakeFirstOrThrow(),
        db.selectFrom('api_keys').select((eb) => eb.fn.countAll<number>().as('n')).where('user_id', '=', userId).executeTakeFirstOrThrow(),
        // A team's database counts against the member who created it, as a team's deployment does.
        db.selectFrom('managed_databases').select((eb) => eb.fn.countAll<number>().as('n')).where('user_id', '=', userId).executeTakeFirstOrThrow(),
      ]);
      return {
        deployments: Number(deployments.n),
        upload_bytes: Number(uploads.n ?? 0),
        concurrent_builds: Number(builds.n),
        api_keys: Number(keys.n),
        databases: Number(databases.n),
      };
    },
  };
}
