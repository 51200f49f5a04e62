// The deployment lifecycle on the engine: deploy (build + release), stop, restart, rollback, delete, logs and metrics, recovery.
import type { BuildRow } from '../domain/builds.js';
import type { DeployOptions, DeploymentMetrics, DeploymentOperations, ReleaseServiceView } from '../domain/operations.js';
import { checkLogService, listReleaseServices } from './release-services.js';
import type { MetricsPoint } from '../domain/metrics-history.js';
import type { Principal } from '../core/principal.js';
import type { DeploymentAction } from '../domain/policy.js';
import { DomainError } from '../core/errors.js';
import { DockerRuntime } from '../runtime/docker/docker-runtime.js';
import { redactedStream } from '../secrets/redact.js';
import { BackgroundTasks } from './background-tasks.js';
import { LocalBuildQueue } from './build-queue.js';
import { BuildRunner } from './build-runner.js';
import { withDeploymentLock } from './coordination.js';
import { deployBuild } from './deploy-build.js';
import { cancelBuild, removeDeployment, restartDeployment, rollbackDeployment, stopDeployment, type ActionParts } from './deployment-actions.js';
import { FairBuildSlots } from './fair-build-slots.js';
import type { LifecycleDeps } from './lifecycle-deps.js';
import { liveBuildOf, ownedDeployment, publishRoute, type LifecycleParts } from './lifecycle-parts.js';
import { refreshLivePorts } from './live-ports.js';
import { memoryCoordination } from './memory-coordination.js';
import { outputRedactor } from './output-redactor.js';
import type { PendingRelease, RecoveryPlan } from './reconcile.js';
import { ReleaseRecovery } from './release-recovery.js';
import { ReleaseSwitch } from './release-switch.js';
import { summedMetrics } from './summed-metrics.js';

export type { LifecycleSettings } from './lifecycle-settings.js';
export type { LifecycleDeps } from './lifecycle-deps.js';

/**
 * Runs deployments on the engine. Operations on one deployment are serialized by a per-deployment
 * lock; a build runs outside it (so it can be cancelled) and takes the lock only to switch traffic.
 * The operations live in deployment-actions.ts and deploy-build.ts, builds in build-runner.ts and
 * build-pipeline.ts, the traffic switch in release-switch.ts; this class wires them and answers reads.
 */
export class DeploymentLifecycle implements DeploymentOperations {
  readonly #parts: LifecycleParts;
  readonly #actions: ActionParts;
  readonly #builds: BuildRunner;
  readonly #background: BackgroundTasks;
  /** Aborted by close(): recovery in progress gives up. */
  readonly #closing = new AbortController();

  constructor(deps: LifecycleDeps) {
    const runtime = deps.runtime ?? new DockerRuntime(deps.engine);
    const coordination = deps.coordination ?? memoryCoordination();
    const locks: LifecycleParts['locks'] = {
      run: (deploymentId, fn, signal) => withDeploymentLock(coordination, deploymentId, fn, signal),
      acquire: (deploymentId, signal) => coordination.lockDeployment(deploymentId, signal),
    };
    const queue = deps.buildQueue ?? new LocalBuildQueue(deps.buildSlots ?? new FairBuildSlots(deps.settings.maxConcurrentBuilds));
    const recovery = new ReleaseRecovery({ ...deps, runtime, locks, closing: this.#closing.signal });
    this.#parts = { deps, runtime, coordination, locks, queue, recovery, closing: this.#closing.signal };
    this.#background = new BackgroundTasks(deps.log);
    const releases = new ReleaseSwitch(this.#parts, this.#background);
    this.#builds = new BuildRunner(this.#parts, releases);
    this.#actions = { parts: this.#parts, builds: this.#builds, releases };
  }

  deploy(principal: Principal, deploymentId: string, options: DeployOptions): Promise<BuildRow> {
    return deployBuild(this.#parts, this.#builds, principal, deploymentId, options);
  }

  stop(principal: Principal, deploymentId: string): Promise<{ message: string }> {
    return stopDeployment(this.#actions, principal, deploymentId);
  }

  cancel(principal: Principal, deploymentId: string): Promise<{ message: string }> {
    return cancelBuild(this.#actions, principal, deploymentId);
  }

  restart(principal: Principal, deploymentId: string): Promise<{ message: string }> {
    return restartDeployment(this.#actions, principal, deploymentId);
  }

  rollback(principal: Principal, deploymentId: string, buildId: string): Promise<{ message: string }> {
    return rollbackDeployment(this.#actions, principal, deploymentId, buildId);
  }

  remove(principal: Principal, deploymentId: string, options?: { action?: DeploymentAction }): Promise<void> {
    return removeDeployment(this.#actions, principal, deploymentId, options);
  }

  registered(deployment: { id: string; subdomain: string }): void {
    publishRoute(this.#parts, deployment.subdomain, deployment.id, 'starting');
  }

  async metrics(principal: Principal, deploymentId: string, signal?: AbortSignal): Promise<DeploymentMetrics> {
    const dep = await ownedDeployment(this.#parts, principal, deploymentId, 'read');
    const live = await liveBuildOf(this.#parts, dep);
    const stats = live?.container_id == null ? [] : await this.#parts.runtime.releaseStats(live.container_id, signal);
    if (stats.length === 0) throw new DomainError('invalid_state', `${dep.subdomain} has no running container`);
    return summedMetrics(stats);
  }

  services(principal: Principal, deploymentId: string): Promise<ReleaseServiceView[]> {
    return listReleaseServices(this.#parts, principal, deploymentId);
  }

  async metricsHistory(principal: Principal, deploymentId: string): Promise<MetricsPoint[]> {
    const dep = await ownedDeployment(this.#parts, principal, deploymentId, 'read');
    return this.#parts.deps.metricsHistory?.points(dep.id) ?? [];
  }

  async runtimeLogs(
    principal: Principal,
    deploymentId: string,
    options: { tail: number | undefined; follow: boolean; signal: AbortSignal; service?: string | undefined },
  ): Promise<AsyncIterable<string>> {
    const { deps, runtime } = this.#parts;
    const dep = await ownedDeployment(this.#parts, principal, deploymentId, 'read');
    const live = await liveBuildOf(this.#parts, dep);
    if (live?.container_id == null) throw new DomainError('invalid_state', 'no container has run for this deployment yet');
    checkLogService(live.release_set, options.service);
    const lines = runtime.releaseLogs(live.container_id, { tail: options.tail, follow: options.follow, signal: options.signal, service: options.service });
    return redactedStream(await outputRedactor(deps.configs, runtime, live.id, dep.id), lines);
  }

  /** One look at every live release now (the leader's background task 'refreshing live container ports' each interval): routes follow where replicas serve. */
  refreshLiveRoutes(): Promise<void> {
    const { deps, runtime, locks, recovery } = this.#parts;
    return refreshLivePorts({ ...deps, runtime }, {
      runLocked: (id, fn) => locks.run(id, fn, AbortSignal.timeout(1000)),
      isRecovering: (id) => recovery.has(id),
      recover: (stopped) => this.#background.track(this.recoverReleases(stopped)),
    });
  }

  /** Starts the releases in `pending` again (see ReleaseRecovery.recover). */
  recoverReleases(pending: readonly PendingRelease[]): Promise<void> {
    return this.#parts.recovery.recover(pending);
  }

  /**
   * Start-up recovery behind the listener: the builds a crash interrupted are queued again, the
   * plan's pending releases are started again, then the strays it listed are removed. Runs in the
   * background (close() ends it).
   */
  recoverInBackground(plan: RecoveryPlan): void {
    this.#background.track(this.requeueInterrupted(plan.interrupted));
    this.#background.track(
      (plan.freeVolumes?.() ?? Promise.resolve()).then(() => this.recoverReleases(plan.pending)).then(async () => {
        if (this.#closing.signal.aborted) return;
        if (plan.pending.length > 0) this.#parts.deps.log('info', `recovery done: ${plan.pending.length} release(s) handled`);
        await plan.sweep?.();
      }),
    );
  }

  /** Queues again the builds this instance was running when it went down: built again from the start, their logs say so. */
  requeueInterrupted(interrupted: RecoveryPlan['interrupted']): Promise<void> {
    return this.#builds.requeueInterrupted(interrupted);
  }

  /**
   * Takes over a build whose instance (`from`) was lost (decisions §15): the same build record, now
   * this instance's, queued again; whichever instance takes it builds it again from the start, and
   * its log says so. False when it ended or another instance took it first.
   */
  takeOver(deploymentId: string, buildId: string, from: string): Promise<boolean> {
    return this.#builds.takeOver(deploymentId, buildId, from);
  }

  /** Builds this instance runs now (the instance registry's `builds_running`). */
  get buildsRunning(): number {
    return this.#builds.running;
  }

  /** Whether this instance's recovery is deciding the deployment's route now. */
  isRecovering(deploymentId: string): boolean {
    return this.#parts.recovery.has(deploymentId);
  }

  /** How many releases recovery is still to start (for /healthz). */
  get recoveringCount(): number {
    return this.#parts.recovery.size;
  }

  /** Waits for every background task (old containers being retired). */
  settle(): Promise<void> {
    return this.#background.settle();
  }

  /**
   * Cancels every build in flight and gives up recovery (server shutdown). Builds waiting only in
   * this process's queue are cancelled too; those in the shared queue wait for another instance.
   */
  async close(): Promise<void> {
    this.#closing.abort();
    await this.#builds.close();
    await this.settle();
  }
}
