// The deployment catalog over the database (SQLite or PostgreSQL): the API's reads of deployments and builds, and deployments' create and edit.
import { readBuildDockerfile } from './build-dockerfiles.js';
import { appendRecord } from './audit-log.js';
import { SHOWN_BUILD_COLUMNS, SHOWN_DEPLOYMENT_COLUMNS, type DeploymentCatalog } from '../domain/deployment-catalog.js';
import { isUniqueViolation, nowIso, type Db } from './database.js';
import { bumpListVersion, lockDeployment } from './deployment-store.js';
import { mergePendingKeys } from '../domain/config-pending.js';
import { preparedQuery } from './prepared-query.js';

/**
 * The catalog on `db`. Lists read only the shown columns, keyset on `seq` (indexed with the owner,
 * and with the deployment for builds); the SQL of each method is fixed, so the statement cache
 * prepares it once.
 */
export function databaseDeploymentCatalog(db: Db): DeploymentCatalog {
  // The list's statements and the version read, compiled once (placeholder values mark the parameters).
  const page = db.selectFrom('deployments').select([...SHOWN_DEPLOYMENT_COLUMNS, 'seq']).where('user_id', '=', '').where('parent_id', 'is', null).where('team_id', 'is', null);
  const firstPage = preparedQuery(db, page.orderBy('seq', 'desc').limit(1));
  const pageBefore = preparedQuery(db, page.where('seq', '<', 0).orderBy('seq', 'desc').limit(1));
  const version = preparedQuery(db, db.selectFrom('users').select('deployments_version').where('id', '=', ''));
  return {
    deployment: (id) => db.selectFrom('deployments').selectAll().where('id', '=', id).executeTakeFirst(),

    owner: (id) => db.selectFrom('deployments').select(['id', 'user_id', 'team_id']).where('id', '=', id).executeTakeFirst(),

    deployments: (userId, teamIds, before, limit) => {
      if (teamIds.length === 0) return before === undefined ? firstPage(userId, limit) : pageBefore(userId, before, limit);
      // The user's own deployments and their teams' (a team's deployment is listed by team, whoever created it).
      let query = db
        .selectFrom('deployments')
        .select([...SHOWN_DEPLOYMENT_COLUMNS, 'seq'])
        .where((eb) => eb.or([eb.and([eb('user_id', '=', userId), eb('team_id', 'is', null)]), eb('team_id', 'in', [...teamIds])]))
        // Previews are listed under their deployment (decisions §17), never here.
        .where('parent_id', 'is', null);
      if (before !== undefined) query = query.where('seq', '<', before);
      return query.orderBy('seq', 'desc').limit(limit).execute();
    },

    async listVersion(userId) {
      const rows = await version(userId);
      return rows[0]?.deployments_version ?? 0;
    },

    async create(deployment, audit) {
      try {
        await db.transaction().execute(async (trx) => {
          await trx
            .insertInto('subdomain_claims')
            .values({ subdomain: deployment.subdomain, kind: 'deployment', owner_id: deployment.id, user_id: deployment.user_id, created_at: deployment.created_at })
            .execute();
          await bumpListVersion(trx, deployment.team_id === null ? { userId: deployment.user_id } : { teamId: deployment.team_id });
          await trx.insertInto('deployments').values(deployment).execute();
          await appendRecord(trx, audit);
        });
      } catch (err) {
        if (isUniqueViolation(err)) return 'subdomain_taken';
        throw err;
      }
      return 'created';
    },

    async update(id, changes, audit) {
      await db.transaction().execute(async (trx) => {
        await bumpListVersion(trx, { deploymentIds: [id] });
        await trx.updateTable('deployments').set({ ...changes, updated_at: nowIso() }).where('id', '=', id).execute();
        await appendRecord(trx, audit);
      });
    },

    async markConfigPending(id, keys) {
      if (keys.length === 0) return;
      await db.transaction().execute(async (trx) => {
        await bumpListVersion(trx, { deploymentIds: [id] });
        // The row's lock first, so two changes at once both keep their keys.
        if (!(await lockDeployment(trx, id))) return;
        const row = await trx.selectFrom('deployments').select(['live_build_id', 'config_pending']).where('id', '=', id).executeTakeFirst();
        if (row === undefined || row.live_build_id === null) return;
        await trx.updateTable('deployments').set({ config_pending: mergePendingKeys(row.config_pending, keys) }).where('id', '=', id).execute();
      });
    },

    async setUpload(id, upload, audit) {
      return db.transaction().execute(async (trx) => {
        await bumpListVersion(trx, { deploymentIds: [id] });
        const updated = await trx
          .updateTable('deployments')
          .set({ upload_id: upload.id, upload_size: upload.size, upload_sha256: upload.sha256, updated_at: nowIso() })
          .where('id', '=', id)
          .executeTakeFirst();
        if (updated.numUpdatedRows === 0n) return false;
        await appendRecord(trx, audit);
        return true;
      });
    },

    async uploadsInUse(id) {
      const row = await db.selectFrom('deployments').select('upload_id').where('id', '=', id).executeTakeFirst();
      const building = await db.selectFrom('builds').select('source_ref').where('deployment_id', '=', id).where('status', '=', 'building').execute();
      return new Set([row?.upload_id ?? null, ...building.map((b) => b.source_ref)]);
    },

    async builds(deploymentId, before, limit) {
      let query = db.selectFrom('builds').select(SHOWN_BUILD_COLUMNS).where('deployment_id', '=', deploymentId);
      if (before !== undefined) query = query.where('seq', '<', before);
      return query.orderBy('seq', 'desc').limit(limit).execute();
    },

    build: (deploymentId, buildId) =>
      db.selectFrom('builds').selectAll().where('id', '=', buildId).where('deployment_id', '=', deploymentId).executeTakeFirst(),

    async buildStatus(buildId) {
      const row = await db.selectFrom('builds').select('status').where('id', '=', buildId).executeTakeFirst();
      return row?.status;
    },

    buildDockerfile: (buildId) => readBuildDockerfile(db, buildId),
  };
}
