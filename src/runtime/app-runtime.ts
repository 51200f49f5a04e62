// The app runtime port: what a release needs from whatever runs apps (one engine's containers, or a swarm's tasks).
import type { Upstream } from '../core/upstream.js';
import type { EnvVar } from '../domain/app-config.js';
import type { ReleaseExit } from '../domain/app-health.js';
import type { VolumeSpec } from '../domain/volumes.js';
import type { ContainerStats } from './engine.js';
import type { ReleaseSet } from './release-set.js';

/** Everything a runtime needs to run one build of a deployment. */
export interface ReleaseTarget {
  /** The installation's id, labelled on what the runtime creates. */
  readonly instanceId: string;
  readonly deploymentId: string;
  readonly buildId: string;
  readonly image: string;
  readonly healthCheckPath: string | null;
  readonly memoryBytes: number;
  readonly nanoCpus: number;
  readonly pidsLimit: number;
  /** The variables the release runs with (PORT is added, and always wins). */
  readonly vars: readonly EnvVar[];
  /** The deployment's volumes, created if needed and mounted. */
  readonly volumes: readonly VolumeSpec[];
  /** How many copies serve it (1–20), each its own upstream. */
  readonly replicas: number;
  /** Further networks its containers join: those of the databases linked to it (src/databases/). */
  readonly networks?: readonly string[] | undefined;
  /**
   * The services released together (a compose file, contract §21); absent: the set of one, `image`
   * served with `replicas` copies. Every service gets `vars` and `networks`.
   */
  readonly set?: ReleaseSet | undefined;
  /** The IPv4 range a set's own network takes a /26 of (defaults to SLIPWAY_DB_SUBNET_POOL's default). */
  readonly subnetPool?: string | undefined;
}

/**
 * Runs `fn`, the engine's part of starting a replica (create, start, inspect), in whatever turn
 * the caller allots: recovery passes one that holds one of its bounded engine slots for exactly
 * that long, so a health check that waits holds none.
 */
export type EngineTurn = <T>(fn: () => Promise<T>) => Promise<T>;

/** No bound: the engine's part runs at once (deploys are already bounded by their build slots). */
export const immediateTurn: EngineTurn = (fn) => fn();

export interface StartReleaseOptions {
  readonly timeoutMs: number;
  readonly signal: AbortSignal;
  /** The app's output and progress lines while it starts (the build log). */
  readonly onOutput?: ((text: string) => void) | undefined;
  readonly engineTurn?: EngineTurn | undefined;
}

/** A release that runs and passed its health check: the runtime's id for it and where each replica serves. */
export interface StartedRelease {
  readonly id: string;
  readonly upstreams: readonly Upstream[];
}

/** A release as the runtime sees it now (one look for many releases). */
export interface ReleaseState {
  readonly id: string;
  /** Replicas the release was started with. */
  readonly replicas: number;
  /** Where its running replicas serve now (a replica being restarted by the runtime is left out). */
  readonly upstreams: readonly Upstream[];
  /** Replicas gone or stopped that the runtime will not bring back itself: the release must be recovered. */
  readonly lost: number;
}

/** One replica's resource use (see ContainerStats), with its number (1-based). */
export interface ReplicaStats extends ContainerStats {
  readonly replica: number;
  /** The service it runs, in a release of several services. */
  readonly service?: string | undefined;
}

/** One service of a running set as the runtime sees it now (GET …/services). */
export interface ServiceState {
  readonly service: string;
  /** Containers running now. */
  readonly running: number;
  /** The engine's health check over its containers: the worst of them; null when it has none. */
  readonly health: 'healthy' | 'unhealthy' | 'starting' | null;
}

/** One container of a release's image run to its end (a scheduled job's run): never routed, never restarted. */
export interface OneOffTarget extends Omit<ReleaseTarget, 'replicas' | 'healthCheckPath'> {
  /** The run's id, labelled on its container. */
  readonly runId: string;
  /** The image's command replaced by this argv (its entrypoint kept). */
  readonly command: readonly string[];
}

export interface OneOffOptions {
  /** The run is killed past this (the result says `timedOut`). */
  readonly timeoutMs: number;
  /** Aborting kills the run and removes it; the promise then rejects with the signal's reason. */
  readonly signal: AbortSignal;
  /**
   * When to start it (ms since the epoch): everything before the start (the container created on
   * its networks) is done now, the start itself at that moment. Absent: at once.
   */
  readonly startAt?: number | undefined;
  /** Asked just before the start: false leaves the run unstarted (removed; the result says `started: false`). */
  readonly ready?: (() => Promise<boolean>) | undefined;
  /** Told the run's id (for `removeRelease`) as soon as it runs. */
  readonly onStarted?: ((id: string) => void) | undefined;
  /** Its output as it comes (stdout and stderr together). */
  readonly onOutput: (text: string) => void;
}

/** How a one-off run ended (its container is removed by then). */
export interface OneOffResult {
  readonly id: string;
  /** Null when the engine could not tell (the container vanished). */
  readonly exitCode: number | null;
  readonly timedOut: boolean;
  /** False when `ready` said no (nothing ran). */
  readonly started: boolean;
}

/**
 * The runtime of apps at the level of a release. `docker` (src/runtime/docker/) runs a release as
 * containers on one engine; other runtimes sit beside it. Ids are the runtime's own and opaque.
 */
export interface AppRuntime {
  /** True when the runtime releases sets of services (compose deployments, contract §21). */
  readonly releasesSets?: boolean;
  /** Each service of a set's release, as it runs now (undefined: the runtime cannot tell). */
  releaseServices?(instanceId: string, id: string): Promise<ServiceState[]>;
  /**
   * Starts `target` and waits until every replica answers HTTP (2xx/3xx on the health-check path
   * when one is set) within `timeoutMs`. On failure or abort nothing of it is left; a failed
   * health check throws ReleaseError ending with the app's last output line.
   */
  startRelease(target: ReleaseTarget, options: StartReleaseOptions): Promise<StartedRelease>;
  /**
   * Starts a recorded release's stopped replicas again (keeping their state) and health-checks all
   * of them; throws when one is gone or does not become healthy (recovery then starts a fresh one).
   */
  resumeRelease(id: string, check: { readonly image: string | null; readonly healthCheckPath: string | null }, options: StartReleaseOptions): Promise<StartedRelease>;
  /** The state of each release named that still exists (one look at the runtime, whatever their number). */
  inspectReleases(instanceId: string, ids: readonly string[]): Promise<Map<string, ReleaseState>>;
  /** Graceful stop of every replica (SIGTERM, then kill after timeoutSeconds); ignores what is gone. */
  stopRelease(id: string, timeoutSeconds: number): Promise<void>;
  /** Removes every replica, ignoring what is gone. */
  removeRelease(id: string): Promise<void>;
  /**
   * Removes what the runtime holds for a deleted deployment beyond its releases (a swarm service
   * and its network, whichever release it runs); runtimes that hold nothing more leave it out.
   */
  removeDeployment?(instanceId: string, deploymentId: string): Promise<void>;
  /**
   * The release's output as text: with one replica as the app wrote it; with more, every line
   * prefixed `[n] ` (its replica number) and the lines already written merged in time order.
   */
  releaseLogs(id: string, options: { tail?: number | undefined; follow: boolean; signal: AbortSignal; service?: string | undefined }): AsyncIterable<string>;
  /**
   * The crashes of the releases named between two times (ms since the epoch), each release's oldest
   * first: one look at the runtime whatever their number. Runtimes that cannot tell leave it out
   * (their apps are then always reported healthy).
   */
  releaseExits?(instanceId: string, ids: readonly string[], sinceMs: number, untilMs: number, signal?: AbortSignal): Promise<Map<string, ReleaseExit[]>>;
  /**
   * The last output of the replica whose exit `key` (from releaseExits) names, for runtimes that run
   * each restart apart (swarm: a new task, whose logs are not the release's current ones); without
   * it the release's logs are read.
   */
  exitLogs?(key: string, options: { tail: number; signal: AbortSignal }): AsyncIterable<string>;
  /**
   * Secret values the runtime gives the deployment's releases beyond its own variables (its linked
   * databases' URLs and passwords): its logs, crash lines and job output mask them as they mask the
   * app's secrets. Runtimes that add none leave it out.
   */
  addedSecrets?(deploymentId: string): Promise<string[]>;
  /**
   * Runs one container of `target.image` with `target.command` to its end, on the deployment's
   * networks with its variables, volumes and limits, unpublished; its output goes to `onOutput`.
   * A run left behind (its instance died) is removed with `removeRelease(id)`. Runtimes that
   * cannot run one-offs leave it out (jobs are then refused with 409, see docs/jobs.md).
   */
  runOnce?(target: OneOffTarget, options: OneOffOptions): Promise<OneOffResult>;
  /** Each running replica's resource use; empty when none runs. */
  releaseStats(id: string, signal?: AbortSignal): Promise<ReplicaStats[]>;
}

/** A release's figures as one: each summed over its running replicas (started_at the earliest); null when none runs. */
export function releaseTotals(stats: readonly ReplicaStats[]): ContainerStats | null {
  if (stats.length === 0) return null;
  const sum = (pick: (s: ReplicaStats) => number): number => stats.reduce((total, s) => total + pick(s), 0);
  return {
    cpuPercent: sum((s) => s.cpuPercent),
    memoryBytes: sum((s) => s.memoryBytes),
    memoryLimitBytes: sum((s) => s.memoryLimitBytes),
    networkRxBytes: sum((s) => s.networkRxBytes),
    networkTxBytes: sum((s) => s.networkTxBytes),
    restarts: sum((s) => s.restarts),
    startedAt: stats.map((s) => s.startedAt).sort()[0] ?? new Date(0).toISOString(),
  };
}

/** `runtime.addedSecrets` of the deployment as secret variables, for a redactor (none when the runtime adds none). */
export async function addedSecretVars(runtime: Pick<AppRuntime, 'addedSecrets'>, deploymentId: string): Promise<{ value: string; secret: true }[]> {
  return ((await runtime.addedSecrets?.(deploymentId)) ?? []).map((value) => ({ value, secret: true }));
}
