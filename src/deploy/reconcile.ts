// Start-up reconciliation: bring the database, the engine and the routing table back into agreement.
import fsp from 'node:fs/promises';
import path from 'node:path';
import type { Db } from '../db/database.js';
import { nowIso } from '../db/database.js';
import type { RoutingTable } from '../proxy/routing-table.js';
import type { ContainerEngine } from '../runtime/engine.js';
import { LABEL_INSTANCE, LABEL_MANAGED, appNetworkName, buildNetworkName } from '../runtime/engine.js';
import { imageRepositoryPrefix } from './images.js';
import { startRelease } from './release.js';
import type { AppConfigStore } from '../domain/app-config.js';
import { parseStoredVolumes } from '../domain/volumes.js';

export interface ReconcileDeps {
  /** Where a build's configuration is found, to start its release again. */
  readonly configs: AppConfigStore;
  readonly db: Db;
  readonly engine: ContainerEngine;
  readonly table: RoutingTable;
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
  const { db, engine, table, log } = deps;
  const now = nowIso();
  const interrupted = await db
    .updateTable('builds')
    .set({ status: 'failed', error: 'interrupted by a restart', finished_at: now })
    .where('status', '=', 'building')
    .executeTakeFirst();
  if (interrupted.numUpdatedRows > 0n) log('warn', `marked ${interrupted.numUpdatedRows} interrupted build(s) as failed`);
  await db.updateTable('deployments').set({ status: 'failed', updated_at: now }).where('status', '=', 'building').execute();
  await db.deleteFrom('tunnels').execute(); // no tunnel survives a restart; clients reconnect
  await fsp.rm(path.join(deps.dataDir, 'work'), { recursive: true, force: true });

  const deployments = await db.selectFrom('deployments').selectAll().execute();
  const builds = await db.selectFrom('builds').select(['id', 'deployment_id', 'status', 'image_id', 'container_id', 'host_port', 'seq']).execute();
  const buildById = new Map(builds.map((b) => [b.id, b]));

  for (const dep of deployments) {
    const live = dep.live_build_id === null ? undefined : buildById.get(dep.live_build_id);
    const wantRunning = live !== undefined && (dep.status === 'running' || dep.status === 'failed');
    if (!wantRunning) {
      const state = dep.status === 'stopped' ? 'stopped' : dep.status === 'failed' ? 'failed' : 'starting';
      table.set(dep.subdomain, { kind: 'app', deploymentId: dep.id, state });
      continue;
    }
    let info = live.container_id === null ? null : await engine.inspectContainer(live.container_id);
    try {
      if (info !== null && !info.running) info = await engine.startContainer(info.id);
      if (info === null && live.image_id !== null && (await engine.imageExists(live.image_id))) {
        log('warn', `live container of ${dep.subdomain} vanished; starting build ${live.id} again`);
        info = await startRelease(
          engine,
          {
            instanceId: deps.instanceId,
            deploymentId: dep.id,
            buildId: live.id,
            image: live.image_id,
            healthCheckPath: dep.health_check_path,
            memoryBytes: dep.memory_bytes ?? deps.defaultMemoryBytes,
            nanoCpus: dep.nano_cpus ?? deps.defaultNanoCpus,
            pidsLimit: deps.appPidsLimit,
            vars: (await deps.configs.buildConfig(live.id)) ?? (await deps.configs.current(dep.id)),
            volumes: parseStoredVolumes(dep.volumes),
          },
          { timeoutMs: deps.startupTimeoutMs, signal: AbortSignal.timeout(deps.startupTimeoutMs + 30_000) },
        );
      }
    } catch (err) {
      log('error', `could not start ${dep.subdomain} again`, { err });
      info = null;
    }
    if (info === null || info.hostPort === null) {
      await db.updateTable('deployments').set({ status: 'failed', updated_at: nowIso() }).where('id', '=', dep.id).execute();
      table.set(dep.subdomain, { kind: 'app', deploymentId: dep.id, state: 'failed' });
      continue;
    }
    await db.updateTable('builds').set({ container_id: info.id, host_port: info.hostPort }).where('id', '=', live.id).execute();
    live.container_id = info.id;
    table.set(dep.subdomain, { kind: 'app', deploymentId: dep.id, state: 'live', upstream: { host: '127.0.0.1', port: info.hostPort } });
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
