// Keeps routes right when the engine restarts a crashed live container on a new host port.
import type { Db } from '../db/database.js';
import type { RoutingTable } from '../proxy/routing-table.js';
import type { ContainerEngine } from '../runtime/engine.js';

export interface LivePortDeps {
  readonly db: Db;
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
  const { db, engine, table } = deps;
  const live = await db
    .selectFrom('deployments')
    .innerJoin('builds', 'builds.id', 'deployments.live_build_id')
    .select(['deployments.id', 'deployments.subdomain', 'builds.id as build_id', 'builds.container_id'])
    .where('deployments.status', 'in', ['running', 'failed', 'building'])
    .where('builds.container_id', 'is not', null)
    .execute();
  for (const row of live) {
    const route = table.get(row.subdomain);
    if (route?.kind !== 'app' || route.state !== 'live' || row.container_id === null) continue;
    const info = await engine.inspectContainer(row.container_id);
    const port = info?.running === true ? info.hostPort : null;
    if (port === null || port === route.upstream.port) continue;
    await runLocked(row.id, async () => {
      const current = await db.selectFrom('builds').select('container_id').where('id', '=', row.build_id).executeTakeFirst();
      if (current?.container_id !== row.container_id) return;
      await db.updateTable('builds').set({ host_port: port }).where('id', '=', row.build_id).execute();
      table.set(row.subdomain, { kind: 'app', deploymentId: row.id, state: 'live', upstream: { host: '127.0.0.1', port } });
      deps.log('info', `container of ${row.subdomain} restarted on port ${port}; route updated`);
    }).catch(() => undefined);
  }
}
