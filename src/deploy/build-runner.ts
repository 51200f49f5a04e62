// Builds on this instance: taken from the queue while a slot is free, run through the pipeline, cancelled (here or on the instance running them), taken over from a lost instance.
import { setTimeout as sleep } from 'node:timers/promises';
import type { EnvVar } from '../domain/app-config.js';
import type { BuildRow } from '../domain/builds.js';
import type { DeploymentRow } from '../domain/deployments.js';
import type { TakenBuild } from './build-queue.js';
import type { InterruptedBuild } from './deployment-store.js';
import { Cancelled, runBuildPipeline, type PipelineStart } from './build-pipeline.js';
import type { LifecycleParts } from './lifecycle-parts.js';
import type { ReleaseSwitch } from './release-switch.js';

/** What an interrupted build's log says when it is queued again after a restart. */
const INTERRUPTED_LINE = '==> interrupted by a restart of the server; queued again, this build starts again from the beginning\n';

interface InflightBuild {
  readonly buildId: string;
  readonly controller: AbortController;
  readonly done: Promise<void>;
}

/** The builds this instance runs, one per deployment at most, and the dispatcher that takes them from the queue. */
export class BuildRunner {
  readonly #parts: LifecycleParts;
  readonly #releases: ReleaseSwitch;
  /** Whether the queue is being looked at now, and whether to look again once done. */
  #dispatching = false;
  #dispatchAgain = false;
  /** The dispatcher's current run (close waits for it: a build it is taking must not start after). */
  #dispatchRun: Promise<void> = Promise.resolve();
  readonly #inflight = new Map<string, InflightBuild>();

  constructor(parts: LifecycleParts, releases: ReleaseSwitch) {
    this.#parts = parts;
    this.#releases = releases;
    // A cancel asked on another instance of a build running here (`c:<build id> <reason>`).
    parts.coordination.onAnnounce((message) => {
      const match = message === null ? null : /^\S+ c:(\S+) (.*)$/s.exec(message);
      if (match === null) return;
      for (const inflight of this.#inflight.values()) if (inflight.buildId === match[1]) inflight.controller.abort(new Cancelled(match[2] ?? 'cancelled'));
    });
    parts.queue.onChange(() => this.dispatch());
  }

  /** The id of the deployment's build running on this instance, if one does. */
  inflightBuildId(deploymentId: string): string | undefined {
    return this.#inflight.get(deploymentId)?.buildId;
  }

  /** Builds this instance runs now (the instance registry's `builds_running`). */
  get running(): number {
    return this.#inflight.size;
  }

  /** Runs the pipeline of a build on this instance (taken from the queue, or failing at once). */
  start(dep: DeploymentRow, build: BuildRow, vars: readonly EnvVar[], start: PipelineStart): void {
    const controller = new AbortController();
    const done = runBuildPipeline(this.#parts, this.#releases, dep, build, vars, controller.signal, start)
      // Never rejects: an outcome that could not be recorded (the database gone) is logged.
      .catch((err: unknown) => this.#parts.deps.log('error', `build ${build.id.slice(0, 8)} ended without its outcome recorded`, { err }))
      .finally(() => {
        if (this.#inflight.get(dep.id)?.buildId === build.id) this.#inflight.delete(dep.id);
      });
    this.#inflight.set(dep.id, { buildId: build.id, controller, done });
  }

  /** Aborts the deployment's build in flight (if any) and waits until it has wound down. */
  async cancel(deploymentId: string, reason: string): Promise<void> {
    const inflight = this.#inflight.get(deploymentId);
    if (inflight === undefined) {
      // Still waiting in the queue (taken by no instance): out of it, and ended here.
      const withdrawn = await this.#parts.queue.withdraw(deploymentId);
      for (const buildId of withdrawn) await this.#endQueued(deploymentId, buildId, reason);
      if (withdrawn.length > 0) return;
      return this.#cancelElsewhere(deploymentId, reason);
    }
    inflight.controller.abort(new Cancelled(reason));
    await inflight.done;
  }

  /** Waits until the build has ended, wherever it runs (here, another instance, or still in the queue), or `signal` aborts. */
  async waitFor(deploymentId: string, buildId: string, signal?: AbortSignal): Promise<void> {
    const aborted = signal === undefined ? undefined : new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
    for (;;) {
      if (signal?.aborted === true) return;
      const inflight = this.#inflight.get(deploymentId);
      if (inflight?.buildId === buildId) await Promise.race(aborted === undefined ? [inflight.done] : [inflight.done, aborted]);
      else {
        if ((await this.#parts.deps.store.build(deploymentId, buildId))?.status !== 'building') return;
        await sleep(250, undefined, signal === undefined ? undefined : { signal }).catch(() => undefined);
      }
    }
  }

  /**
   * Takes over a build whose instance (`from`) was lost (decisions §15): the same build record, now
   * this instance's, queued again; whichever instance takes it builds it again from the start, and
   * its log says so. False when it ended or another instance took it first.
   */
  async takeOver(deploymentId: string, buildId: string, from: string): Promise<boolean> {
    const { deps, locks, queue } = this.#parts;
    const { store } = deps;
    const queued = await locks.run(deploymentId, async () => {
      if (this.#inflight.has(deploymentId) || !(await store.claimBuild(buildId, from))) return false;
      const dep = await store.deployment(deploymentId);
      const build = await store.build(deploymentId, buildId);
      if (dep === undefined || build === undefined || build.status !== 'building') return false;
      deps.log('warn', `took over build ${build.id.slice(0, 8)} of ${dep.name} from the lost instance ${from}; it is queued again`);
      await queue.enqueue({ buildId, deploymentId, userId: dep.user_id, lostFrom: from });
      return true;
    });
    if (queued) this.dispatch();
    return queued;
  }

  /**
   * Queues again the builds this instance was running when it went down (start-up recovery), as a
   * takeover does (decisions §15): the same build record, built again from the start, its log
   * saying so. One that ended or was taken over meanwhile is left as it is.
   */
  async requeueInterrupted(interrupted: readonly InterruptedBuild[]): Promise<void> {
    const { deps, locks, queue } = this.#parts;
    const { store, buildLogs } = deps;
    for (const { deploymentId, buildId, runner } of interrupted) {
      if (this.#parts.closing.aborted) return;
      await locks
        .run(deploymentId, async () => {
          // Still this instance's, still building (no other instance took it over while this one was down).
          if (this.#inflight.has(deploymentId) || !(await store.claimBuild(buildId, runner))) return;
          const dep = await store.deployment(deploymentId);
          const build = await store.build(deploymentId, buildId);
          if (dep === undefined || build === undefined || build.status !== 'building') return;
          deps.log('warn', `build ${build.id.slice(0, 8)} of ${dep.name} was interrupted by a restart; it is queued again`);
          buildLogs.append(deploymentId, buildId, INTERRUPTED_LINE);
          await buildLogs.close(buildId);
          await queue.enqueue({ buildId, deploymentId, userId: dep.user_id });
        })
        .catch((err: unknown) => deps.log('warn', `queueing build ${buildId.slice(0, 8)} again after the restart failed`, { err }));
    }
    this.dispatch();
  }

  /**
   * Takes builds from the queue while this instance has a free slot, and runs each: one look at a
   * time, again after any change told meanwhile (a build queued, a slot freed, on any instance).
   */
  dispatch(): void {
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
            if (this.#parts.closing.aborted) return;
            const taken = await this.#parts.queue.take();
            if (taken === undefined) break;
            await this.#runTaken(taken);
          }
        } while (this.#dispatchAgain);
      } catch (err) {
        // The database unreachable: the next change, or the queue's poll, looks again.
        this.#parts.deps.log('warn', 'taking the next build from the queue failed', { err });
      } finally {
        this.#dispatching = false;
      }
    })();
  }

  /**
   * Cancels every build in flight (server shutdown), once the dispatcher's take in flight ended.
   * Builds waiting only in this process's queue are cancelled too; those in the shared queue wait
   * for another instance. The caller has aborted `closing` first.
   */
  async close(): Promise<void> {
    // A take in flight ends first: what it took is started (and cancelled below) or given back.
    await this.#dispatchRun;
    const left = await this.#parts.queue.close();
    await Promise.all([...this.#inflight.keys()].map((id) => this.cancel(id, 'interrupted by a server shutdown')));
    for (const build of left) await this.#endQueued(build.deploymentId, build.buildId, 'interrupted by a server shutdown');
  }

  /** Starts a build taken from the queue (it holds a slot), unless it ended or went meanwhile. */
  async #runTaken(taken: TakenBuild): Promise<void> {
    const { deps, queue, closing } = this.#parts;
    const { store, configs } = deps;
    try {
      // Taken while the server began to stop: queued again, as if never taken (another instance takes
      // it; with one instance, close ends it with the others still waiting).
      if (closing.aborted) {
        const { buildId, deploymentId, userId, lostFrom } = taken;
        await queue.enqueue({ buildId, deploymentId, userId, ...(lostFrom === undefined ? {} : { lostFrom }) });
        return;
      }
      const dep = await store.deployment(taken.deploymentId);
      const build = dep === undefined ? undefined : await store.build(dep.id, taken.buildId);
      if (dep === undefined || build === undefined || build.status !== 'building') {
        await queue.release(taken.buildId);
        return;
      }
      const vars = (await configs.buildConfig(build.id)) ?? (await configs.current(dep.id));
      this.start(dep, build, vars, { taken });
    } catch (err) {
      await queue.release(taken.buildId).catch(() => undefined);
      throw err;
    }
  }

  /**
   * Cancels the deployment's build running on another instance: asked over the coordination feed,
   * then waited for (the caller holds the deployment's lock, which that build's switch waits for,
   * abortably). An instance that does not answer within 30 s (lost) has its build ended here.
   */
  async #cancelElsewhere(deploymentId: string, reason: string): Promise<void> {
    const { store } = this.#parts.deps;
    const remote = await store.buildInProgress(deploymentId);
    if (remote === undefined) return;
    const deadline = Date.now() + 30_000;
    let asked = 0;
    while (Date.now() < deadline) {
      // Asked again now and then: an instance that took the build from the queue an instant ago
      // may not have had it in flight when the first ask came.
      if (Date.now() - asked >= 2000) {
        this.#parts.coordination.announce(`- c:${remote.id} ${reason}`);
        asked = Date.now();
      }
      await sleep(100);
      if ((await store.build(deploymentId, remote.id))?.status !== 'building') return;
    }
    await store.finishBuild(remote.id, 'cancelled', `${reason} (its instance did not answer)`);
  }

  /** Ends a build that was withdrawn from the queue before any instance took it. */
  async #endQueued(deploymentId: string, buildId: string, reason: string): Promise<void> {
    const { store, buildLogs } = this.#parts.deps;
    buildLogs.append(deploymentId, buildId, `==> cancelled: ${reason}\n`);
    await store.finishBuild(buildId, 'cancelled', reason);
    await buildLogs.close(buildId);
    this.#parts.deps.onBuildEnd?.('cancelled', 0);
  }
}
