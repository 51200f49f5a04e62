// The deployment lifecycle on the engine: deploy (build + release), stop, restart, rollback, delete.
import crypto from 'node:crypto';
import fsp from 'node:fs/promises';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { BuildRow } from '../domain/builds.js';
import { assertUuid, type DeploymentRow } from '../domain/deployments.js';
import { DomainError } from '../core/errors.js';
import type { DeployOptions, DeploymentMetrics, DeploymentOperations } from '../domain/operations.js';
import type { MetricsHistory, MetricsPoint } from '../domain/metrics-history.js';
import type { Principal } from '../core/principal.js';
import { authorizeDeployment, type DeploymentAction } from '../domain/policy.js';
import { deploymentRecord } from '../domain/audit.js';
import type { Upstream } from '../core/upstream.js';
import type { DataPlane } from '../proxy/data-plane.js';
import type { DeployFailure } from '../proxy/routing-table.js';
import type { ContainerEngine } from '../runtime/engine.js';
import type { AppRuntime } from '../runtime/app-runtime.js';
import { DockerRuntime } from '../runtime/docker/docker-runtime.js';
import type { SourceStore } from '../source/source-store.js';
import type { BuildLogs } from './build-logs.js';
import type { Release } from './concurrency.js';
import { FairBuildSlots, type BuildSlots } from './fair-build-slots.js';
import { LocalBuildQueue, type BuildQueue, type TakenBuild } from './build-queue.js';
import { withDeploymentLock, type Coordination } from './coordination.js';
import { memoryCoordination } from './memory-coordination.js';
import type { QuotaGuard } from '../domain/quotas.js';
import { AnsiStripper } from '../core/ansi.js';
import { describeFailure, failedStep, isExpectedFailure, summarizeFailure } from './failures.js';
import { buildReleaseImage, resolveSource, type RestoreUpload } from './image-build.js';
import type { LifecycleSettings } from './lifecycle-settings.js';
import { summedMetrics } from './summed-metrics.js';
import { pruneImages, removeDeploymentObjects } from './images.js';
import { refreshLivePorts } from './live-ports.js';
import { routeOf } from './route-sync.js';
import type { PendingRelease, RecoveryPlan } from './reconcile.js';
import { ReleaseRecovery } from './release-recovery.js';
import type { DeploymentStore } from './deployment-store.js';
import { ReleaseError, releaseTarget } from '../runtime/release.js';
import { transition, type DeploymentEvent, type DeploymentStatus } from './state-table.js';
import type { AppConfigStore, EnvVar } from '../domain/app-config.js';
import { redactError, redactedStream, redactorFor, type SecretRedactor } from '../secrets/redact.js';

export type { LifecycleSettings } from './lifecycle-settings.js';

export interface LifecycleDeps {
  readonly store: DeploymentStore;
  /** Deployments' variables; each build records the configuration it is released with. */
  readonly configs: AppConfigStore;
  /** Builds images (and holds them): the engine Slipway runs beside. */
  readonly engine: ContainerEngine;
  /** Runs releases; the docker runtime over `engine` when not given. */
  readonly runtime?: AppRuntime;
  readonly dataPlane: DataPlane;
  readonly sources: SourceStore;
  readonly buildLogs: BuildLogs;
  readonly settings: LifecycleSettings;
  readonly log: (level: 'info' | 'warn' | 'error', msg: string, detail?: object) => void;
  /** Told when a build ends, with its outcome and how long it took (the build metrics). */
  readonly onBuildEnd?: (outcome: 'succeeded' | 'failed' | 'cancelled', seconds: number) => void;
  /** Per-user quotas: a deploy beyond the owner's `concurrent_builds` → 429 (none: no limit). */
  readonly quotas?: Pick<QuotaGuard, 'assertRoom'>;
  /** Where builds wait for a slot with one instance (default: {@link FairBuildSlots} of `settings.maxConcurrentBuilds`). */
  readonly buildSlots?: BuildSlots;
  /** The build queue (default: this process's, over `buildSlots`); several instances share one in the database. */
  readonly buildQueue?: BuildQueue;
  /** Brings an upload another instance received onto this one's disk (several instances); false when not kept. */
  readonly restoreUpload?: RestoreUpload;
  /** Per-deployment locks across instances (default: in memory, one instance). */
  readonly coordination?: Coordination;
  /** The sampled resource use of the last hour (default: none kept). */
  readonly metricsHistory?: MetricsHistory;
}

interface InflightBuild {
  readonly buildId: string;
  readonly controller: AbortController;
  readonly done: Promise<void>;
}

/** Seconds an old container gets to finish its in-flight requests, then to stop, after a switch. */
const DRAIN_MS = 30_000;
const STOP_SECONDS = 10;

/** Seconds since `since`, with one decimal. */
function seconds(since: number): string {
  return ((Date.now() - since) / 1000).toFixed(1);
}

/** How a pipeline starts: a build taken from the queue (holding a slot), or one that fails at once. */
interface PipelineStart {
  readonly taken?: TakenBuild;
  readonly unreadable?: string;
}

class Cancelled extends Error {
  override readonly name = 'Cancelled';
}



/**
 * Runs deployments on the engine. Operations on one deployment are serialized by a per-deployment
 * lock; a build runs outside it (so it can be cancelled) and takes the lock only to switch traffic.
 */
export class DeploymentLifecycle implements DeploymentOperations {
  readonly #deps: LifecycleDeps;
  readonly #runtime: AppRuntime;
  readonly #coordination: Coordination;
  /** Per-deployment locks, held across every instance sharing the database. */
  readonly #locks: {
    run<T>(deploymentId: string, fn: () => Promise<T>, signal?: AbortSignal): Promise<T>;
    acquire(deploymentId: string, signal?: AbortSignal): Promise<Release>;
  };
  /** Where recorded builds wait for a slot, shared fairly across users (and instances). */
  readonly #queue: BuildQueue;
  /** Whether the queue is being looked at now, and whether to look again once done. */
  #dispatching = false;
  #dispatchAgain = false;
  /** The dispatcher's current run (close waits for it: a build it is taking must not start after). */
  #dispatchRun: Promise<void> = Promise.resolve();
  readonly #inflight = new Map<string, InflightBuild>();
  readonly #background = new Set<Promise<unknown>>();
  /** Releases waiting to be started again (server start, containers found stopped). */
  readonly #recovery: ReleaseRecovery;
  /** Aborted by close(): recovery in progress gives up. */
  readonly #closing = new AbortController();

  constructor(deps: LifecycleDeps) {
    this.#deps = deps;
    this.#runtime = deps.runtime ?? new DockerRuntime(deps.engine);
    const coordination = deps.coordination ?? memoryCoordination();
    this.#coordination = coordination;
    // A cancel asked on another instance of a build running here (`c:<build id> <reason>`).
    coordination.onAnnounce((message) => {
      const match = message === null ? null : /^\S+ c:(\S+) (.*)$/s.exec(message);
      if (match === null) return;
      for (const inflight of this.#inflight.values()) if (inflight.buildId === match[1]) inflight.controller.abort(new Cancelled(match[2] ?? 'cancelled'));
    });
    this.#locks = {
      run: (deploymentId, fn, signal) => withDeploymentLock(coordination, deploymentId, fn, signal),
      acquire: (deploymentId, signal) => coordination.lockDeployment(deploymentId, signal),
    };
    this.#queue = deps.buildQueue ?? new LocalBuildQueue(deps.buildSlots ?? new FairBuildSlots(deps.settings.maxConcurrentBuilds));
    this.#queue.onChange(() => this.#dispatch());
    this.#recovery = new ReleaseRecovery({ ...deps, runtime: this.#runtime, locks: this.#locks, closing: this.#closing.signal });
  }

  async deploy(principal: Principal, deploymentId: string, options: DeployOptions): Promise<BuildRow> {
    const initial = await this.#owned(principal, deploymentId, 'change');
    // Builds in progress of the owner's other deployments (this one's is cancelled by the deploy).
    await this.#deps.quotas?.assertRoom({ ...principal, userId: initial.user_id }, 'concurrent_builds', deploymentId);
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
      const resolved = await resolveSource(initial, this.#deps.settings);
      commitSha = resolved.sha;
      sourceRef = resolved.branch;
      unreadable = resolved.unreadable;
    }

    const build = await this.#locks.run(deploymentId, async () => {
      await this.#cancelInflight(deploymentId, 'superseded by a newer deploy');
      const current = await this.#owned(principal, deploymentId, 'change');
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
      const serving = await this.#isServing(current);
      await this.#deps.store.startBuild(values, this.#next(current, 'deploy').to, deploymentRecord(principal, current, 'deployment.deploy', 'build', row.id));
      // The configuration of this build is fixed now: later changes wait for the next deploy or restart.
      const vars = await this.#deps.configs.recordForBuild(deploymentId, row.id);
      if (!serving) this.#route(current.subdomain, deploymentId, 'starting');
      // A source that cannot be read fails at once; any other build waits in the queue for a slot.
      if (unreadable !== undefined) this.#startPipeline(current, row, vars, { unreadable });
      else await this.#queue.enqueue({ buildId: row.id, deploymentId, userId: current.user_id });
      return row;
    });
    this.#dispatch();

    if (!options.wait) return build;
    await this.#waitForBuild(deploymentId, build.id, options.signal);
    const finished = (await this.#deps.store.build(deploymentId, build.id)) ?? build;
    if (finished.status === 'failed') throw new DomainError('build_failed', finished.error ?? 'the build failed');
    return finished;
  }

  async stop(principal: Principal, deploymentId: string): Promise<{ message: string }> {
    this.#interruptRecovery(deploymentId);
    return this.#locks.run(deploymentId, async () => {
      const dep = await this.#owned(principal, deploymentId, 'change');
      const live = await this.#liveBuild(dep);
      const upstreams = live === undefined ? [] : await this.#servingUpstreams(dep);
      const serving = this.#inflight.has(deploymentId) || upstreams.length > 0;
      const next = transition(dep.status, 'stop', { serving, restartable: false });
      if (next.noop) return { message: `deployment ${dep.name} is already stopped` };
      this.#recovery.forget(deploymentId);
      await this.#cancelInflight(deploymentId, 'cancelled by stop');
      if (live?.container_id != null) {
        await Promise.all(upstreams.map((upstream) => this.#deps.dataPlane.drain(upstream, 5_000)));
        await this.#runtime.stopRelease(live.container_id, STOP_SECONDS);
        // The stopped release serves no more: every instance reads that from the store.
        await this.#deps.store.moveUpstreams(live.id, live.container_id, []);
      }
      await this.#deps.store.setStatus(deploymentId, next.to, deploymentRecord(principal, dep, 'deployment.stop'));
      this.#route(dep.subdomain, deploymentId, 'stopped');
      return { message: `deployment ${dep.name} stopped` };
    });
  }

  async cancel(principal: Principal, deploymentId: string): Promise<{ message: string }> {
    return this.#locks.run(deploymentId, async () => {
      const dep = await this.#owned(principal, deploymentId, 'change');
      // The build may run on another instance (decisions §15: cancel works from any instance).
      const buildId = this.#inflight.get(deploymentId)?.buildId ?? (await this.#deps.store.buildInProgress(deploymentId))?.id;
      if (buildId === undefined) throw new DomainError('invalid_state', `no build of ${dep.name} is in progress`);
      await this.#cancelInflight(deploymentId, 'cancelled by the user');
      // What served before the build serves on; with nothing serving, the app is stopped.
      const serving = await this.#isServing(dep);
      await this.#deps.store.setStatus(deploymentId, transition(dep.status, 'cancel', { serving, restartable: false }).to, deploymentRecord(principal, dep, 'deployment.cancel', 'build', buildId));
      if (!serving) this.#route(dep.subdomain, deploymentId, 'stopped');
      return {
        message: `build ${buildId.slice(0, 8)} of ${dep.name} cancelled${serving ? '; the live release keeps serving' : ''}`,
      };
    });
  }

  async restart(principal: Principal, deploymentId: string): Promise<{ message: string }> {
    this.#interruptRecovery(deploymentId);
    return this.#locks.run(deploymentId, async () => {
      const dep = await this.#owned(principal, deploymentId, 'change');
      const live = dep.status === 'pending' || dep.status === 'building' ? undefined : await this.#liveBuild(dep);
      const restartable = live !== undefined && live.image_id !== null && (await this.#deps.engine.imageExists(live.image_id));
      const next = transition(dep.status, 'restart', { serving: false, restartable });
      if (live === undefined) throw new DomainError('invalid_state', 'no succeeded build to restart; deploy first');
      // A restart runs the current configuration, which becomes the one this build was released with.
      const vars = await this.#deps.configs.current(dep.id);
      this.#recovery.forget(deploymentId);
      await this.#release(dep, live, vars, next.to, AbortSignal.timeout(this.#deps.settings.startupTimeoutMs + 30_000));
      await this.#deps.configs.setBuildConfig(live.id, vars, deploymentRecord(principal, dep, 'deployment.restart'));
      return { message: `deployment ${dep.name} restarted (build ${live.id})` };
    });
  }

  async rollback(principal: Principal, deploymentId: string, buildId: string): Promise<{ message: string }> {
    this.#interruptRecovery(deploymentId);
    return this.#locks.run(deploymentId, async () => {
      const dep = await this.#owned(principal, deploymentId, 'change');
      // The state table first: a deployment that was never deployed has no build to roll back to, whatever id is named.
      const next = this.#next(dep, 'rollback');
      assertUuid(buildId, 'build');
      const target = await this.#deps.store.build(dep.id, buildId);
      if (target === undefined) throw new DomainError('not_found', 'build not found');
      if (target.status !== 'succeeded') throw new DomainError('invalid_state', `build ${buildId} did not succeed (${target.status})`);
      if (target.image_id === null || !(await this.#deps.engine.imageExists(target.image_id))) {
        throw new DomainError('invalid_state', `the image of build ${buildId} has been pruned`);
      }
      await this.#cancelInflight(deploymentId, 'cancelled by rollback');
      this.#recovery.forget(deploymentId);
      // The build runs with the configuration it was released with, which becomes current again
      // (a build from before configuration existed keeps the current one).
      const vars = (await this.#deps.configs.buildConfig(target.id)) ?? (await this.#deps.configs.current(dep.id));
      await this.#release(dep, target, vars, next.to, AbortSignal.timeout(this.#deps.settings.startupTimeoutMs + 30_000));
      await this.#deps.configs.replace(dep.id, vars, deploymentRecord(principal, dep, 'deployment.rollback', 'build', target.id));
      return { message: `rolled back to build ${target.id}` };
    });
  }

  async remove(principal: Principal, deploymentId: string, options?: { action?: DeploymentAction }): Promise<void> {
    // A deployment's previews (decisions §17) go first, each removed as the deployment it is.
    const { store } = this.#deps;
    const action = options?.action ?? 'manage';
    const dep = await this.#owned(principal, deploymentId, action);
    for (const previewId of await store.previewIds(dep.id)) await this.#removeOne(principal, previewId, action);
    await this.#removeOne(principal, deploymentId, action);
  }

  async #removeOne(principal: Principal, deploymentId: string, action: DeploymentAction): Promise<void> {
    const { store, sources, buildLogs, dataPlane } = this.#deps;
    this.#interruptRecovery(deploymentId);
    await this.#locks.run(deploymentId, async () => {
      const dep = await this.#owned(principal, deploymentId, action);
      await this.#cancelInflight(deploymentId, 'cancelled: the deployment was deleted');
      this.#recovery.forget(deploymentId);
      const live = await this.#liveBuild(dep);
      await store.remove(dep.id, deploymentRecord(principal, dep, dep.parent_id == null ? 'deployment.delete' : 'preview.delete'));
      dataPlane.withdraw(dep.subdomain);
      // The runtime's own objects first (under swarm the deployment's service, which no engine label finds).
      if (live?.container_id != null) {
        await this.#runtime.removeRelease(live.container_id).catch((err: unknown) => this.#deps.log('warn', 'removing the release of a deleted deployment failed', { err }));
      }
      await this.#runtime.removeDeployment?.(this.#deps.settings.instanceId, dep.id).catch((err: unknown) => this.#deps.log('warn', "removing a deleted deployment's runtime objects failed", { err }));
      await removeDeploymentObjects(this.#deps.engine, this.#deps.settings.instanceId, dep.id);
      await sources.removeDeployment(dep.id);
      await buildLogs.removeDeployment(dep.id);
    });
  }

  registered(deployment: { id: string; subdomain: string }): void {
    this.#route(deployment.subdomain, deployment.id, 'starting');
  }

  async metrics(principal: Principal, deploymentId: string, signal?: AbortSignal): Promise<DeploymentMetrics> {
    const dep = await this.#owned(principal, deploymentId, 'read');
    const live = await this.#liveBuild(dep);
    const stats = live?.container_id == null ? [] : await this.#runtime.releaseStats(live.container_id, signal);
    if (stats.length === 0) throw new DomainError('invalid_state', `${dep.subdomain} has no running container`);
    return summedMetrics(stats);
  }

  async metricsHistory(principal: Principal, deploymentId: string): Promise<MetricsPoint[]> {
    const dep = await this.#owned(principal, deploymentId, 'read');
    return this.#deps.metricsHistory?.points(dep.id) ?? [];
  }

  async runtimeLogs(
    principal: Principal,
    deploymentId: string,
    options: { tail: number | undefined; follow: boolean; signal: AbortSignal },
  ): Promise<AsyncIterable<string>> {
    const dep = await this.#owned(principal, deploymentId, 'read');
    const live = await this.#liveBuild(dep);
    if (live?.container_id == null) throw new DomainError('invalid_state', 'no container has run for this deployment yet');
    const lines = this.#runtime.releaseLogs(live.container_id, { tail: options.tail, follow: options.follow, signal: options.signal });
    // Secret values are write-only: the app printing one does not make it readable here.
    const released = (await this.#deps.configs.buildConfig(live.id)) ?? [];
    const current = await this.#deps.configs.current(dep.id);
    return redactedStream(redactorFor([...released, ...current]), lines);
  }

  /**
   * Keeps routes right when the engine restarts a crashed container (restart policy): it comes
   * back on a new host port, which is read and routed every `intervalMs` while `when()` holds. Returns a stop function.
   */
  watchLiveContainers(intervalMs: number, when: () => boolean = () => true): () => void {
    let running = false;
    const timer = setInterval(() => {
      // Several instances: only the leader watches (`when`).
      if (running || !when()) return;
      running = true;
      void this.refreshLiveRoutes()
        .catch((err: unknown) => this.#deps.log('warn', 'refreshing live container ports failed', { err }))
        .finally(() => (running = false));
    }, intervalMs);
    timer.unref();
    return () => clearInterval(timer);
  }

  /** One look at every live release now (what the watcher does each interval): routes follow where replicas serve. */
  refreshLiveRoutes(): Promise<void> {
    return refreshLivePorts({ ...this.#deps, runtime: this.#runtime }, {
      runLocked: (id, fn) => this.#locks.run(id, fn, AbortSignal.timeout(1000)),
      isRecovering: (id) => this.#recovery.has(id),
      recover: (stopped) => this.#track(this.recoverReleases(stopped)),
    });
  }

  /** Starts the releases in `pending` again (see ReleaseRecovery.recover). */
  recoverReleases(pending: readonly PendingRelease[]): Promise<void> {
    return this.#recovery.recover(pending);
  }

  /**
   * Start-up recovery behind the listener: the plan's pending releases are started again, then the
   * strays it listed are removed. Runs in the background (close() ends it).
   */
  recoverInBackground(plan: RecoveryPlan): void {
    this.#track(
      this.recoverReleases(plan.pending).then(async () => {
        if (this.#closing.signal.aborted) return;
        if (plan.pending.length > 0) this.#deps.log('info', `recovery done: ${plan.pending.length} release(s) handled`);
        await plan.sweep?.();
      }),
    );
  }

  /** An operation that may decide what the deployment serves is about to wait for its lock: recovery's attempt gives up (see ReleaseRecovery.interrupt). */
  #interruptRecovery(deploymentId: string): void {
    this.#recovery.interrupt(deploymentId);
  }

  /**
   * Takes over a build whose instance (`from`) was lost (decisions §15): the same build record, now
   * this instance's, queued again; whichever instance takes it builds it again from the start, and
   * its log says so. False when it ended or another instance took it first.
   */
  async takeOver(deploymentId: string, buildId: string, from: string): Promise<boolean> {
    const { store } = this.#deps;
    const queued = await this.#locks.run(deploymentId, async () => {
      if (this.#inflight.has(deploymentId) || !(await store.claimBuild(buildId, from))) return false;
      const dep = await store.deployment(deploymentId);
      const build = await store.build(deploymentId, buildId);
      if (dep === undefined || build === undefined || build.status !== 'building') return false;
      this.#deps.log('warn', `took over build ${build.id.slice(0, 8)} of ${dep.name} from the lost instance ${from}; it is queued again`);
      await this.#queue.enqueue({ buildId, deploymentId, userId: dep.user_id, lostFrom: from });
      return true;
    });
    if (queued) this.#dispatch();
    return queued;
  }

  /** Builds this instance runs now (the instance registry's `builds_running`). */
  get buildsRunning(): number {
    return this.#inflight.size;
  }

  /** Whether this instance's recovery is deciding the deployment's route now. */
  isRecovering(deploymentId: string): boolean {
    return this.#recovery.has(deploymentId);
  }

  /** How many releases recovery is still to start (for /healthz). */
  get recoveringCount(): number {
    return this.#recovery.size;
  }

  /** Waits for every background task (old containers being retired). */
  async settle(): Promise<void> {
    while (this.#background.size > 0) await Promise.allSettled([...this.#background]);
  }

  /**
   * Cancels every build in flight and gives up recovery (server shutdown). Builds waiting only in
   * this process's queue are cancelled too; those in the shared queue wait for another instance.
   */
  async close(): Promise<void> {
    this.#closing.abort();
    // A take in flight ends first: what it took is started (and cancelled below) or given back.
    await this.#dispatchRun;
    const left = await this.#queue.close();
    await Promise.all([...this.#inflight.keys()].map((id) => this.#cancelInflight(id, 'interrupted by a server shutdown')));
    for (const build of left) await this.#endQueued(build.deploymentId, build.buildId, 'interrupted by a server shutdown');
    await this.settle();
  }

  // ---- internals ----

  /** A deployment the principal may `action` (the policy): missing, not a UUID, another's → 404; a role too low → 403. */
  async #owned(principal: Principal, deploymentId: string, action: DeploymentAction): Promise<DeploymentRow> {
    assertUuid(deploymentId, 'deployment');
    return authorizeDeployment(principal, await this.#deps.store.deployment(deploymentId), action);
  }

  /** The state table's answer for an event whose cells need no facts (deploy, rollback, a build's end). */
  #next(dep: DeploymentRow, event: DeploymentEvent): { to: DeploymentStatus; noop: boolean } {
    return transition(dep.status, event, { serving: false, restartable: false });
  }

  #route(subdomain: string, deploymentId: string, state: 'stopped' | 'failed' | 'starting', failure?: DeployFailure): void {
    this.#deps.dataPlane.publish(subdomain, { kind: 'app', deploymentId, state, ...(failure === undefined ? {} : { failure }) });
  }

  async #liveBuild(dep: DeploymentRow): Promise<BuildRow | undefined> {
    if (dep.live_build_id === null) return undefined;
    return this.#deps.store.build(dep.id, dep.live_build_id);
  }

  /** Whether a release serves this deployment's traffic now (read from the store, so every instance answers the same). */
  async #isServing(dep: DeploymentRow): Promise<boolean> {
    return (await this.#servingUpstreams(dep)).length > 0;
  }

  /**
   * Where every edge sends this deployment's traffic now, as the store has it (its status and its
   * live release's upstreams: the route each instance publishes), empty when it is not served. A
   * release this instance's recovery is starting again does not serve yet (its route is `starting`).
   */
  async #servingUpstreams(dep: DeploymentRow): Promise<readonly Upstream[]> {
    if (this.#recovery.has(dep.id)) return [];
    const [fact] = await this.#deps.store.routeFacts(dep.id);
    if (fact === undefined) return [];
    const route = routeOf(fact);
    return route.kind === 'app' && route.state === 'live' ? route.upstreams : [];
  }

  /** Aborts the deployment's build in flight (if any) and waits until it has wound down. */
  async #cancelInflight(deploymentId: string, reason: string): Promise<void> {
    const inflight = this.#inflight.get(deploymentId);
    if (inflight === undefined) {
      // Still waiting in the queue (taken by no instance): out of it, and ended here.
      const withdrawn = await this.#queue.withdraw(deploymentId);
      for (const buildId of withdrawn) await this.#endQueued(deploymentId, buildId, reason);
      if (withdrawn.length > 0) return;
      return this.#cancelElsewhere(deploymentId, reason);
    }
    inflight.controller.abort(new Cancelled(reason));
    await inflight.done;
  }

  /** Ends a build that was withdrawn from the queue before any instance took it. */
  async #endQueued(deploymentId: string, buildId: string, reason: string): Promise<void> {
    const { store, buildLogs } = this.#deps;
    buildLogs.append(deploymentId, buildId, `==> cancelled: ${reason}\n`);
    await store.finishBuild(buildId, 'cancelled', reason);
    await buildLogs.close(buildId);
    this.#deps.onBuildEnd?.('cancelled', 0);
  }

  /**
   * Takes builds from the queue while this instance has a free slot, and runs each: one look at a
   * time, again after any change told meanwhile (a build queued, a slot freed, on any instance).
   */
  #dispatch(): void {
    if (this.#dispatching) {
      this.#dispatchAgain = true;
      return;
    }
    this.#dispatching = true;
    this.#dispatchRun = (async () => {
      try {
        do {
          this.#dispatchAgain = false;
          for (;;) {
            if (this.#closing.signal.aborted) return;
            const taken = await this.#queue.take();
            if (taken === undefined) break;
            await this.#runTaken(taken);
          }
        } while (this.#dispatchAgain);
      } catch (err) {
        // The database unreachable: the next change, or the queue's poll, looks again.
        this.#deps.log('warn', 'taking the next build from the queue failed', { err });
      } finally {
        this.#dispatching = false;
      }
    })();
  }

  /** Starts a build taken from the queue (it holds a slot), unless it ended or went meanwhile. */
  async #runTaken(taken: TakenBuild): Promise<void> {
    const { store, configs } = this.#deps;
    try {
      // Taken while the server began to stop: queued again, as if never taken (another instance takes
      // it; with one instance, close ends it with the others still waiting).
      if (this.#closing.signal.aborted) {
        const { buildId, deploymentId, userId, lostFrom } = taken;
        await this.#queue.enqueue({ buildId, deploymentId, userId, ...(lostFrom === undefined ? {} : { lostFrom }) });
        return;
      }
      const dep = await store.deployment(taken.deploymentId);
      const build = dep === undefined ? undefined : await store.build(dep.id, taken.buildId);
      if (dep === undefined || build === undefined || build.status !== 'building') {
        await this.#queue.release(taken.buildId);
        return;
      }
      const vars = (await configs.buildConfig(build.id)) ?? (await configs.current(dep.id));
      this.#startPipeline(dep, build, vars, { taken });
    } catch (err) {
      await this.#queue.release(taken.buildId).catch(() => undefined);
      throw err;
    }
  }

  /**
   * Cancels the deployment's build running on another instance: asked over the coordination feed,
   * then waited for (the caller holds the deployment's lock, which that build's switch waits for,
   * abortably). An instance that does not answer within 30 s (lost) has its build ended here.
   */
  async #cancelElsewhere(deploymentId: string, reason: string): Promise<void> {
    const { store } = this.#deps;
    const remote = await store.buildInProgress(deploymentId);
    if (remote === undefined) return;
    const deadline = Date.now() + 30_000;
    let asked = 0;
    while (Date.now() < deadline) {
      // Asked again now and then: an instance that took the build from the queue an instant ago
      // may not have had it in flight when the first ask came.
      if (Date.now() - asked >= 2000) {
        this.#coordination.announce(`- c:${remote.id} ${reason}`);
        asked = Date.now();
      }
      await sleep(100);
      if ((await store.build(deploymentId, remote.id))?.status !== 'building') return;
    }
    await store.finishBuild(remote.id, 'cancelled', `${reason} (its instance did not answer)`);
  }

  /** Waits until the build has ended, wherever it runs (here, another instance, or still in the queue), or `signal` aborts. */
  async #waitForBuild(deploymentId: string, buildId: string, signal?: AbortSignal): Promise<void> {
    const aborted = signal === undefined ? undefined : new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
    for (;;) {
      if (signal?.aborted === true) return;
      const inflight = this.#inflight.get(deploymentId);
      if (inflight?.buildId === buildId) await Promise.race(aborted === undefined ? [inflight.done] : [inflight.done, aborted]);
      else {
        if ((await this.#deps.store.build(deploymentId, buildId))?.status !== 'building') return;
        await sleep(250, undefined, signal === undefined ? undefined : { signal }).catch(() => undefined);
      }
    }
  }

  #startPipeline(dep: DeploymentRow, build: BuildRow, vars: readonly EnvVar[], start: PipelineStart): void {
    const controller = new AbortController();
    const done = this.#runPipeline(dep, build, vars, controller.signal, start)
      // Never rejects: an outcome that could not be recorded (the database gone) is logged.
      .catch((err: unknown) => this.#deps.log('error', `build ${build.id.slice(0, 8)} ended without its outcome recorded`, { err }))
      .finally(() => {
        if (this.#inflight.get(dep.id)?.buildId === build.id) this.#inflight.delete(dep.id);
      });
    this.#inflight.set(dep.id, { buildId: build.id, controller, done });
  }

  /** Build → image → healthy container → traffic switch. Never throws: the outcome goes to the database. */
  async #runPipeline(dep: DeploymentRow, build: BuildRow, vars: readonly EnvVar[], cancel: AbortSignal, start: PipelineStart): Promise<void> {
    const { engine, buildLogs, settings, store } = this.#deps;
    const { taken, unreadable } = start;
    // The slot a build taken from the queue holds: freed once its image is built (or it ended).
    let slotHeld = taken !== undefined;
    const releaseSlot = (): void => {
      if (!slotHeld || taken === undefined) return;
      slotHeld = false;
      void this.#queue.release(taken.buildId).catch((err: unknown) => this.#deps.log('warn', 'freeing a build slot failed', { err }));
    };
    // Queued by another instance (or by a lost one): it is this instance's build from now on.
    if (taken?.queuedBy !== undefined && !(await store.claimBuild(build.id, taken.queuedBy).catch(() => false))) {
      releaseSlot();
      return;
    }
    // Output that arrives after the log is closed (an engine stream still draining after a cancel)
    // must not reopen it: a reopened log would never be closed, and its followers never finish.
    let logOpen = true;
    // App output and engine errors can hold the deployment's secrets: they are redacted before they are stored.
    const redactor = redactorFor(vars);
    const redacted = redactor.stream();
    // Stored without terminal colours (the builder's own included): the dashboard and a piped CLI show plain text.
    const plain = new AnsiStripper();
    const log = (text: string): void => {
      if (logOpen) buildLogs.append(dep.id, build.id, redacted.push(plain.push(text)));
    };
    const workDir = path.join(settings.dataDir, 'work', build.id);
    let image: string | undefined;
    const startedAt = Date.now();
    const what = `deploy of ${dep.name} (${dep.subdomain}, build ${build.id.slice(0, 8)})`;
    this.#deps.log('info', `${what} started`);
    try {
      if (taken?.lostFrom !== undefined) log(`==> the instance running this build (${taken.lostFrom}) was lost; instance ${taken.takenBy ?? 'this'} builds it again from the start\n`);
      log(`==> build ${build.id} of ${dep.name} (${dep.source_type} ${build.commit_sha || 'unresolved'})\n`);
      if (unreadable !== undefined) throw new DomainError('build_failed', unreadable);
      cancel.throwIfAborted();
      try {
        image = await buildReleaseImage({ engine, settings, restoreUpload: this.#deps.restoreUpload, sources: this.#deps.sources }, dep, build, vars, workDir, cancel, log);
        await store.setImage(build.id, image);
      } finally {
        releaseSlot();
        await fsp.rm(workDir, { recursive: true, force: true });
      }

      const container = await this.#runtime.startRelease(releaseTarget(dep, { id: build.id, image, vars }, settings), {
        timeoutMs: settings.startupTimeoutMs,
        signal: cancel,
        onOutput: log,
      });
      // Switch traffic under the deployment's lock; a canceller holding the lock aborts this wait.
      // Recovery of the release this build replaces is moot: it does not keep the switch waiting.
      this.#interruptRecovery(dep.id);
      let releaseLock: () => void;
      try {
        releaseLock = await this.#locks.acquire(dep.id, cancel);
      } catch (err) {
        await this.#runtime.removeRelease(container.id).catch(() => undefined);
        throw err;
      }
      try {
        const current = await store.deployment(dep.id);
        if (current === undefined || cancel.aborted) {
          await this.#runtime.removeRelease(container.id).catch(() => undefined);
          throw cancel.reason ?? new Cancelled('the deployment was deleted');
        }
        await this.#switchTo(current, build.id, container.id, container.upstreams, this.#next(current, 'build_succeeded').to);
      } finally {
        releaseLock();
      }
      log(`==> live at build ${build.id}\n`);
      this.#deps.log('info', `${what} succeeded in ${seconds(startedAt)} s`);
      this.#deps.onBuildEnd?.('succeeded', (Date.now() - startedAt) / 1000);
    } catch (err) {
      await this.#recordFailure(dep, build, image, err, cancel, log, redactor);
      const verb = cancel.aborted ? 'cancelled' : 'failed';
      this.#deps.onBuildEnd?.(verb, (Date.now() - startedAt) / 1000);
      this.#deps.log('info', `${what} ${verb} after ${seconds(startedAt)} s: ${summarizeFailure(err, cancel, this.#deps.settings.buildTimeoutMs)}`);
    } finally {
      releaseSlot();
      const rest = redacted.flush();
      if (rest !== '') buildLogs.append(dep.id, build.id, rest);
      logOpen = false;
      await buildLogs.close(build.id);
    }
  }

  async #recordFailure(
    dep: DeploymentRow,
    build: BuildRow,
    image: string | undefined,
    err: unknown,
    cancel: AbortSignal,
    log: (text: string) => void,
    redactor: SecretRedactor,
  ): Promise<void> {
    const { store } = this.#deps;
    const cancelled = cancel.aborted;
    const message = redactor.redact(describeFailure(err, cancel, this.#deps.settings.buildTimeoutMs));
    if (!cancelled && !isExpectedFailure(err)) this.#deps.log('error', 'build failed unexpectedly', { buildId: build.id, err: redactError(redactor, err) });
    log(`==> ${cancelled ? 'cancelled' : 'failed'}: ${message}\n`);
    await store.finishBuild(build.id, cancelled ? 'cancelled' : 'failed', message);
    if (image !== undefined) await this.#deps.engine.removeImage(image).catch(() => undefined);
    await store.setImage(build.id, null);
    if (!cancelled) {
      const current = await store.deployment(dep.id);
      if (current !== undefined) {
        const next = this.#next(current, 'build_failed');
        if (!next.noop) await store.setStatus(dep.id, next.to);
        if (!(await this.#isServing(current))) this.#route(current.subdomain, dep.id, 'failed', failedStep(err, image !== undefined));
      }
    }
  }

  /** Starts `build`'s image as a new container and switches traffic to it (restart and rollback). Caller holds the lock. */
  async #release(dep: DeploymentRow, build: BuildRow, vars: readonly EnvVar[], status: DeploymentStatus, signal: AbortSignal): Promise<void> {
    if (build.image_id === null) throw new DomainError('invalid_state', 'the build has no image');
    let container;
    try {
      container = await this.#runtime.startRelease(releaseTarget(dep, { id: build.id, image: build.image_id, vars }, this.#deps.settings), {
        timeoutMs: this.#deps.settings.startupTimeoutMs,
        signal,
      });
    } catch (err) {
      if (err instanceof ReleaseError) throw new DomainError('invalid_state', redactorFor(vars).redact(`the release did not start: ${err.message}`));
      throw err;
    }
    await this.#switchTo(dep, build.id, container.id, container.upstreams, status);
  }

  /**
   * Makes `buildId`'s new container live: database first (so a crash after this point recovers
   * to it), then the routing table, then the old container is drained and stopped in the background.
   */
  async #switchTo(dep: DeploymentRow, buildId: string, containerId: string, upstreams: readonly Upstream[], status: DeploymentStatus): Promise<void> {
    const { store, dataPlane } = this.#deps;
    // The old release is drained where the edges were sending its traffic.
    const oldUpstreams = await this.#servingUpstreams(dep);
    this.#recovery.forget(dep.id);
    const previous = await store.switchLive({ deploymentId: dep.id, buildId, containerId, upstreams, status });
    dataPlane.publish(dep.subdomain, { kind: 'app', deploymentId: dep.id, state: 'live', upstreams });
    for (const old of previous) {
      this.#retire(
        old.containerId,
        oldUpstreams.filter((u) => old.upstreams.some((o) => o.host === u.host && o.port === u.port)),
      );
    }
    this.#track(pruneImages(store, this.#deps.engine, dep.id, this.#deps.settings.keepImages));
  }

  /** Drains and stops an old release in the background. */
  #retire(releaseId: string, upstreams: readonly Upstream[]): void {
    const { dataPlane } = this.#deps;
    this.#track(
      (async () => {
        await Promise.all(upstreams.map((upstream) => dataPlane.drain(upstream, DRAIN_MS)));
        await this.#runtime.stopRelease(releaseId, STOP_SECONDS);
        await this.#runtime.removeRelease(releaseId);
      })(),
    );
  }

  #track(task: Promise<unknown>): void {
    const tracked = task.catch((err: unknown) => this.#deps.log('warn', 'background cleanup failed', { err }));
    this.#background.add(tracked);
    void tracked.finally(() => this.#background.delete(tracked));
  }
}
