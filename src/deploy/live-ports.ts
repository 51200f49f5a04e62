// Keeps routes right when the engine restarts a crashed live container on a new host port.
import type { DataPlane } from '../proxy/data-plane.js';
import type { ContainerEngine } from '../runtime/engine.js';
import type { DeploymentStore } from './deployment-store.js';

export interface LivePortDeps {
  readonly store: DeploymentStore;
  readonly engine: ContainerEngine;
  readonly dataPlane: DataPlane;
  readonly log: (level: 'info' | 'warn' | 'error', msg: string, detail?: object) => void;
}

/**
 * Re-reads the host port of every live container and re-routes the ones that moved (the restart
 * policy brings a crashed container back on a new port). `runLocked` runs the update under the
 * deployment's lock, so it never races a release switching traffic.
 */
export async function refreshLivePorts(deps: LivePortDeps, runLocked: (deploymentId: string, fn: () => Promise<void>) => Promise<void>): Promise<void> {
  const { store, engine, dataPlane } = deps;
  for (const row of await store.liveContainers()) {
    const route = dataPlane.route(row.subdomain);
    if (route?.kind !== 'app' || route.state !== 'live') continue;
    const info = await engine.inspectContainer(row.containerId);
    const upstream = info?.running === true ? info.upstream : null;
    if (upstream === null || (upstream.host === route.upstream.host && upstream.port === route.upstream.port)) continue;
    await runLocked(row.deploymentId, async () => {
      if (!(await store.moveHostPort(row.buildId, row.containerId, upstream.port))) return;
      dataPlane.publish(row.subdomain, { kind: 'app', deploymentId: row.deploymentId, state: 'live', upstream });
      deps.log('info', `container of ${row.subdomain} restarted on port ${upstream.port}; route updated`);
    }).catch(() => undefined);
  }
}
