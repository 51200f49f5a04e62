// Build records, read side: list, get, and how a build is shown.
import type { Db } from '../db/database.js';
import type { Selectable } from 'kysely';
import type { BuildsTable } from '../db/schema.js';
import { assertUuid, getDeploymentRow, getOwnedDeploymentId, type DeploymentRow } from './deployments.js';
import { DomainError } from '../core/errors.js';
import type { Principal } from '../core/principal.js';
import { pageFromRows, type Page, type PageRequest } from '../core/page.js';

/** A build as the lifecycle and the API see it (which instance runs it is the store's business). */
export type BuildRow = Omit<Selectable<BuildsTable>, 'runner'>;

export interface BuildView {
  id: string;
  deployment_id: string;
  status: BuildRow['status'];
  commit_sha: string;
  started_at: string;
  finished_at: string | null;
  error: string | null;
}

export const presentBuild = (row: Pick<BuildRow, keyof BuildView>): BuildView => ({
  id: row.id,
  deployment_id: row.deployment_id,
  status: row.status,
  commit_sha: row.commit_sha,
  started_at: row.started_at,
  finished_at: row.finished_at,
  error: row.error,
});

/** A position in a deployment's list of builds: the build's sequence number (unique, so no ties). */
export type BuildPosition = readonly [seq: number];

/** The columns a build's view is made of (and its order). */
const SHOWN_COLUMNS = ['id', 'deployment_id', 'status', 'commit_sha', 'started_at', 'finished_at', 'error', 'seq'] as const;

/** A page of the builds of one of the caller's deployments, newest first (keyset on `seq`). */
export async function listBuilds(
  db: Db,
  principal: Principal,
  deploymentId: string,
  page: PageRequest<BuildPosition>,
): Promise<Page<Pick<BuildRow, (typeof SHOWN_COLUMNS)[number]>, BuildPosition>> {
  const deployment = await getOwnedDeploymentId(db, principal, deploymentId);
  let query = db.selectFrom('builds').select(SHOWN_COLUMNS).where('deployment_id', '=', deployment);
  if (page.after !== undefined) query = query.where('seq', '<', page.after[0]);
  const rows = await query.orderBy('seq', 'desc').limit(page.limit + 1).execute();
  return pageFromRows(rows, page.limit, (row) => [row.seq] as const);
}

/** One build of one of the caller's deployments (404 for anything else). */
export async function getBuildRow(
  db: Db,
  principal: Principal,
  deploymentId: string,
  buildId: string,
): Promise<{ deployment: DeploymentRow; build: BuildRow }> {
  const deployment = await getDeploymentRow(db, principal, deploymentId);
  assertUuid(buildId, 'build');
  const build = await db
    .selectFrom('builds')
    .selectAll()
    .where('id', '=', buildId)
    .where('deployment_id', '=', deployment.id)
    .executeTakeFirst();
  if (build === undefined) throw new DomainError('not_found', 'build not found');
  return { deployment, build };
}

/** Whether a build has ended (or vanished): the condition that ends a followed log. */
export async function isBuildFinished(db: Db, buildId: string): Promise<boolean> {
  const row = await db.selectFrom('builds').select('status').where('id', '=', buildId).executeTakeFirst();
  return row === undefined || row.status !== 'building';
}
