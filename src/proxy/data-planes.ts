// The data planes part: the routing table, the Node proxy and plane every instance has, and the HAProxy in front when there is one.
import { ConfigError, type Config } from '../config.js';
import type { Log } from '../core/log.js';
import type { Part } from '../core/parts.js';
import { AppProxy } from './app-proxy.js';
import { findHaproxy } from './haproxy/haproxy-binary.js';
import type { HaproxyDataPlane } from './haproxy/haproxy-data-plane.js';
import { nodeDataPlane } from './node-data-plane.js';
import { healthCheckedPlane, type HealthCheckedPlane } from './replica-health.js';
import { RoutingTable, type Upstream } from './routing-table.js';

/** The planes as the other parts use them; `haproxy` and `nodeListening` are set by the edge once it listens. */
export interface DataPlanes {
  readonly table: RoutingTable;
  /** Node's own proxy: every app request when Node serves the public port, the rest (tunnels, pages) behind HAProxy. */
  readonly proxy: AppProxy;
  /** The routes this instance writes (not announced), leaving out replicas that fail their checks. */
  readonly localPlane: HealthCheckedPlane;
  /** HAProxy's binary when HAProxy serves the public port; undefined when Node serves it. */
  readonly haproxyBinary: string | undefined;
  /** The supervised HAProxy, once the edge started it. */
  haproxy: HaproxyDataPlane | undefined;
  /** Whether Node's public listener is up (the Node plane). */
  nodeListening: boolean;
}

/**
 * Finds HAProxy (SLIPWAY_DATA_PLANE: `haproxy` requires it, `auto` falls back to Node) and builds
 * the table, the Node proxy and the local plane. With HAProxy in front the table stays the one the
 * control plane writes (through the port) and HAProxy mirrors it; a request to an old upstream may
 * be in either plane, so both drain.
 */
export async function dataPlanesPart(config: Config, log: Log, onRequestEnd: (app: string, status: number, seconds: number) => void): Promise<Part<DataPlanes>> {
  let haproxyBinary: string | undefined;
  if (config.dataPlane !== 'node') {
    const found = await findHaproxy(config.haproxyBinary);
    if ('path' in found) haproxyBinary = found.path;
    else if (config.dataPlane === 'haproxy') throw new ConfigError(`SLIPWAY_DATA_PLANE=haproxy but ${found.missing} (install Debian's haproxy, or set SLIPWAY_DATA_PLANE=node)`);
    else log('info', `HAProxy not available (${found.missing}): the Node data plane serves the public port`);
  }
  const table = new RoutingTable(config.domain);
  const proxy = new AppProxy({ table, publicProtocol: config.publicUrl.protocol.replace(':', ''), log, onRequestEnd });
  const planes: DataPlanes = {
    table,
    proxy,
    // A replica that stops answering (its node lost) leaves the routes within seconds (decisions §16).
    localPlane: healthCheckedPlane(nodeDataPlane(table, {
      drain: async (upstream: Upstream, timeoutMs: number): Promise<void> => {
        await Promise.all([proxy.drain(upstream, timeoutMs), planes.haproxy?.drain(upstream, timeoutMs)]);
      },
    }), { log }),
    haproxyBinary,
    haproxy: undefined,
    nodeListening: false,
  };
  return {
    offers: planes,
    stop: () => {
      proxy.close();
      planes.localPlane.close();
    },
  };
}

/** Which plane serves the public port, and whether it is up now (the server's metrics). */
export function planeStatus(planes: DataPlanes): { plane: string; up: boolean } {
  return planes.haproxy === undefined ? { plane: 'node', up: planes.nodeListening } : { plane: 'haproxy', up: planes.haproxy.pid !== undefined };
}
