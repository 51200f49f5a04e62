// Keeps routes right when the engine restarts a crashed live container on a new host port.
import type { RoutingTable } from '../proxy/routing-table.js';
import type { ContainerEngine } from '../runtime/engine.js';
import type { DeploymentStore } from './deployment-store.js';

export interface LivePortDeps {
  readonly store: DeploymentStore;
  readonly engine: ContainerEngine;
  readonly table: RoutingTable;
  readonly log: (level: 'info' | 'warn' | 'error', msg: string, detail?: object) => void;
}

/**
 * Re-reads the host port of every live container and re-routes the ones that moved (the restart
 * policy brings a crashed container back on a new port). `runLocked` runs the update under the
 * deployment's lock, so it never races a release switching traffic.
 */
export async function refreshLivePorts(deps: LivePortDeps, runLocked: (deploymentId: string, fn: () => Promise<void>) => Promise<void>): Promise<void> {
  const { store, engine, table } = deps;
  for (const row of await store.liveContainers()) {
    const route = table.get(row.subdomain);
    if (route?.kind !== 'app' || route.state !== 'live') continue;
    const info = await engine.inspectContainer(row.containerId);
    const port = info?.running === true ? info.hostPort : null;
    if (port === null || port === route.upstream.port) continue;
    await runLocked(row.deploymentId, async () => {
      if (!(await store.moveHostPort(row.buildId, row.containerId, port))) return;
      table.set(row.subdomain, { kind: 'app', deploymentId: row.deploymentId, state: 'live', upstream: { host: '127.0.0.1', port } });
      deps.log('info', `container of ${row.subdomain} restarted on port ${port}; route updated`);
    }).catch(() => undefined);
  }
}
