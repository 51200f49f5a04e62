// Releases started again after a restart or found stopped ("Recovery that serves first"): each under its deployment's lock, a few engine starts at a time, given up for any operation on the deployment.
import { setTimeout as sleep } from 'node:timers/promises';
import type { AppConfigStore } from '../domain/app-config.js';
import type { DataPlane } from '../proxy/data-plane.js';
import type { AppRuntime } from '../runtime/app-runtime.js';
import type { ContainerEngine } from '../runtime/engine.js';
import { Semaphore } from './concurrency.js';
import type { DeploymentStore } from './deployment-store.js';
import type { LifecycleSettings } from './lifecycle-settings.js';
import type { PendingRelease } from './reconcile.js';
import { recoverRelease } from './recover-release.js';
import { ReleaseError, type EngineTurn } from '../runtime/release.js';
import { transition } from './state-table.js';

/**
 * Releases recovery handles at once: started (or being started) and waiting for their health check.
 * The engine's part of each is bounded apart, by `recoveryConcurrency`; this bounds the waits' polls.
 */
const RECOVERY_IN_FLIGHT = 64;

/** Why a recovery attempt stopped: an operation on the deployment came (it decides what serves). */
class Superseded extends Error {
  override readonly name = 'Superseded';
}

export interface ReleaseRecoveryDeps {
  readonly store: DeploymentStore;
  readonly engine: ContainerEngine;
  readonly dataPlane: DataPlane;
  readonly runtime: AppRuntime;
  readonly configs: AppConfigStore;
  readonly settings: LifecycleSettings;
  readonly log: (level: 'info' | 'warn' | 'error', msg: string, detail?: object) => void;
  /** The deployment locks the lifecycle's operations take too. */
  readonly locks: { run<T>(deploymentId: string, fn: () => Promise<T>, signal?: AbortSignal): Promise<T> };
  /** Aborted when the lifecycle closes: recovery in progress gives up. */
  readonly closing: AbortSignal;
}

/** The releases to start again, and the attempts under way; the lifecycle's operations supersede an entry. */
export class ReleaseRecovery {
  readonly #deps: ReleaseRecoveryDeps;
  /** Releases waiting to be started again; an operation that decides what serves removes its entry. */
  readonly #recovering = new Map<string, PendingRelease>();
  /** Engine turns of recovery: starts (and their inspects) at once. */
  readonly #slots: Semaphore;
  /** Releases recovery handles at once, health checks included. */
  readonly #inFlight: Semaphore;
  /** Each recovery entry's attempt under way (queued, starting or waiting for its health check). */
  readonly #attempts = new Map<string, AbortController>();

  constructor(deps: ReleaseRecoveryDeps) {
    this.#deps = deps;
    this.#slots = new Semaphore(deps.settings.recoveryConcurrency);
    this.#inFlight = new Semaphore(Math.max(RECOVERY_IN_FLIGHT, deps.settings.recoveryConcurrency));
  }

  /** Whether recovery is deciding the deployment's route now. */
  has(deploymentId: string): boolean {
    return this.#recovering.has(deploymentId);
  }

  /** An operation decided what the deployment serves: its entry is dropped. */
  forget(deploymentId: string): void {
    this.#recovering.delete(deploymentId);
  }

  /** How many releases are still to start. */
  get size(): number {
    return this.#recovering.size;
  }

  /**
   * Starts live releases whose containers are not running again (start-up recovery, and containers
   * the watcher finds stopped), each under its deployment's lock and health-checked within the
   * start-up timeout. The engine's work (a start and its inspect) runs `recoveryConcurrency` at a
   * time; a health check waits without holding one of those turns, so an app that is slow to
   * listen never keeps the next one from starting (at most RECOVERY_IN_FLIGHT are handled at once).
   * Their routes answer 503 `starting` until then. A stop, restart, rollback, delete or a build's
   * switch issued meanwhile supersedes an entry. When the engine does not answer, entries wait for
   * it (routes stay `starting`) rather than fail. Resolves when every entry is settled, or the
   * lifecycle closes.
   */
  async recover(pending: readonly PendingRelease[]): Promise<void> {
    const closing = this.#deps.closing;
    for (const item of pending) this.#recovering.set(item.deploymentId, item);
    let queue = [...pending];
    let backoffMs = 500;
    while (queue.length > 0 && !closing.aborted) {
      const retry: PendingRelease[] = [];
      await Promise.all(
        queue.map(async (item) => {
          // An operation on the deployment aborts the attempt wherever it is (queued, starting,
          // waiting for the health check) instead of waiting for it; see interrupt().
          const attempt = new AbortController();
          this.#attempts.set(item.deploymentId, attempt);
          const signal = AbortSignal.any([closing, attempt.signal]);
          let leave: (() => void) | undefined;
          // The first engine turn is taken before the lock (queued entries hold no lock), used by
          // the first start and given back as soon as that start is done; a later start waits for another.
          let turn: (() => void) | undefined;
          const engineTurn: EngineTurn = async (fn) => {
            const release = turn ?? (await this.#slots.acquire(signal));
            turn = undefined;
            try {
              return await fn();
            } finally {
              release();
            }
          };
          try {
            leave = await this.#inFlight.acquire(signal);
            turn = await this.#slots.acquire(signal);
            const outcome = await this.#deps.locks.run(item.deploymentId, () => this.#recoverOne(item, signal, engineTurn), signal);
            if (outcome === 'retry') retry.push(item);
          } catch (err) {
            if (closing.aborted) return;
            // Interrupted by an operation that did not take the entry over (it was refused): try again.
            if (attempt.signal.aborted) {
              if (this.#recovering.get(item.deploymentId) === item) retry.push(item);
              return;
            }
            this.#deps.log('error', `recovery of ${item.subdomain} failed`, { err });
          } finally {
            turn?.();
            leave?.();
            if (this.#attempts.get(item.deploymentId) === attempt) this.#attempts.delete(item.deploymentId);
          }
        }),
      );
      queue = retry;
      if (queue.length === 0) break;
      // The engine is down (restarting, or not up yet after a reboot): wait for it, then try again.
      await sleep(backoffMs, undefined, { signal: closing }).catch(() => undefined);
      backoffMs = Math.min(backoffMs * 2, 5000);
    }
    for (const item of pending) if (this.#recovering.get(item.deploymentId) === item) this.#recovering.delete(item.deploymentId);
  }

  /**
   * An operation that may decide what a deployment serves (stop, restart, rollback, delete, a
   * build's switch) is about to wait for its lock: the deployment's recovery attempt, if any, gives
   * up now (a health check it waits for could hold the lock for the whole start-up timeout). The
   * operation then takes the lock and, as before, drops the entry; an operation that is refused
   * leaves the entry, and recovery tries again. A container the attempt started is the live build's
   * own: the operation stops or retires it; a fresh one it was starting is removed by startRelease.
   */
  interrupt(deploymentId: string): void {
    this.#attempts.get(deploymentId)?.abort(new Superseded('an operation on the deployment came first'));
  }

  /** One recovery entry, under the deployment's lock: started, failed (release lost), skipped (superseded), or retry (engine down). */
  async #recoverOne(item: PendingRelease, signal: AbortSignal, engineTurn: EngineTurn): Promise<'started' | 'failed' | 'skipped' | 'retry'> {
    const { store, engine, dataPlane, log } = this.#deps;
    if (this.#recovering.get(item.deploymentId) !== item) return 'skipped';
    const dep = await store.deployment(item.deploymentId);
    const live = dep?.live_build_id === item.buildId ? await store.build(item.deploymentId, item.buildId) : undefined;
    // Decided meanwhile: deleted, stopped, or another container serves now.
    if (dep === undefined || live === undefined || live.container_id !== item.containerId || dep.status === 'stopped' || dep.status === 'pending') {
      this.#recovering.delete(item.deploymentId);
      return 'skipped';
    }
    const route = dataPlane.route(dep.subdomain);
    if (route?.kind !== 'app' || route.state !== 'starting') dataPlane.publish(dep.subdomain, { kind: 'app', deploymentId: dep.id, state: 'starting' });
    let started;
    try {
      started = await recoverRelease({ runtime: this.#deps.runtime, engine, configs: this.#deps.configs, settings: this.#deps.settings, log }, dep, live, signal, engineTurn);
    } catch (err) {
      signal.throwIfAborted();
      const engineUp = await engine.ping(AbortSignal.timeout(3000)).then(() => true, () => false);
      if (!engineUp) return 'retry';
      // A release error ends with the app's last line, which can hold anything: the server log gets the reason.
      log('error', `could not start ${dep.subdomain} again`, { err: err instanceof ReleaseError ? err.reason : err });
      started = null;
    }
    this.#recovering.delete(item.deploymentId);
    if (started === null) {
      // While a deploy is building, its outcome decides the status; the route says `failed` unless it serves.
      if (live.container_id !== null) await store.moveUpstreams(live.id, live.container_id, []);
      if (dep.status !== 'building') await store.setStatus(dep.id, transition(dep.status, 'release_lost', { serving: false, restartable: false }).to);
      dataPlane.publish(dep.subdomain, { kind: 'app', deploymentId: dep.id, state: 'failed', failure: 'start' });
      return 'failed';
    }
    await store.setContainer(live.id, started.id, started.upstreams);
    dataPlane.publish(dep.subdomain, { kind: 'app', deploymentId: dep.id, state: 'live', upstreams: started.upstreams });
    log('info', `${dep.subdomain} is serving again (build ${live.id.slice(0, 8)})`);
    return 'started';
  }
}
