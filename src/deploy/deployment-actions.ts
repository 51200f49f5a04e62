// Operations on a deployment under its lock: stop, cancel its build, restart, roll back, delete (with its previews).
import { DomainError } from '../core/errors.js';
import type { Principal } from '../core/principal.js';
import { deploymentRecord } from '../domain/audit.js';
import { assertUuid } from '../domain/deployments.js';
import type { DeploymentAction } from '../domain/policy.js';
import type { BuildRunner } from './build-runner.js';
import { removeDeploymentObjects } from './images.js';
import { isServing, liveBuildOf, nextStatus, ownedDeployment, publishRoute, servingUpstreams, type LifecycleParts } from './lifecycle-parts.js';
import { STOP_SECONDS, type ReleaseSwitch } from './release-switch.js';
import { transition } from './state-table.js';

/** What the operations act through: the lifecycle's parts, its builds on this instance, its release switch. */
export interface ActionParts {
  readonly parts: LifecycleParts;
  readonly builds: BuildRunner;
  readonly releases: ReleaseSwitch;
}

/** Stops the deployment: its build in progress cancelled, its live release drained and stopped, its route `stopped`. */
export async function stopDeployment({ parts, builds }: ActionParts, principal: Principal, deploymentId: string): Promise<{ message: string }> {
  const { deps, runtime, locks, recovery } = parts;
  recovery.interrupt(deploymentId);
  return locks.run(deploymentId, async () => {
    const dep = await ownedDeployment(parts, principal, deploymentId, 'change');
    const live = await liveBuildOf(parts, dep);
    const upstreams = live === undefined ? [] : await servingUpstreams(parts, dep);
    const serving = builds.inflightBuildId(deploymentId) !== undefined || upstreams.length > 0;
    const next = transition(dep.status, 'stop', { serving, restartable: false });
    if (next.noop) return { message: `deployment ${dep.name} is already stopped` };
    recovery.forget(deploymentId);
    await builds.cancel(deploymentId, 'cancelled by stop');
    if (live?.container_id != null) {
      await Promise.all(upstreams.map((upstream) => deps.dataPlane.drain(upstream, 5_000)));
      await runtime.stopRelease(live.container_id, STOP_SECONDS);
      // The stopped release serves no more: every instance reads that from the store.
      await deps.store.moveUpstreams(live.id, live.container_id, []);
    }
    await deps.store.setStatus(deploymentId, next.to, deploymentRecord(principal, dep, 'deployment.stop'));
    publishRoute(parts, dep.subdomain, deploymentId, 'stopped');
    return { message: `deployment ${dep.name} stopped` };
  });
}

/** Cancels the deployment's build in progress, wherever it runs; what served before serves on. */
export async function cancelBuild({ parts, builds }: ActionParts, principal: Principal, deploymentId: string): Promise<{ message: string }> {
  const { deps, locks } = parts;
  return locks.run(deploymentId, async () => {
    const dep = await ownedDeployment(parts, principal, deploymentId, 'change');
    // The build may run on another instance (decisions §15: cancel works from any instance).
    const buildId = builds.inflightBuildId(deploymentId) ?? (await deps.store.buildInProgress(deploymentId))?.id;
    if (buildId === undefined) throw new DomainError('invalid_state', `no build of ${dep.name} is in progress`);
    await builds.cancel(deploymentId, 'cancelled by the user');
    // What served before the build serves on; with nothing serving, the app is stopped.
    const serving = await isServing(parts, dep);
    await deps.store.setStatus(deploymentId, transition(dep.status, 'cancel', { serving, restartable: false }).to, deploymentRecord(principal, dep, 'deployment.cancel', 'build', buildId));
    if (!serving) publishRoute(parts, dep.subdomain, deploymentId, 'stopped');
    return {
      message: `build ${buildId.slice(0, 8)} of ${dep.name} cancelled${serving ? '; the live release keeps serving' : ''}`,
    };
  });
}

/** Starts the live build's image again as a new release, with the current configuration. */
export async function restartDeployment({ parts, releases }: ActionParts, principal: Principal, deploymentId: string): Promise<{ message: string }> {
  const { deps, locks, recovery } = parts;
  recovery.interrupt(deploymentId);
  return locks.run(deploymentId, async () => {
    const dep = await ownedDeployment(parts, principal, deploymentId, 'change');
    const live = dep.status === 'pending' || dep.status === 'building' ? undefined : await liveBuildOf(parts, dep);
    const restartable = live !== undefined && live.image_id !== null && (await deps.engine.imageExists(live.image_id));
    const next = transition(dep.status, 'restart', { serving: false, restartable });
    if (live === undefined) throw new DomainError('invalid_state', 'no succeeded build to restart; deploy first');
    // A restart runs the current configuration, which becomes the one this build was released with.
    const vars = await deps.configs.current(dep.id);
    recovery.forget(deploymentId);
    await releases.release(dep, live, vars, next.to, AbortSignal.timeout(deps.settings.startupTimeoutMs + 30_000));
    await deps.configs.setBuildConfig(live.id, vars, deploymentRecord(principal, dep, 'deployment.restart'));
    return { message: `deployment ${dep.name} restarted (build ${live.id})` };
  });
}

/** Releases an earlier succeeded build again, with the configuration it was released with. */
export async function rollbackDeployment({ parts, builds, releases }: ActionParts, principal: Principal, deploymentId: string, buildId: string): Promise<{ message: string }> {
  const { deps, locks, recovery } = parts;
  recovery.interrupt(deploymentId);
  return locks.run(deploymentId, async () => {
    const dep = await ownedDeployment(parts, principal, deploymentId, 'change');
    // The state table first: a deployment that was never deployed has no build to roll back to, whatever id is named.
    const next = nextStatus(dep, 'rollback');
    assertUuid(buildId, 'build');
    const target = await deps.store.build(dep.id, buildId);
    if (target === undefined) throw new DomainError('not_found', 'build not found');
    if (target.status !== 'succeeded') throw new DomainError('invalid_state', `build ${buildId} did not succeed (${target.status})`);
    if (target.image_id === null || !(await deps.engine.imageExists(target.image_id))) {
      throw new DomainError('invalid_state', `the image of build ${buildId} has been pruned`);
    }
    await builds.cancel(deploymentId, 'cancelled by rollback');
    recovery.forget(deploymentId);
    // The build runs with the configuration it was released with, which becomes current again
    // (a build from before configuration existed keeps the current one).
    const vars = (await deps.configs.buildConfig(target.id)) ?? (await deps.configs.current(dep.id));
    await releases.release(dep, target, vars, next.to, AbortSignal.timeout(deps.settings.startupTimeoutMs + 30_000));
    await deps.configs.replace(dep.id, vars, deploymentRecord(principal, dep, 'deployment.rollback', 'build', target.id));
    return { message: `rolled back to build ${target.id}` };
  });
}

/** Deletes the deployment and everything it has (releases, engine objects, sources, logs); its previews (decisions §17) go first. */
export async function removeDeployment(actions: ActionParts, principal: Principal, deploymentId: string, options?: { action?: DeploymentAction }): Promise<void> {
  const { parts } = actions;
  const { store } = parts.deps;
  const action = options?.action ?? 'manage';
  const dep = await ownedDeployment(parts, principal, deploymentId, action);
  for (const previewId of await store.previewIds(dep.id)) await removeOne(actions, principal, previewId, action);
  await removeOne(actions, principal, deploymentId, action);
}

async function removeOne({ parts, builds }: ActionParts, principal: Principal, deploymentId: string, action: DeploymentAction): Promise<void> {
  const { deps, runtime, locks, recovery } = parts;
  const { store, sources, buildLogs, dataPlane } = deps;
  recovery.interrupt(deploymentId);
  await locks.run(deploymentId, async () => {
    const dep = await ownedDeployment(parts, principal, deploymentId, action);
    await builds.cancel(deploymentId, 'cancelled: the deployment was deleted');
    recovery.forget(deploymentId);
    const live = await liveBuildOf(parts, dep);
    await store.remove(dep.id, deploymentRecord(principal, dep, dep.parent_id == null ? 'deployment.delete' : 'preview.delete'));
    dataPlane.withdraw(dep.subdomain);
    // The runtime's own objects first (under swarm the deployment's service, which no engine label finds).
    if (live?.container_id != null) {
      await runtime.removeRelease(live.container_id).catch((err: unknown) => deps.log('warn', 'removing the release of a deleted deployment failed', { err }));
    }
    await runtime.removeDeployment?.(deps.settings.instanceId, dep.id).catch((err: unknown) => deps.log('warn', "removing a deleted deployment's runtime objects failed", { err }));
    // The records are gone: what is left is cleanup, and a slow engine must not make the deletion look failed.
    // Anything left behind is a stray the sweep at the next start removes (reconcile.ts).
    await removeDeploymentObjects(deps.engine, deps.settings.instanceId, dep.id).catch((err: unknown) =>
      deps.log('warn', "removing a deleted deployment's containers, volumes or images failed; the next start sweeps them", { err }),
    );
    await sources.removeDeployment(dep.id);
    await buildLogs.removeDeployment(dep.id);
  });
}
