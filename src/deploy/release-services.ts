// The services of a compose deployment's live set, as they run now (the dashboard's Services tab).
import { DomainError } from '../core/errors.js';
import type { Principal } from '../core/principal.js';
import type { ReleaseServiceView } from '../domain/operations.js';
import { parseReleaseSet } from '../runtime/release-set.js';
import { liveBuildOf, ownedDeployment, type LifecycleParts } from './lifecycle-parts.js';

/**
 * Every service of the live build's set, in start order, with its containers running now and its
 * health; empty for a deployment that is not a set (a Dockerfile app) or has no live build.
 */
export async function listReleaseServices(parts: LifecycleParts, principal: Principal, deploymentId: string): Promise<ReleaseServiceView[]> {
  const dep = await ownedDeployment(parts, principal, deploymentId, 'read');
  const live = await liveBuildOf(parts, dep);
  const set = parseReleaseSet(live?.release_set);
  if (live === undefined || set === null) return [];
  const { runtime } = parts;
  const states = live.container_id === null || runtime.releaseServices === undefined ? [] : await runtime.releaseServices(parts.deps.settings.instanceId, live.container_id);
  return set.services.map((service) => {
    const state = states.find((s) => s.service === service.name);
    const running = state?.running ?? 0;
    return {
      name: service.name,
      web: service.name === set.web,
      image: service.image,
      replicas: service.replicas,
      running,
      state: running === 0 ? (dep.status === 'stopped' ? 'stopped' : 'down') : running < service.replicas ? 'degraded' : 'running',
      health: service.healthcheck === undefined ? null : (state?.health ?? null),
    };
  });
}

/**
 * Refuses a `?service=` filter that names no service of the live release (it would read as an
 * empty log): the message lists the services there are. A deployment that is not a set has none.
 */
export function checkLogService(releaseSet: string | null | undefined, service: string | undefined): void {
  if (service === undefined) return;
  const set = parseReleaseSet(releaseSet);
  if (set === null) throw new DomainError('validation_error', `service=${JSON.stringify(service)}: this deployment's live release is a single container, not a compose set; leave service out`);
  if (!set.services.some((s) => s.name === service)) {
    throw new DomainError('validation_error', `service=${JSON.stringify(service)}: no such service in the live release; its services: ${set.services.map((s) => s.name).join(', ')}`);
  }
}
