// The deployment store over the database (SQLite or PostgreSQL): the only writer of deployments' lifecycle and of builds.
import { recordBuildDockerfile } from './build-dockerfiles.js';
import { parseUpstreams, storeUpstreams } from '../core/upstream.js';
import type { DeploymentStore, LiveContainer, NewBuild, RetiredContainer, RouteFact } from '../deploy/deployment-store.js';
import type { DeploymentStatus } from '../deploy/state-table.js';
import type { Kysely, Transaction } from 'kysely';
import { nowIso, type Db } from './database.js';
import type { Database } from './schema.js';
import type { AuditRecord } from '../domain/audit.js';
import { appendRecord } from './audit-log.js';

/**
 * Takes a deployment's row lock for the rest of `trx` with a no-op write (a row lock in PostgreSQL,
 * the write lock in SQLite): changes checked against a per-deployment limit are then checked one
 * after the other. Returns false if the deployment is gone.
 */
export async function lockDeployment(trx: Transaction<Database>, deploymentId: string): Promise<boolean> {
  const touched = await trx.updateTable('deployments').set({ id: deploymentId }).where('id', '=', deploymentId).executeTakeFirst();
  return touched.numUpdatedRows > 0n;
}

/**
 * Bumps the deployment-list version (`users.deployments_version`) of the users who own
 * `deploymentIds`, or of `userId`: every write that changes what a user's deployment list shows
 * calls it in the write's own transaction, before the write (so PostgreSQL locks the user's row
 * first, in one order for every such transaction). A list page cached under an older version is
 * then never served again, in this process or any other sharing the database.
 */
export async function bumpListVersion(
  trx: Kysely<Database>,
  owner: { userId: string } | { teamId: string } | { deploymentIds: readonly string[] },
): Promise<void> {
  const bump = trx.updateTable('users').set((eb) => ({ deployments_version: eb('deployments_version', '+', 1) }));
  if ('userId' in owner) await bump.where('id', '=', owner.userId).execute();
  else if ('teamId' in owner) await bump.where('id', 'in', trx.selectFrom('team_members').select('user_id').where('team_id', '=', owner.teamId)).execute();
  else if (owner.deploymentIds.length > 0) {
    const ids = [...owner.deploymentIds];
    // The creator's list, and every member's of the deployment's team (they list it too).
    await bump
      .where((eb) =>
        eb.or([
          eb('id', 'in', trx.selectFrom('deployments').select('user_id').where('id', 'in', ids)),
          eb('id', 'in', trx.selectFrom('team_members').innerJoin('deployments', 'deployments.team_id', 'team_members.team_id').select('team_members.user_id').where('deployments.id', 'in', ids)),
        ]),
      )
      .execute();
  }
}

/** How many deployments (previews included) a team holds, read inside `trx` (a team holding any cannot be deleted). */
export async function teamDeploymentCount(trx: Kysely<Database>, teamId: string): Promise<number> {
  const row = await trx.selectFrom('deployments').select((eb) => eb.fn.countAll<number>().as('n')).where('team_id', '=', teamId).executeTakeFirstOrThrow();
  return Number(row.n);
}

/**
 * The deployment store of the lifecycle, on `db`, for the control-plane instance `runner`: builds
 * it starts are recorded as its own, and start-up recovery only touches those (and rows from
 * before instances were recorded).
 */
export function databaseDeploymentStore(db: Db, runner: string): DeploymentStore {
  /** Builds waiting in the shared build queue, not taken yet (several instances; none on SQLite). */
  const waitingInQueue = () => db.selectFrom('build_queue').select('build_id').where('taken_by', 'is', null);
  return {
    deployment: (id) => db.selectFrom('deployments').selectAll().where('id', '=', id).executeTakeFirst(),

    build: (deploymentId, buildId) =>
      db.selectFrom('builds').selectAll().where('id', '=', buildId).where('deployment_id', '=', deploymentId).executeTakeFirst(),

    async startBuild(build: NewBuild, status: DeploymentStatus, audit?: AuditRecord) {
      await db.transaction().execute(async (trx) => {
        await bumpListVersion(trx, { deploymentIds: [build.deployment_id] });
        await trx.insertInto('builds').values({ ...build, runner }).execute();
        await trx.updateTable('deployments').set({ status, updated_at: nowIso() }).where('id', '=', build.deployment_id).execute();
        await appendRecord(trx, audit);
      });
    },

    async setStatus(deploymentId, status, audit?: AuditRecord) {
      await db.transaction().execute(async (trx) => {
        await bumpListVersion(trx, { deploymentIds: [deploymentId] });
        await trx.updateTable('deployments').set({ status, updated_at: nowIso() }).where('id', '=', deploymentId).execute();
        await appendRecord(trx, audit);
      });
    },

    async setImage(buildId, image) {
      await db.updateTable('builds').set({ image_id: image }).where('id', '=', buildId).execute();
    },

    async setReleaseSet(buildId, set) {
      await db.updateTable('builds').set({ release_set: set }).where('id', '=', buildId).execute();
    },

    recordDockerfile: (buildId, used) => recordBuildDockerfile(db, buildId, used),

    async finishBuild(buildId, status, error) {
      await db
        .updateTable('builds')
        .set({ status, error, finished_at: nowIso() })
        .where('id', '=', buildId)
        .where('status', '=', 'building')
        .execute();
    },

    async switchLive({ deploymentId, buildId, containerId, upstreams, status }): Promise<RetiredContainer[]> {
      const now = nowIso();
      return db.transaction().execute(async (trx) => {
        await bumpListVersion(trx, { deploymentIds: [deploymentId] });
        const previous = await trx
          .selectFrom('builds')
          .select(['id', 'container_id', 'upstreams'])
          .where('deployment_id', '=', deploymentId)
          .where('container_id', 'is not', null)
          .where('container_id', '!=', containerId)
          .execute();
        await trx.updateTable('builds').set({ container_id: null, upstreams: null }).where('deployment_id', '=', deploymentId).execute();
        await trx.updateTable('builds').set({ container_id: containerId, upstreams: storeUpstreams(upstreams) }).where('id', '=', buildId).execute();
        await trx
          .updateTable('builds')
          .set({ status: 'succeeded', finished_at: now, error: null })
          .where('id', '=', buildId)
          .where('status', '=', 'building')
          .execute();
        // A release runs with the current configuration: nothing is pending any more.
        await trx.updateTable('deployments').set({ status, live_build_id: buildId, config_pending: null, updated_at: now }).where('id', '=', deploymentId).execute();
        return previous.flatMap((b) => (b.container_id === null ? [] : [{ buildId: b.id, containerId: b.container_id, upstreams: parseUpstreams(b.upstreams) }]));
      });
    },

    async setContainer(buildId, containerId, upstreams) {
      await db.updateTable('builds').set({ container_id: containerId, upstreams: storeUpstreams(upstreams) }).where('id', '=', buildId).execute();
    },

    async moveUpstreams(buildId, containerId, upstreams) {
      const result = await db
        .updateTable('builds')
        .set({ upstreams: storeUpstreams(upstreams) })
        .where('id', '=', buildId)
        .where('container_id', '=', containerId)
        .executeTakeFirst();
      return result.numUpdatedRows > 0n;
    },

    async remove(deploymentId, audit?: AuditRecord) {
      await db.transaction().execute(async (trx) => {
        await bumpListVersion(trx, { deploymentIds: [deploymentId] });
        await trx.deleteFrom('subdomain_claims').where('kind', '=', 'deployment').where('owner_id', '=', deploymentId).execute();
        await trx.deleteFrom('deployments').where('id', '=', deploymentId).execute();
        await appendRecord(trx, audit);
      });
    },

    async previewIds(deploymentId) {
      const rows = await db.selectFrom('deployments').select('id').where('parent_id', '=', deploymentId).execute();
      return rows.map((r) => r.id);
    },

    async buildsWithImages(deploymentId) {
      const rows = await db
        .selectFrom('builds')
        .select(['id', 'image_id'])
        .where('deployment_id', '=', deploymentId)
        .where('status', '=', 'succeeded')
        .where('image_id', 'is not', null)
        .orderBy('seq', 'desc')
        .execute();
      return rows.flatMap((r) => (r.image_id === null ? [] : [{ id: r.id, image_id: r.image_id }]));
    },

    async liveContainers(): Promise<LiveContainer[]> {
      const rows = await db
        .selectFrom('deployments')
        .innerJoin('builds', 'builds.id', 'deployments.live_build_id')
        .select(['deployments.id', 'deployments.subdomain', 'builds.id as build_id', 'builds.container_id', 'builds.upstreams'])
        .where('deployments.status', 'in', ['running', 'failed', 'building'])
        .where('builds.container_id', 'is not', null)
        .execute();
      return rows.flatMap((r) =>
        r.container_id === null ? [] : [{ deploymentId: r.id, subdomain: r.subdomain, buildId: r.build_id, containerId: r.container_id, upstreams: parseUpstreams(r.upstreams) }],
      );
    },

    async orphanedBuilds(live) {
      let query = db
        .selectFrom('builds')
        .select(['id', 'deployment_id', 'runner'])
        .where('status', '=', 'building')
        .where('runner', 'is not', null)
        // A build still waiting in the shared queue is not orphaned: a live instance takes it.
        .where('id', 'not in', waitingInQueue());
      if (live.length > 0) query = query.where('runner', 'not in', [...live]);
      const rows = await query.orderBy('started_at').execute();
      return rows.flatMap((r) => (r.runner === null ? [] : [{ buildId: r.id, deploymentId: r.deployment_id, runner: r.runner }]));
    },

    async buildInProgress(deploymentId) {
      const row = await db
        .selectFrom('builds')
        .select(['id', 'runner'])
        .where('deployment_id', '=', deploymentId)
        .where('status', '=', 'building')
        .where('runner', 'is not', null)
        .executeTakeFirst();
      return row === undefined || row.runner === null ? undefined : { id: row.id, runner: row.runner };
    },

    async claimBuild(buildId, from) {
      const result = await db.updateTable('builds').set({ runner }).where('id', '=', buildId).where('runner', '=', from).where('status', '=', 'building').executeTakeFirst();
      return Number(result.numUpdatedRows) === 1;
    },

    async routeFacts(deploymentId?: string): Promise<RouteFact[]> {
      let query = db
        .selectFrom('deployments')
        .leftJoin('builds', 'builds.id', 'deployments.live_build_id')
        .select(['deployments.id', 'deployments.subdomain', 'deployments.status', 'builds.container_id', 'builds.upstreams']);
      if (deploymentId !== undefined) query = query.where('deployments.id', '=', deploymentId);
      const rows = await query.execute();
      return rows.map((r) => ({
        deploymentId: r.id,
        subdomain: r.subdomain,
        status: r.status,
        upstreams: r.container_id === null ? [] : parseUpstreams(r.upstreams),
      }));
    },

    async everything() {
      const deployments = await db.selectFrom('deployments').selectAll().execute();
      const builds = await db.selectFrom('builds').selectAll().execute();
      return { deployments, builds };
    },

    async interruptedBuilds() {
      return db.transaction().execute(async (trx) => {
        const mine = await trx
          .selectFrom('builds')
          .select(['id', 'deployment_id', 'runner'])
          .where('status', '=', 'building')
          .where((eb) => eb.or([eb('runner', '=', runner), eb('runner', 'is', null)]))
          // Still waiting in the shared queue (several instances): another instance, or this one, takes it.
          .where('id', 'not in', waitingInQueue())
          .orderBy('started_at')
          .execute();
        // Builds recorded before builds named their runner are this instance's from now on.
        const unowned = mine.filter((b) => b.runner === null).map((b) => b.id);
        if (unowned.length > 0) await trx.updateTable('builds').set({ runner }).where('id', 'in', unowned).where('runner', 'is', null).execute();
        return mine.map((b) => ({ buildId: b.id, deploymentId: b.deployment_id, runner }));
      });
    },
  };
}
