// What the deployment lifecycle is built from: its stores, engine, runtime, data plane, queue and settings (wired in main.ts).
import type { AppConfigStore } from '../domain/app-config.js';
import type { AppEvents } from '../domain/app-events.js';
import type { MetricsHistory } from '../domain/metrics-history.js';
import type { QuotaGuard } from '../domain/quotas.js';
import type { DataPlane } from '../proxy/data-plane.js';
import type { AppRuntime } from '../runtime/app-runtime.js';
import type { ContainerEngine } from '../runtime/engine.js';
import type { SourceStore } from '../source/source-store.js';
import type { BuildLogs } from './build-logs.js';
import type { BuildQueue } from './build-queue.js';
import type { Coordination } from './coordination.js';
import type { DeploymentStore } from './deployment-store.js';
import type { BuildSlots } from './fair-build-slots.js';
import type { RestoreUpload } from './image-build.js';
import type { LifecycleSettings } from './lifecycle-settings.js';

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
  /** Where `deploy.succeeded` and `deploy.failed` are told (default: nowhere). */
  readonly events?: Pick<AppEvents, 'emit'>;
  /** The sampled resource use of the last hour (default: none kept). */
  readonly metricsHistory?: MetricsHistory;
}
