// Keeps routes right when live replicas move or stop: new upstreams are re-routed, a lost replica's release is recovered.
import { sameUpstreams } from '../core/upstream.js';
import type { DataPlane } from '../proxy/data-plane.js';
import type { AppRuntime } from '../runtime/app-runtime.js';
import type { DeploymentStore } from './deployment-store.js';
import type { PendingRelease } from './reconcile.js';

export interface LivePortDeps {
  readonly store: DeploymentStore;
  readonly runtime: AppRuntime;
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
 * One look at this installation's releases (a single runtime call, whatever the number of apps):
 * a release whose running replicas serve elsewhere now (the restart policy brought a crashed one
 * back on another port) or fewer of them (one is being restarted: it leaves the edge meanwhile) is
 * re-routed; one with a replica gone or stopped for good (the engine was restarted, someone ran
 * `docker stop`) is handed to recovery, which starts it again.
 */
export async function refreshLivePorts(deps: LivePortDeps, actions: LivePortActions): Promise<void> {
  const { store, runtime, dataPlane } = deps;
  const rows = await store.liveContainers();
  if (rows.length === 0) return;
  const states = await runtime.inspectReleases(deps.settings.instanceId, rows.map((row) => row.containerId));
  const stopped: PendingRelease[] = [];
  for (const row of rows) {
    // Served as the store says (the route every instance publishes), not as this instance's plane has it.
    if (row.upstreams.length === 0 || actions.isRecovering(row.deploymentId)) continue;
    const state = states.get(row.containerId);
    if (state === undefined || state.lost > 0) {
      stopped.push({ deploymentId: row.deploymentId, subdomain: row.subdomain, buildId: row.buildId, containerId: row.containerId });
      continue;
    }
    const upstreams = state.upstreams;
    // Every replica restarting at once: the route stays as it is until one is back.
    if (upstreams.length === 0 || sameUpstreams(upstreams, row.upstreams)) continue;
    await actions
      .runLocked(row.deploymentId, async () => {
        if (!(await store.moveUpstreams(row.buildId, row.containerId, upstreams))) return;
        dataPlane.publish(row.subdomain, { kind: 'app', deploymentId: row.deploymentId, state: 'live', upstreams });
        deps.log('info', `${row.subdomain} now serves from ${upstreams.map((u) => `${u.host}:${u.port}`).join(', ')}; route updated`);
      })
      .catch(() => undefined);
  }
  if (stopped.length > 0) {
    deps.log('warn', `${stopped.length} live container(s) found stopped; starting them again`);
    actions.recover(stopped);
  }
}
