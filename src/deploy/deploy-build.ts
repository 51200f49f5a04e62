// Deploy: a new build of a deployment recorded (its source resolved, its configuration fixed) and queued for the build pipeline.
import crypto from 'node:crypto';
import { DomainError } from '../core/errors.js';
import type { Principal } from '../core/principal.js';
import { deploymentRecord } from '../domain/audit.js';
import type { BuildRow } from '../domain/builds.js';
import type { DeployOptions } from '../domain/operations.js';
import type { BuildRunner } from './build-runner.js';
import { resolveSource } from './image-build.js';
import { isServing, nextStatus, ownedDeployment, publishRoute, type LifecycleParts } from './lifecycle-parts.js';

/**
 * Records a build of the deployment's source (an archive's upload, a pushed commit, or its
 * branch's head) and queues it; with `options.wait`, answers once it has ended (a failure → `build_failed`).
 * A build of the deployment still in progress is cancelled (superseded).
 */
export async function deployBuild(parts: LifecycleParts, builds: BuildRunner, principal: Principal, deploymentId: string, options: DeployOptions): Promise<BuildRow> {
  const { deps, locks, queue } = parts;
  const initial = await ownedDeployment(parts, principal, deploymentId, 'change');
  // Builds in progress of the owner's other deployments (this one's is cancelled by the deploy).
  await deps.quotas?.assertRoom({ ...principal, userId: initial.user_id }, 'concurrent_builds', deploymentId);
  let commitSha: string;
  let sourceRef: string;
  /** Why the source cannot be read (an unreachable repository): the build is recorded, then fails. */
  let unreadable: string | undefined;
  if (initial.source_type === 'archive') {
    if (options.commit !== undefined) throw new DomainError('invalid_state', 'an archive deployment builds its upload, not a commit');
    if (initial.upload_id === null || initial.upload_sha256 === null) {
      throw new DomainError('invalid_state', 'nothing has been uploaded yet; upload an archive first');
    }
    commitSha = initial.upload_sha256;
    sourceRef = initial.upload_id;
  } else if (options.commit !== undefined) {
    // A pushed commit: exactly that one is built, even if the branch has moved on since.
    commitSha = options.commit.sha;
    sourceRef = options.commit.branch;
  } else {
    const resolved = await resolveSource(initial, deps.settings);
    commitSha = resolved.sha;
    sourceRef = resolved.branch;
    unreadable = resolved.unreadable;
  }

  const build = await locks.run(deploymentId, async () => {
    await builds.cancel(deploymentId, 'superseded by a newer deploy');
    const current = await ownedDeployment(parts, principal, deploymentId, 'change');
    if (current.source_type === 'archive' && current.upload_id !== null && current.upload_id !== sourceRef) {
      // A newer upload landed while we waited: build what is there now.
      sourceRef = current.upload_id;
      commitSha = current.upload_sha256 ?? commitSha;
    }
    const row: BuildRow = {
      id: crypto.randomUUID(),
      deployment_id: deploymentId,
      status: 'building',
      commit_sha: commitSha,
      source_ref: sourceRef,
      error: null,
      image_id: null,
      container_id: null,
      upstreams: null,
      started_at: new Date().toISOString(),
      finished_at: null,
      seq: 0,
    };
    const { seq: _seq, ...values } = row;
    const serving = await isServing(parts, current);
    await deps.store.startBuild(values, nextStatus(current, 'deploy').to, deploymentRecord(principal, current, 'deployment.deploy', 'build', row.id));
    // The configuration of this build is fixed now: later changes wait for the next deploy or restart.
    const vars = await deps.configs.recordForBuild(deploymentId, row.id);
    if (!serving) publishRoute(parts, current.subdomain, deploymentId, 'starting');
    // A source that cannot be read fails at once; any other build waits in the queue for a slot.
    if (unreadable !== undefined) builds.start(current, row, vars, { unreadable });
    else await queue.enqueue({ buildId: row.id, deploymentId, userId: current.user_id });
    return row;
  });
  builds.dispatch();

  if (!options.wait) return build;
  await builds.waitFor(deploymentId, build.id, options.signal);
  const finished = (await deps.store.build(deploymentId, build.id)) ?? build;
  if (finished.status === 'failed') throw new DomainError('build_failed', finished.error ?? 'the build failed');
  return finished;
}
