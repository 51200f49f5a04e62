// The lifecycle part: recovery's plan, the deployment lifecycle with its build queue, and its background work.
import type { Config } from '../config.js';
import { watcherTask, type BackgroundTask } from '../core/background.js';
import type { Log } from '../core/log.js';
import type { Part } from '../core/parts.js';
import type { AppConfigStore } from '../domain/app-config.js';
import { AppEvents } from '../domain/app-events.js';
import type { HostRoutes } from '../domain/custom-domains.js';
import { heartbeatEvery, type InstanceRegistry } from '../domain/instances.js';
import { MetricsHistory } from '../domain/metrics-history.js';
import type { NodeDirectory } from '../domain/nodes.js';
import { QuotaGuard, type QuotaStore } from '../domain/quotas.js';
import { restoreUpload, type SharedUploads } from '../domain/uploads.js';
import type { HealthCheckedPlane } from '../proxy/replica-health.js';
import type { RoutingTable } from '../proxy/routing-table.js';
import { releaseTotals, type AppRuntime } from '../runtime/app-runtime.js';
import type { ContainerEngine } from '../runtime/engine.js';
import type { SourceStore } from '../source/source-store.js';
import type { BuildLogs } from './build-logs.js';
import type { BuildQueue } from './build-queue.js';
import type { Coordination } from './coordination.js';
import type { DeploymentStore } from './deployment-store.js';
import type { BuildSlots } from './fair-build-slots.js';
import { releaseNetworksOnStop } from './host-cleanup.js';
import { createHealthWatch, type HealthWatch } from './health-watch.js';
import { instanceHeartbeat, takeOverBuildsTask } from './instance-heartbeat.js';
import { DeploymentLifecycle } from './lifecycle.js';
import { metricsSamplingTask } from './metrics-sampler.js';
import { drainingNodes, type NodeDrainDeps } from './node-drain.js';
import { nodeWatchTask } from './node-watch.js';
import { planRecovery, type RecoveryPlan } from './reconcile.js';
import { announcingDataPlane, syncRoutes } from './route-sync.js';

/** How often every route is read again from the database (several instances: repairs a missed notification). */
export const ROUTE_RESYNC_MS = 10_000;

export interface LifecyclePartDeps {
  readonly config: Config;
  readonly log: Log;
  /** This process among the instances sharing the database. */
  readonly self: string;
  readonly instanceId: string;
  readonly coordination: Coordination;
  readonly background: { add(task: BackgroundTask): void };
  readonly stores: {
    readonly deployments: DeploymentStore;
    readonly configs: AppConfigStore;
    readonly sources: SourceStore;
    readonly buildLogs: BuildLogs;
    readonly quotaStore: QuotaStore;
    readonly registry: InstanceRegistry;
    readonly sharedUploads: SharedUploads | undefined;
    readonly buildQueue: (BuildQueue & { forgetLost(live: readonly string[]): Promise<void> }) | undefined;
    customDomainRoutes(): Promise<Array<{ hostname: string; deploymentId: string; subdomain: string }>>;
  };
  readonly runtime: {
    readonly engine: ContainerEngine;
    readonly engineUp: boolean;
    readonly runtime: AppRuntime;
    readonly nodes: NodeDirectory;
    readonly swarm: NodeDrainDeps['runtime'] | undefined;
  };
  readonly planes: { readonly localPlane: HealthCheckedPlane; readonly table: RoutingTable };
  readonly onBuildEnd: (outcome: 'succeeded' | 'failed' | 'cancelled', seconds: number) => void;
  /** Where builds wait for a slot instead of the fair scheduler (bench/fair-builds). */
  readonly buildSlots?: BuildSlots | undefined;
  /** Environment base for git children (PATH, HOME). */
  readonly gitEnv?: Record<string, string> | undefined;
}

export interface LifecycleOffers {
  readonly lifecycle: DeploymentLifecycle;
  /** The plane the control plane writes: every route change announced to the other instances (ids only). */
  readonly dataPlane: ReturnType<typeof announcingDataPlane>;
  /** Each app's health (crash loops), read by the API per deployment. */
  readonly appHealth: HealthWatch;
  /** `app.crashed` and the other app events, for whoever subscribes. */
  readonly appEvents: AppEvents;
  readonly quotas: QuotaGuard;
  /** Custom domains' routes (the API adds and removes them). */
  readonly hosts: HostRoutes;
  /** The nodes apps run on; under swarm a drain first takes the node's replicas out of the edge. */
  readonly nodes: NodeDirectory;
  /** Start-up recovery, run behind the listener (`lifecycle.recoverInBackground`). */
  readonly recovery: RecoveryPlan;
  readonly gitEnv: Record<string, string>;
}

/**
 * Serve first (docs/decisions.md, "Recovery that serves first"): routes come from one look at the
 * engine; releases whose containers stopped answer 503 `starting` and are started again behind the
 * listener. Start-up routes are this instance's own (the others have theirs): the local plane, not announced.
 */
export async function lifecyclePart(deps: LifecyclePartDeps): Promise<Part<LifecycleOffers>> {
  const { config, log, self, coordination, stores, runtime, planes, instanceId } = deps;
  const engine = runtime.engine;
  const shared = config.databaseUrl !== undefined;
  const planned = await planRecovery({ store: stores.deployments, engine, runtime: runtime.runtime, dataPlane: planes.localPlane, dataDir: config.dataDir, instanceId, log }, runtime.engineUp);
  // Strays are removed only by a leader alone: with other instances live, a container not yet
  // recorded may be another instance's build in flight.
  const othersLive = shared && [...(await stores.registry.liveUrls(new Date())).keys()].some((id) => id !== self);
  const recovery = coordination.isLeader() && !othersLive ? planned : { ...planned, sweep: undefined, freeVolumes: undefined };
  const dataPlane = announcingDataPlane(planes.localPlane, coordination, self);
  // Custom domains follow their deployment's route (the table resolves them to its subdomain).
  for (const d of await stores.customDomainRoutes()) dataPlane.publishHost(d.hostname, { subdomain: d.subdomain, deploymentId: d.deploymentId });
  const gitEnv = deps.gitEnv ?? { PATH: '/usr/local/bin:/usr/bin:/bin', HOME: config.dataDir };
  const quotas = new QuotaGuard(stores.quotaStore, config.quotas);
  // An hour of samples whatever the interval.
  const metricsHistory = new MetricsHistory({ capacity: Math.ceil(3_600_000 / config.metricsIntervalMs) });
  const { sharedUploads, buildQueue } = stores;
  const archiveLimits = { maxExpandedBytes: config.maxExpandedBytes, maxEntries: config.maxArchiveEntries };
  // What happens to apps (deploys here, crash loops in the health watch), for whoever subscribes (notifications).
  const appEvents = new AppEvents((err, event) => log('warn', `a listener of ${event.type} failed`, { err }));
  const lifecycle = new DeploymentLifecycle({
    events: appEvents,
    quotas,
    metricsHistory,
    store: stores.deployments,
    configs: stores.configs,
    engine,
    runtime: runtime.runtime,
    dataPlane,
    sources: stores.sources,
    buildLogs: stores.buildLogs,
    log,
    onBuildEnd: deps.onBuildEnd,
    ...(deps.buildSlots === undefined ? {} : { buildSlots: deps.buildSlots }),
    ...(buildQueue === undefined ? {} : { buildQueue }),
    coordination,
    ...(sharedUploads === undefined
      ? {}
      : { restoreUpload: (deploymentId: string, uploadId: string, dockerfilePath: string, signal: AbortSignal) => restoreUpload({ store: stores.sources, shared: sharedUploads, archiveLimits }, deploymentId, uploadId, dockerfilePath, signal) }),
    settings: {
      instanceId,
      dataDir: config.dataDir,
      allowPrivateGit: config.allowPrivateGit,
      buildTimeoutMs: config.buildTimeoutMs,
      startupTimeoutMs: config.startupTimeoutMs,
      keepImages: config.keepImages,
      defaultMemoryBytes: config.defaultMemoryBytes,
      defaultNanoCpus: config.defaultNanoCpus,
      appPidsLimit: config.appPidsLimit,
      subnetPool: config.databaseSubnetPool,
      build: { network: config.buildNetwork, memoryBytes: config.buildMemoryBytes, nanoCpus: config.buildNanoCpus, pidsLimit: config.buildPidsLimit },
      maxConcurrentBuilds: config.maxConcurrentBuilds,
      recoveryConcurrency: config.recoveryConcurrency,
      baseImages: config.baseImages,
      gitEnv,
    },
  });
  await lifecycleBackground(deps, lifecycle, dataPlane, metricsHistory);
  // Every instance keeps each app's health; the leader alone announces a crash loop (`app.crashed`).
  const { healthWatch, task: healthTask } = createHealthWatch({
    events: appEvents,
    store: stores.deployments, runtime: runtime.runtime, configs: stores.configs, instanceId, announces: () => coordination.isLeader(), log,
  });
  deps.background.add(healthTask);
  // Under swarm the leader tells `node.down` when a node stops answering.
  if (config.runtime === 'swarm') deps.background.add(nodeWatchTask(runtime.nodes, appEvents));
  const swarm = runtime.swarm;
  return {
    offers: {
      lifecycle,
      dataPlane,
      appHealth: healthWatch,
      appEvents,
      quotas,
      hosts: {
        addHost: (hostname, deployment) => dataPlane.publishHost(hostname, { subdomain: deployment.subdomain, deploymentId: deployment.id }),
        removeHost: (hostname) => dataPlane.withdrawHost(hostname),
      },
      nodes:
        swarm === undefined
          ? runtime.nodes
          : drainingNodes(runtime.nodes, {
              runtime: swarm,
              liveSubdomains: async () => (await stores.deployments.liveContainers()).map((row) => row.subdomain),
              refreshRoutes: () => lifecycle.refreshLiveRoutes(),
              dataPlane,
              drainMs: 10_000,
            }),
      recovery,
      gitEnv,
    },
    stop: async () => {
      await lifecycle.close();
      // A clean stop leaves no network (nor its firewall chains) that nothing uses.
      await releaseNetworksOnStop(engine, instanceId, log);
    },
  };
}

/** The lifecycle's background work: the registry's heartbeat, the live-route watcher, metrics, route sync, take-overs. */
async function lifecycleBackground(deps: LifecyclePartDeps, lifecycle: DeploymentLifecycle, localChanges: ReturnType<typeof announcingDataPlane>, history: MetricsHistory): Promise<void> {
  const { config, log, self, coordination, stores, runtime, planes, background } = deps;
  const heartbeat = instanceHeartbeat({ registry: stores.registry, coordination, self, url: config.instanceUrl, startedAt: new Date().toISOString(), buildsRunning: () => lifecycle.buildsRunning, log, everyMs: heartbeatEvery(config.instanceLostMs) });
  await heartbeat.beat();
  const tasks: BackgroundTask[] = [
    ...heartbeat.tasks,
    // Under swarm replicas move between nodes on their own: the edge follows them within a few seconds.
    { name: 'refreshing live container ports', scope: 'leaderOnly', everyMs: config.runtime === 'swarm' ? 2_000 : 5_000, run: () => lifecycle.refreshLiveRoutes() },
    metricsSamplingTask({
      history,
      liveContainers: () => stores.deployments.liveContainers(),
      // A release's figures summed over its replicas (one engine's containers, or a swarm service's tasks).
      containerStats: async (id, signal) => releaseTotals(await runtime.runtime.releaseStats(id, signal)),
    }, config.metricsIntervalMs),
  ];
  if (config.databaseUrl !== undefined) {
    tasks.push(
      takeOverBuildsTask({ registry: stores.registry, store: stores.deployments, queue: stores.buildQueue, takeOver: (d, b, from) => lifecycle.takeOver(d, b, from), everyMs: heartbeatEvery(config.instanceLostMs) }),
      watcherTask('following route changes', 'everyInstance', () =>
        syncRoutes({
          coordination,
          store: stores.deployments,
          dataPlane: planes.localPlane,
          appRoutes: () => planes.localPlane.routes(),
          publishedHosts: () => planes.table.hosts(),
          storedHosts: () => stores.customDomainRoutes(),
          isLocal: (deploymentId) => lifecycle.isRecovering(deploymentId),
          localChanges,
          self,
          resyncMs: ROUTE_RESYNC_MS,
          log,
        }),
      ),
    );
  }
  for (const task of tasks) background.add(task);
}
