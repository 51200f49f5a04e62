// The Dockerfile a build used (decisions §24): the source's own, or the one Slipway generated and why.
import { DomainError } from '../core/errors.js';
import type { Principal } from '../core/principal.js';
import { getBuildRow } from './builds.js';
import type { DeploymentCatalog } from './deployment-catalog.js';
import type { UsedDockerfile } from './used-dockerfile.js';

/** The Dockerfile a build of a deployment the principal may read used; not_found before the build read one. */
export async function getBuildDockerfile(catalog: DeploymentCatalog, principal: Principal, deploymentId: string, buildId: string): Promise<UsedDockerfile> {
  const { build } = await getBuildRow(catalog, principal, deploymentId, buildId);
  return usedDockerfile(catalog, build.id);
}

/** The Dockerfile a build (already authorized: a deployment's or a preview's) used; not_found before the build read one. */
export async function usedDockerfile(catalog: Pick<DeploymentCatalog, 'buildDockerfile'>, buildId: string): Promise<UsedDockerfile> {
  const used = await catalog.buildDockerfile(buildId);
  if (used === undefined) throw new DomainError('not_found', 'this build has no recorded Dockerfile (it failed before reading one, or was made by an older version)');
  return used;
}
