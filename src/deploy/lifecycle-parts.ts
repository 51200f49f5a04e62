// What the lifecycle's operations, build pipeline and release switch share: its dependencies, locks, queue and recovery, and the facts they read alike.
import type { Principal } from '../core/principal.js';
import type { Upstream } from '../core/upstream.js';
import type { BuildRow } from '../domain/builds.js';
import { assertUuid, type DeploymentRow } from '../domain/deployments.js';
import { authorizeDeployment, type DeploymentAction } from '../domain/policy.js';
import type { AppRuntime } from '../runtime/app-runtime.js';
import type { BuildQueue } from './build-queue.js';
import type { Release } from './concurrency.js';
import type { Coordination } from './coordination.js';
import type { LifecycleDeps } from './lifecycle-deps.js';
import type { ReleaseRecovery } from './release-recovery.js';
import { routeOf } from './route-sync.js';
import { transition, type DeploymentEvent, type DeploymentStatus } from './state-table.js';

/** Per-deployment locks, held across every instance sharing the database. */
export interface DeploymentLocks {
  run<T>(deploymentId: string, fn: () => Promise<T>, signal?: AbortSignal): Promise<T>;
  acquire(deploymentId: string, signal?: AbortSignal): Promise<Release>;
}

/** The lifecycle's parts, built once by its constructor and handed to each of its rooms. */
export interface LifecycleParts {
  readonly deps: LifecycleDeps;
  readonly runtime: AppRuntime;
  readonly coordination: Coordination;
  readonly locks: DeploymentLocks;
  /** Where recorded builds wait for a slot, shared fairly across users (and instances). */
  readonly queue: BuildQueue;
  /** Releases waiting to be started again (server start, containers found stopped). */
  readonly recovery: ReleaseRecovery;
  /** Aborted by close(): recovery in progress gives up, the queue is no longer taken from. */
  readonly closing: AbortSignal;
}

/** A deployment the principal may `action` (the policy): missing, not a UUID, another's → 404; a role too low → 403. */
export async function ownedDeployment(parts: LifecycleParts, principal: Principal, deploymentId: string, action: DeploymentAction): Promise<DeploymentRow> {
  assertUuid(deploymentId, 'deployment');
  return authorizeDeployment(principal, await parts.deps.store.deployment(deploymentId), action);
}

/** The state table's answer for an event whose cells need no facts (deploy, rollback, a build's end). */
export function nextStatus(dep: DeploymentRow, event: DeploymentEvent): { to: DeploymentStatus; noop: boolean } {
  return transition(dep.status, event, { serving: false, restartable: false });
}

/** Publishes a deployment's route that serves no release. */
export function publishRoute(parts: LifecycleParts, subdomain: string, deploymentId: string, state: 'stopped' | 'failed' | 'starting'): void {
  parts.deps.dataPlane.publish(subdomain, { kind: 'app', deploymentId, state });
}

/** The deployment's live build, if it has one. */
export async function liveBuildOf(parts: LifecycleParts, dep: DeploymentRow): Promise<BuildRow | undefined> {
  if (dep.live_build_id === null) return undefined;
  return parts.deps.store.build(dep.id, dep.live_build_id);
}

/** Whether a release serves this deployment's traffic now (read from the store, so every instance answers the same). */
export async function isServing(parts: LifecycleParts, dep: DeploymentRow): Promise<boolean> {
  return (await servingUpstreams(parts, dep)).length > 0;
}

/**
 * Where every edge sends this deployment's traffic now, as the store has it (its status and its
 * live release's upstreams: the route each instance publishes), empty when it is not served. A
 * release this instance's recovery is starting again does not serve yet (its route is `starting`).
 */
export async function servingUpstreams(parts: LifecycleParts, dep: DeploymentRow): Promise<readonly Upstream[]> {
  if (parts.recovery.has(dep.id)) return [];
  const [fact] = await parts.deps.store.routeFacts(dep.id);
  if (fact === undefined) return [];
  const route = routeOf(fact);
  return route.kind === 'app' && route.state === 'live' ? route.upstreams : [];
}
