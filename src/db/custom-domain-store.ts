// The custom domain store on the database: the only place that queries `custom_domains`.
import type { CustomDomainRow, CustomDomainStore } from '../domain/custom-domains.js';
import { isUniqueViolation, type Db } from './database.js';
import { lockDeployment } from './deployment-store.js';
import { appendRecord } from './audit-log.js';

const COLUMNS = ['id', 'deployment_id', 'hostname', 'created_at'] as const;

/** CustomDomainStore over the `custom_domains` table. */
export function databaseCustomDomainStore(db: Db): CustomDomainStore {
  return {
    async add(row, max, audit) {
      try {
        return await db.transaction().execute(async (trx) => {
          // Writing the deployment row (to itself) first takes its lock (a row lock in PostgreSQL, the write
          // lock in SQLite), so two concurrent adds cannot both see room; it also fails if the deployment is gone.
          if (!(await lockDeployment(trx, row.deployment_id))) return 'gone' as const;
          const held = await trx.selectFrom('custom_domains').select(['deployment_id']).where('hostname', '=', row.hostname).executeTakeFirst();
          if (held !== undefined) return 'taken' as const;
          const count = await trx
            .selectFrom('custom_domains')
            .select((eb) => eb.fn.countAll<number>().as('n'))
            .where('deployment_id', '=', row.deployment_id)
            .executeTakeFirstOrThrow();
          if (Number(count.n) >= max) return 'full' as const;
          await trx.insertInto('custom_domains').values(row).execute();
          await appendRecord(trx, audit);
          return 'added' as const;
        });
      } catch (err) {
        if (isUniqueViolation(err)) return 'taken';
        throw err;
      }
    },

    list: (deploymentId) =>
      db.selectFrom('custom_domains').select(COLUMNS).where('deployment_id', '=', deploymentId).orderBy('created_at').orderBy('hostname').execute(),

    async remove(deploymentId, id, audit): Promise<CustomDomainRow | undefined> {
      const row = await db.selectFrom('custom_domains').select(COLUMNS).where('id', '=', id).where('deployment_id', '=', deploymentId).executeTakeFirst();
      if (row === undefined) return undefined;
      await db.transaction().execute(async (trx) => {
        await trx.deleteFrom('custom_domains').where('id', '=', row.id).execute();
        await appendRecord(trx, audit?.(row));
      });
      return row;
    },
  };
}

/** Every custom domain with its deployment's subdomain (start-up: the routing table is rebuilt from these). */
export async function customDomainRoutes(db: Db): Promise<Array<{ hostname: string; deploymentId: string; subdomain: string }>> {
  const rows = await db
    .selectFrom('custom_domains')
    .innerJoin('deployments', 'deployments.id', 'custom_domains.deployment_id')
    .select(['custom_domains.hostname', 'deployments.id', 'deployments.subdomain'])
    .execute();
  return rows.map((r) => ({ hostname: r.hostname, deploymentId: r.id, subdomain: r.subdomain }));
}
