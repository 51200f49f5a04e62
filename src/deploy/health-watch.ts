// The health watcher: reads the runtime's crash reports of live releases every few seconds, keeps each deployment's health, and announces crash loops.
import type { BackgroundTask } from '../core/background.js';
import { CrashTracker, HEALTH_OK, type AppHealth, type ReleaseExit } from '../domain/app-health.js';
import { AppEvents } from '../domain/app-events.js';
import type { AppConfigStore } from '../domain/app-config.js';
import type { AppRuntime } from '../runtime/app-runtime.js';
import type { DeploymentStore } from './deployment-store.js';
import { outputRedactor } from './output-redactor.js';

/** How far back the first look reads (a server started amid a crash loop sees it at once). */
const FIRST_LOOK_MS = 5 * 60_000;
/** Each look overlaps the previous one by this much: the engine's window is in whole seconds, and an exit read twice counts once. */
const OVERLAP_MS = 3_000;
/** Output lines read to find the app's last words. */
const LAST_LINES = 20;

export interface HealthWatchDeps {
  readonly store: Pick<DeploymentStore, 'liveContainers'>;
  readonly runtime: Pick<AppRuntime, 'releaseExits' | 'releaseLogs' | 'exitLogs' | 'addedSecrets'>;
  readonly configs: Pick<AppConfigStore, 'current' | 'buildConfig'>;
  readonly instanceId: string;
  readonly events: AppEvents;
  /** Whether this instance announces crash loops (several instances: the leader alone); every instance keeps the health. */
  readonly announces: () => boolean;
  readonly log: (level: 'info' | 'warn' | 'error', msg: string, detail?: object) => void;
  readonly now?: () => number;
}

/**
 * Each deployment's health, as of the latest look. `of()` is a map read (the deployment list
 * calls it per row); `version` changes whenever a health changes, so cached list pages that show
 * one are not served stale.
 */
export class HealthWatch {
  readonly #deps: HealthWatchDeps;
  readonly #tracker = new CrashTracker();
  readonly #now: () => number;
  #health = new Map<string, AppHealth>();
  #seen = new Map<string, number>();
  #since: number | undefined;
  #version = 0;

  constructor(deps: HealthWatchDeps) {
    this.#deps = deps;
    this.#now = deps.now ?? Date.now;
  }

  /** Bumped whenever any deployment's health changes. */
  get version(): number {
    return this.#version;
  }

  /** The deployment's health (ok when nothing was seen). */
  of(deploymentId: string): AppHealth {
    return this.#health.get(deploymentId) ?? HEALTH_OK;
  }

  /** One look: the exits since the previous look, each deployment's health recomputed. */
  async look(signal?: AbortSignal): Promise<void> {
    const { runtime, store } = this.#deps;
    if (runtime.releaseExits === undefined) return;
    const now = this.#now();
    // Every live release, serving now or not: a crash-looping container is often down when the routes are refreshed.
    const rows = await store.liveContainers();
    const live = new Map(rows.map((row) => [row.deploymentId, row.containerId]));
    const since = (this.#since ?? now - FIRST_LOOK_MS) - OVERLAP_MS;
    const exits: Map<string, ReleaseExit[]> = rows.length === 0 ? new Map() : await runtime.releaseExits(this.#deps.instanceId, [...live.values()], since, now, signal);
    this.#since = now;
    this.#tracker.keepOnly(live);
    for (const row of rows) {
      const fresh = (exits.get(row.containerId) ?? []).filter((exit: ReleaseExit) => !this.#seen.has(exit.key));
      if (fresh.length === 0) continue;
      for (const exit of fresh) this.#seen.set(exit.key, exit.at);
      const looping = this.#tracker.record(row.deploymentId, row.containerId, fresh);
      this.#tracker.setLastLine(row.deploymentId, await this.#lastLine(row.deploymentId, row.buildId, row.containerId, fresh.at(-1)?.key, signal));
      if (looping && this.#deps.announces()) {
        const health = this.#tracker.health(row.deploymentId, row.containerId, now);
        this.#deps.events.emit({
          type: 'app.crashed',
          deploymentId: row.deploymentId,
          subdomain: row.subdomain,
          releaseId: row.containerId,
          since: health.since ?? new Date(now).toISOString(),
          restarts: health.restarts,
          exitCode: health.last_exit_code,
          lastLine: health.last_line,
        });
      }
    }
    for (const [key, at] of this.#seen) if (at < since - OVERLAP_MS) this.#seen.delete(key);
    const next = new Map<string, AppHealth>();
    for (const [deploymentId, releaseId] of live) {
      const health = this.#tracker.health(deploymentId, releaseId, now);
      if (health.state !== 'ok') next.set(deploymentId, health);
    }
    if (JSON.stringify([...next]) !== JSON.stringify([...this.#health])) this.#version += 1;
    this.#health = next;
  }

  /** Looks every `intervalMs` until the returned function is called. */
  /** The release's last output line, secrets masked as in its runtime logs; null when unreadable. */
  async #lastLine(deploymentId: string, buildId: string, releaseId: string, exitKey: string | undefined, signal?: AbortSignal): Promise<string | null> {
    try {
      let text = '';
      const { runtime } = this.#deps;
      const options = { tail: LAST_LINES, follow: false, signal: signal ?? AbortSignal.timeout(5_000) };
      // The crashed replica's own output where the runtime keeps it apart (swarm's ended task), else the release's.
      const logs = runtime.exitLogs !== undefined && exitKey !== undefined ? runtime.exitLogs(exitKey, options) : runtime.releaseLogs(releaseId, options);
      for await (const chunk of logs) text = (text + chunk).slice(-16_384);
      const line = text.split('\n').map((l) => l.trim()).filter((l) => l !== '').pop();
      if (line === undefined) return null;
      return (await outputRedactor(this.#deps.configs, runtime, buildId, deploymentId)).redact(line).slice(0, 500);
    } catch {
      return null;
    }
  }
}

/** Seconds between two looks: a crash loop shows within this of its third crash. */
export const HEALTH_LOOK_MS = 5_000;

/**
 * The app event emitter (crash loops are logged, and Part four's notifications subscribe to it),
 * the watcher over the runtime, and its round as background work on every instance.
 */
export function createHealthWatch(deps: Omit<HealthWatchDeps, 'events'> & { readonly events?: AppEvents }, intervalMs = HEALTH_LOOK_MS): { appEvents: AppEvents; healthWatch: HealthWatch; task: BackgroundTask } {
  const appEvents = deps.events ?? new AppEvents((err, event) => deps.log('warn', `a listener of ${event.type} failed`, { err }));
  // The last line is left out of the server log: it is the app's output, shown to its owner only.
  appEvents.on('app.crashed', (event) =>
    deps.log('warn', `${event.subdomain} is crash-looping: ${event.restarts} restarts since ${event.since}${event.exitCode === null ? '' : `, exit code ${event.exitCode}`}`),
  );
  const healthWatch = new HealthWatch({ ...deps, events: appEvents });
  const task: BackgroundTask = {
    name: 'reading crashes of live apps',
    scope: 'everyInstance',
    everyMs: intervalMs,
    run: (signal) => healthWatch.look(AbortSignal.any([signal, AbortSignal.timeout(Math.max(intervalMs * 4, 20_000))])),
  };
  return { appEvents, healthWatch, task };
}
