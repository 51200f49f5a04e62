// Keeps routes right when live containers move or stop: a new host port is re-routed, a stopped container is recovered.
import type { DataPlane } from '../proxy/data-plane.js';
import type { ContainerEngine } from '../runtime/engine.js';
import { LABEL_INSTANCE, LABEL_MANAGED } from '../runtime/engine.js';
import type { DeploymentStore } from './deployment-store.js';
import type { PendingRelease } from './reconcile.js';

export interface LivePortDeps {
  readonly store: DeploymentStore;
  readonly engine: ContainerEngine;
  readonly dataPlane: DataPlane;
  readonly settings: { readonly instanceId: string };
  readonly log: (level: 'info' | 'warn' | 'error', msg: string, detail?: object) => void;
}

export interface LivePortActions {
  /** Runs `fn` under the deployment's lock, so an update never races a release switching traffic. */
  runLocked(deploymentId: string, fn: () => Promise<void>): Promise<void>;
  /** Whether recovery already holds an entry for the deployment. */
  isRecovering(deploymentId: string): boolean;
  /** Hands live releases whose containers stopped to recovery (not awaited). */
  recover(stopped: PendingRelease[]): void;
}

/**
 * One look at this installation's containers (a single engine call, whatever the number of apps):
 * a live container that came back on another host port (the restart policy after a crash) is
 * re-routed; one that is gone or stopped without the engine restarting it (the engine was
 * restarted, someone ran `docker stop`) is handed to recovery, which starts it again.
 */
export async function refreshLivePorts(deps: LivePortDeps, actions: LivePortActions): Promise<void> {
  const { store, engine, dataPlane } = deps;
  const rows = await store.liveContainers();
  if (rows.length === 0) return;
  const containers = await engine.listContainers({ [LABEL_MANAGED]: 'true', [LABEL_INSTANCE]: deps.settings.instanceId });
  const byId = new Map(containers.map((c) => [c.id, c]));
  const stopped: PendingRelease[] = [];
  for (const row of rows) {
    const route = dataPlane.route(row.subdomain);
    if (route?.kind !== 'app' || route.state !== 'live' || actions.isRecovering(row.deploymentId)) continue;
    const info = byId.get(row.containerId);
    // `restarting`: the engine's restart policy is bringing a crashed app back; leave it to the engine.
    if (info === undefined || (!info.running && info.state !== 'restarting')) {
      stopped.push({ deploymentId: row.deploymentId, subdomain: row.subdomain, buildId: row.buildId, containerId: row.containerId });
      continue;
    }
    const upstream = info.running ? info.upstream : null;
    if (upstream === null || (upstream.host === route.upstream.host && upstream.port === route.upstream.port)) continue;
    await actions
      .runLocked(row.deploymentId, async () => {
        if (!(await store.moveHostPort(row.buildId, row.containerId, upstream.port))) return;
        dataPlane.publish(row.subdomain, { kind: 'app', deploymentId: row.deploymentId, state: 'live', upstream });
        deps.log('info', `container of ${row.subdomain} restarted on port ${upstream.port}; route updated`);
      })
      .catch(() => undefined);
  }
  if (stopped.length > 0) {
    deps.log('warn', `${stopped.length} live container(s) found stopped; starting them again`);
    actions.recover(stopped);
  }
}
