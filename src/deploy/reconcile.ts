// Start-up reconciliation, serving first: routes from one look at the engine, releases started again behind the listener.
import fsp from 'node:fs/promises';
import path from 'node:path';
import { parseUpstreams, sameUpstreams } from '../core/upstream.js';
import type { DataPlane } from '../proxy/data-plane.js';
import type { AppRuntime, ReleaseState } from '../runtime/app-runtime.js';
import { containerIdsOf, DockerRuntime } from '../runtime/docker/docker-runtime.js';
import { parseReleaseId } from '../runtime/docker/set-release-id.js';
import type { ContainerEngine, ContainerInfo } from '../runtime/engine.js';
import { LABEL_DEPLOYMENT, LABEL_INSTANCE, LABEL_MANAGED, appNetworkName, buildNetworkName } from '../runtime/engine.js';
import { imageRepositoryPrefix, imageTag } from './images.js';
import type { DeploymentStore, InterruptedBuild } from './deployment-store.js';

export interface ReconcileDeps {
  readonly store: DeploymentStore;
  readonly engine: ContainerEngine;
  /** Runs releases; the docker runtime over `engine` when not given. */
  readonly runtime?: AppRuntime;
  readonly dataPlane: DataPlane;
  readonly dataDir: string;
  /** This installation's id: only engine objects carrying it are ours to remove. */
  readonly instanceId: string;
  readonly log: (level: 'info' | 'warn' | 'error', msg: string, detail?: object) => void;
}

/** A live release whose container is not running: recovery starts it again (the route says `starting` meanwhile). */
export interface PendingRelease {
  readonly deploymentId: string;
  readonly subdomain: string;
  readonly buildId: string;
  /** The container the database names for it (null: it never had one recorded). */
  readonly containerId: string | null;
}

export interface RecoveryPlan {
  /** Builds this instance was running when it went down: queued again behind the listener, built from the start. */
  readonly interrupted: readonly InterruptedBuild[];
  /** Releases to start again, behind the listener. */
  readonly pending: readonly PendingRelease[];
  /** Removes the engine objects no record accounts for (seen before anything could create new ones). */
  readonly sweep: (() => Promise<void>) | undefined;
  /**
   * Stops and removes, before any release is started again, the strays that hold a volume
   * read-write (a set cut short while its holder had taken the volume over): one writer at a time.
   */
  readonly freeVolumes?: (() => Promise<void>) | undefined;
}

/**
 * Runs on start, before the listener, in time that does not grow with engine calls per app: builds
 * left `building` by a crash are listed, to be queued again (they stay `building`, and so do their
 * deployments, whose release serves on meanwhile); every deployment's route is published from one
 * listing of this installation's containers (running live containers at once, the others
 * `starting`, to be started again by the lifecycle's recovery). With the engine down, every release
 * that should run is pending. Strays (containers, networks, volumes, images of this installation
 * that no record accounts for) are listed now, while no deploy can be creating new ones, and removed
 * later by `sweep`.
 */
export async function planRecovery(deps: ReconcileDeps, engineUp: boolean): Promise<RecoveryPlan> {
  const { store, engine, dataPlane, log } = deps;
  const interrupted = await store.interruptedBuilds();
  if (interrupted.length > 0) log('warn', `${interrupted.length} build(s) interrupted by the restart will be built again from the start`);
  await fsp.rm(path.join(deps.dataDir, 'work'), { recursive: true, force: true });

  const { deployments, builds } = await store.everything();
  const buildById = new Map(builds.map((b) => [b.id, b]));
  const mine = { [LABEL_MANAGED]: 'true', [LABEL_INSTANCE]: deps.instanceId };
  let containers: ContainerInfo[] | undefined;
  let releases = new Map<string, ReleaseState>();
  if (engineUp) {
    const liveIds = deployments.flatMap((d) => {
      const id = d.live_build_id === null ? null : (buildById.get(d.live_build_id)?.container_id ?? null);
      return id === null ? [] : [id];
    });
    try {
      containers = await engine.listContainers(mine);
      releases = await (deps.runtime ?? new DockerRuntime(engine)).inspectReleases(deps.instanceId, liveIds);
    } catch (err) {
      log('warn', 'could not list containers at start; every release is started again', { err });
      containers = undefined;
    }
  }

  const pending: PendingRelease[] = [];
  for (const dep of deployments) {
    const live = dep.live_build_id === null ? undefined : buildById.get(dep.live_build_id);
    // A deployment building a new release keeps serving the one it had (unless it was stopped: no upstreams).
    const wantRunning =
      live !== undefined && (dep.status === 'running' || dep.status === 'failed' || (dep.status === 'building' && parseUpstreams(live.upstreams).length > 0));
    if (!wantRunning) {
      const state = dep.status === 'stopped' ? 'stopped' : dep.status === 'failed' ? 'failed' : 'starting';
      dataPlane.publish(dep.subdomain, { kind: 'app', deploymentId: dep.id, state });
      continue;
    }
    const running = live.container_id === null ? undefined : releases.get(live.container_id);
    if (running !== undefined && running.lost === 0 && running.upstreams.length === running.replicas) {
      if (!sameUpstreams(running.upstreams, parseUpstreams(live.upstreams))) await store.setContainer(live.id, running.id, running.upstreams);
      dataPlane.publish(dep.subdomain, { kind: 'app', deploymentId: dep.id, state: 'live', upstreams: running.upstreams });
      continue;
    }
    dataPlane.publish(dep.subdomain, { kind: 'app', deploymentId: dep.id, state: 'starting' });
    pending.push({ deploymentId: dep.id, subdomain: dep.subdomain, buildId: live.id, containerId: live.container_id });
  }
  if (containers === undefined) return { interrupted, pending, sweep: undefined };

  // Engine objects labelled by this installation that no record accounts for, as they are now.
  const knownContainers = new Set(builds.flatMap((b) => (b.container_id === null ? [] : containerIdsOf(b.container_id))));
  const strayContainers = containers.filter((c) => !knownContainers.has(c.id));
  // Networks are shared by the installation's containers, or a recorded release set's own; any other
  // network carrying its label is a leftover (a set's, when a crash cut its release short).
  const networks = new Set([appNetworkName(deps.instanceId), buildNetworkName(deps.instanceId)]);
  for (const b of builds) {
    const network = b.container_id === null ? null : parseReleaseId(b.container_id).network;
    if (network !== null) networks.add(network);
  }
  const strayNetworks = (await engine.listNetworks(mine)).filter((n) => !networks.has(n.name));
  // Volumes hold app data: only those of deployments that no longer exist (a delete cut short) go.
  const knownDeployments = new Set(deployments.map((d) => d.id));
  const strayVolumes = (await engine.listVolumes(mine)).filter((v) => !knownDeployments.has(v.labels[LABEL_DEPLOYMENT] ?? ''));
  const keptImages = new Set(builds.filter((b) => b.status === 'succeeded' && b.image_id !== null).map((b) => b.image_id));
  // An interrupted build is built again under its own name: the sweep must not remove the new image.
  for (const b of interrupted) keptImages.add(imageTag(deps.instanceId, b.deploymentId, b.buildId));
  const prefix = imageRepositoryPrefix(deps.instanceId);
  const strayImages = (await engine.listImages({})).flatMap((image) => image.tags.filter((tag) => tag.startsWith(prefix) && !keptImages.has(tag)));

  const holders = strayContainers.filter((c) => c.state !== 'exited' && c.state !== 'created' && (c.volumes ?? []).length > 0);
  const freeVolumes = async (): Promise<void> => {
    for (const container of holders) {
      log('info', `stopping unknown container ${container.name}: it holds a volume a release may need`);
      await engine.stopContainer(container.id, 10).catch((err: unknown) => log('warn', `could not stop container ${container.name}`, { err }));
    }
  };

  const sweep = async (): Promise<void> => {
    for (const container of strayContainers) {
      log('info', `removing unknown container ${container.name}`);
      await engine.removeContainer(container.id).catch((err: unknown) => log('warn', `could not remove container ${container.name}`, { err }));
    }
    for (const network of strayNetworks) {
      log('info', `removing unknown network ${network.name}`);
      await engine.removeNetwork(network.id).catch((err: unknown) => log('warn', `could not remove network ${network.name}`, { err }));
    }
    for (const volume of strayVolumes) {
      log('info', `removing the volume ${volume.name} of a deleted deployment`);
      await engine.removeVolume(volume.name).catch((err: unknown) => log('warn', `could not remove volume ${volume.name}`, { err }));
    }
    for (const tag of strayImages) {
      log('info', `removing unknown image ${tag}`);
      await engine.removeImage(tag).catch((err: unknown) => log('warn', `could not remove image ${tag}`, { err }));
    }
  };
  return { interrupted, pending, sweep, freeVolumes };
}
