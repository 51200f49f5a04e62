// Build records, read side: list, get, and how a build is shown.
import { assertUuid, getDeploymentRow, getOwnedDeploymentId } from './deployments.js';
import type { BuildRow, DeploymentRow } from './deployment-rows.js';
import { DomainError } from '../core/errors.js';
import type { Principal } from '../core/principal.js';
import { pageFromRows, type Page, type PageRequest } from '../core/page.js';
import type { DeploymentCatalog, ShownBuild } from './deployment-catalog.js';

export type { BuildRow };

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

/** A page of the builds of one of the caller's deployments, newest first (keyset on `seq`). */
export async function listBuilds(
  catalog: DeploymentCatalog,
  principal: Principal,
  deploymentId: string,
  page: PageRequest<BuildPosition>,
): Promise<Page<ShownBuild, BuildPosition>> {
  const deployment = await getOwnedDeploymentId(catalog, principal, deploymentId, 'read');
  const rows = await catalog.builds(deployment, page.after?.[0], page.limit + 1);
  return pageFromRows(rows, page.limit, (row) => [row.seq] as const);
}

/** One build of one of the caller's deployments (404 for anything else). */
export async function getBuildRow(
  catalog: DeploymentCatalog,
  principal: Principal,
  deploymentId: string,
  buildId: string,
): Promise<{ deployment: DeploymentRow; build: BuildRow }> {
  const deployment = await getDeploymentRow(catalog, principal, deploymentId, 'read');
  assertUuid(buildId, 'build');
  const build = await catalog.build(deployment.id, buildId);
  if (build === undefined) throw new DomainError('not_found', 'build not found');
  return { deployment, build };
}

/** Whether a build has ended (or vanished): the condition that ends a followed log. */
export async function isBuildFinished(catalog: DeploymentCatalog, buildId: string): Promise<boolean> {
  const status = await catalog.buildStatus(buildId);
  return status === undefined || status !== 'building';
}

/**
 * When a read of a build's log ends: followed, once the build has ended; an ended build's, once its
 * log is closed (its last lines are written a moment after its status, so a reader who saw the
 * status never gets a log without them); a running build's unfollowed, at what is there now.
 */
export function logReadEnd(catalog: DeploymentCatalog, build: Pick<BuildRow, 'id' | 'status'>, follow: boolean): { isFinished?: () => Promise<boolean> } {
  if (follow) return { isFinished: () => isBuildFinished(catalog, build.id) };
  return build.status === 'building' ? {} : { isFinished: async () => true };
}
