// Start-up reconciliation: bring the database, the engine and the routing table back into agreement.
import fsp from 'node:fs/promises';
import path from 'node:path';
import type { DataPlane } from '../proxy/data-plane.js';
import type { ContainerEngine } from '../runtime/engine.js';
import { LABEL_DEPLOYMENT, LABEL_INSTANCE, LABEL_MANAGED, appNetworkName, buildNetworkName } from '../runtime/engine.js';
import { imageRepositoryPrefix } from './images.js';
import type { AppConfigStore } from '../domain/app-config.js';
import type { DeploymentStore } from './deployment-store.js';
import { releaseTarget, startRelease } from './release.js';
import { transition } from './state-table.js';

export interface ReconcileDeps {
  readonly store: DeploymentStore;
  /** Where a build's configuration is found, to start its release again. */
  readonly configs: AppConfigStore;
  readonly engine: ContainerEngine;
  readonly dataPlane: DataPlane;
  readonly dataDir: string;
  /** This installation's id: only engine objects carrying it are ours to remove. */
  readonly instanceId: string;
  readonly startupTimeoutMs: number;
  readonly defaultMemoryBytes: number;
  readonly defaultNanoCpus: number;
  readonly appPidsLimit: number;
  readonly log: (level: 'info' | 'warn' | 'error', msg: string, detail?: object) => void;
}

/**
 * Run once on start, before traffic: builds left `building` by a crash become `failed`; live
 * containers that vanished or stopped are started again; containers and images labelled by
 * Slipway that the database does not know are removed; the routing table is rebuilt.
 */
export async function reconcileWithEngine(deps: ReconcileDeps): Promise<void> {
  const { store, engine, dataPlane, log } = deps;
  const interrupted = await store.failInterruptedBuilds('interrupted by a restart');
  if (interrupted > 0) log('warn', `marked ${interrupted} interrupted build(s) as failed`);
  await fsp.rm(path.join(deps.dataDir, 'work'), { recursive: true, force: true });

  const { deployments, builds } = await store.everything();
  const buildById = new Map(builds.map((b) => [b.id, b]));

  for (const dep of deployments) {
    const live = dep.live_build_id === null ? undefined : buildById.get(dep.live_build_id);
    const wantRunning = live !== undefined && (dep.status === 'running' || dep.status === 'failed');
    if (!wantRunning) {
      const state = dep.status === 'stopped' ? 'stopped' : dep.status === 'failed' ? 'failed' : 'starting';
      dataPlane.publish(dep.subdomain, { kind: 'app', deploymentId: dep.id, state });
      continue;
    }
    let info = live.container_id === null ? null : await engine.inspectContainer(live.container_id);
    try {
      if (info !== null && !info.running) info = await engine.startContainer(info.id);
      if (info === null && live.image_id !== null && (await engine.imageExists(live.image_id))) {
        log('warn', `live container of ${dep.subdomain} vanished; starting build ${live.id} again`);
        const vars = (await deps.configs.buildConfig(live.id)) ?? (await deps.configs.current(dep.id));
        info = await startRelease(engine, releaseTarget(dep, { id: live.id, image: live.image_id, vars }, deps), {
          timeoutMs: deps.startupTimeoutMs,
          signal: AbortSignal.timeout(deps.startupTimeoutMs + 30_000),
        });
      }
    } catch (err) {
      log('error', `could not start ${dep.subdomain} again`, { err });
      info = null;
    }
    if (info === null || info.upstream === null) {
      await store.setStatus(dep.id, transition(dep.status, 'release_lost', { serving: false, restartable: false }).to);
      dataPlane.publish(dep.subdomain, { kind: 'app', deploymentId: dep.id, state: 'failed' });
      continue;
    }
    await store.setContainer(live.id, info.id, info.upstream.port);
    live.container_id = info.id;
    dataPlane.publish(dep.subdomain, { kind: 'app', deploymentId: dep.id, state: 'live', upstream: info.upstream });
  }

  // Engine objects labelled by Slipway that no live release or kept image accounts for.
  const knownContainers = new Set(builds.map((b) => b.container_id).filter((id): id is string => id !== null));
  for (const container of await engine.listContainers({ [LABEL_MANAGED]: 'true', [LABEL_INSTANCE]: deps.instanceId })) {
    if (!knownContainers.has(container.id)) {
      log('info', `removing unknown container ${container.name}`);
      await engine.removeContainer(container.id);
    }
  }
  // Networks are shared by the installation's containers; any other network carrying its label is a leftover.
  const networks = new Set([appNetworkName(deps.instanceId), buildNetworkName(deps.instanceId)]);
  for (const network of await engine.listNetworks({ [LABEL_MANAGED]: 'true', [LABEL_INSTANCE]: deps.instanceId })) {
    if (!networks.has(network.name)) {
      log('info', `removing unknown network ${network.name}`);
      await engine.removeNetwork(network.id).catch((err: unknown) => log('warn', `could not remove network ${network.name}`, { err }));
    }
  }
  // Volumes hold app data: only those of deployments that no longer exist (a delete cut short) go.
  const knownDeployments = new Set(deployments.map((d) => d.id));
  for (const volume of await engine.listVolumes({ [LABEL_MANAGED]: 'true', [LABEL_INSTANCE]: deps.instanceId })) {
    if (!knownDeployments.has(volume.labels[LABEL_DEPLOYMENT] ?? '')) {
      log('info', `removing the volume ${volume.name} of a deleted deployment`);
      await engine.removeVolume(volume.name).catch((err: unknown) => log('warn', `could not remove volume ${volume.name}`, { err }));
    }
  }
  const keptImages = new Set(builds.filter((b) => b.status === 'succeeded' && b.image_id !== null).map((b) => b.image_id));
  const prefix = imageRepositoryPrefix(deps.instanceId);
  for (const image of await engine.listImages({})) {
    for (const tag of image.tags) {
      if (tag.startsWith(prefix) && !keptImages.has(tag)) {
        log('info', `removing unknown image ${tag}`);
        await engine.removeImage(tag);
      }
    }
  }
}
