// The app runtime with linked databases: each release gets its links' URLs as secret variables and joins their networks. The lifecycle is not changed for it.
import type { AppRuntime, ReleaseTarget } from '../runtime/app-runtime.js';
import type { EnvVar } from '../domain/app-config.js';

/** What a deployment's release gets from its linked databases. */
export type LinkedParts = (deploymentId: string) => Promise<{ vars: EnvVar[]; networks: string[] }>;
/** The values of a deployment's links to mask wherever its output is shown. */
export type LinkedSecrets = (deploymentId: string) => Promise<string[]>;

/**
 * `runtime`, with every release it starts (deploy, restart, rollback, recovery) given the links in
 * force at that moment: a link's variable wins over a variable of the same name, and the release
 * joins each linked database's network; `addedSecrets` names the links' URLs and passwords, for
 * masking. Every other call passes through unchanged.
 */
export function withLinkedDatabases(runtime: AppRuntime, linked: LinkedParts, secrets: LinkedSecrets): AppRuntime {
  const withLinks = async <T extends Pick<ReleaseTarget, 'deploymentId' | 'vars' | 'networks'>>(target: T): Promise<T> => {
    const parts = await linked(target.deploymentId);
    if (parts.vars.length === 0 && parts.networks.length === 0) return target;
    const keys = new Set(parts.vars.map((v) => v.key));
    return {
      ...target,
      vars: [...target.vars.filter((v) => !keys.has(v.key)), ...parts.vars],
      networks: [...(target.networks ?? []), ...parts.networks],
    };
  };
  const wrapped: AppRuntime = {
    ...(runtime.releasesSets === undefined ? {} : { releasesSets: runtime.releasesSets }),
    startRelease: async (target, options) => runtime.startRelease(await withLinks(target), options),
    resumeRelease: (id, check, options) => runtime.resumeRelease(id, check, options),
    inspectReleases: (instanceId, ids) => runtime.inspectReleases(instanceId, ids),
    stopRelease: (id, timeoutSeconds) => runtime.stopRelease(id, timeoutSeconds),
    removeRelease: (id) => runtime.removeRelease(id),
    releaseLogs: (id, options) => runtime.releaseLogs(id, options),
    releaseStats: (id, signal) => runtime.releaseStats(id, signal),
    addedSecrets: async (deploymentId) => [...((await runtime.addedSecrets?.(deploymentId)) ?? []), ...(await secrets(deploymentId))],
  };
  if (runtime.removeDeployment !== undefined) {
    const remove = runtime.removeDeployment.bind(runtime);
    wrapped.removeDeployment = (instanceId, deploymentId) => remove(instanceId, deploymentId);
  }
  if (runtime.runOnce !== undefined) {
    const runOnce = runtime.runOnce.bind(runtime);
    // A job's run gets the links like a release (decisions §22).
    wrapped.runOnce = async (target, options) => runOnce(await withLinks(target), options);
  }
  if (runtime.releaseServices !== undefined) {
    const services = runtime.releaseServices.bind(runtime);
    wrapped.releaseServices = (instanceId, id) => services(instanceId, id);
  }
  if (runtime.releaseExits !== undefined) {
    const exits = runtime.releaseExits.bind(runtime);
    wrapped.releaseExits = (instanceId, ids, sinceMs, untilMs, signal) => exits(instanceId, ids, sinceMs, untilMs, signal);
  }
  if (runtime.exitLogs !== undefined) {
    const exitLogs = runtime.exitLogs.bind(runtime);
    wrapped.exitLogs = (key, options) => exitLogs(key, options);
  }
  return wrapped;
}
