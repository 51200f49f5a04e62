// Draining a node without failing a request: its replicas leave the edge, their requests in flight end, then the runtime drains it.
import type { Upstream } from '../core/upstream.js';
import type { NodeDirectory } from '../domain/nodes.js';
import type { DataPlane } from '../proxy/data-plane.js';

export interface NodeDrainDeps {
  /** The runtime's hold on a node's replicas: while a node is leaving, none of its replicas is an upstream. */
  readonly runtime: { leave(nodeId: string): void; stay(nodeId: string): void };
  /** The live releases' subdomains (whose routes may send traffic to the node). */
  liveSubdomains(): Promise<readonly string[]>;
  /** Re-reads every live release's upstreams and re-routes those that changed (the live watcher's look). */
  refreshRoutes(): Promise<void>;
  readonly dataPlane: Pick<DataPlane, 'route' | 'drain'>;
  /** How long requests in flight to a leaving replica may take to end. */
  readonly drainMs: number;
}

/**
 * A node directory whose drain first takes the node's replicas out of every route (so no new
 * request goes there) and waits for the requests in flight to end; only then does the runtime
 * stop them and start their replacements. With 2 or more replicas a drain fails no request.
 */
export function drainingNodes(inner: NodeDirectory, deps: NodeDrainDeps): NodeDirectory {
  return {
    list: (signal) => inner.list(signal),
    async setAvailability(id, availability, signal) {
      if (availability !== 'drain') return inner.setAvailability(id, availability, signal);
      const node = (await inner.list(signal)).find((n) => n.id === id);
      if (node === undefined || node.availability === 'drain') return inner.setAvailability(id, availability, signal);
      deps.runtime.leave(id);
      try {
        const subdomains = await deps.liveSubdomains();
        const leaving: Upstream[] = subdomains.flatMap((subdomain) => {
          const route = deps.dataPlane.route(subdomain);
          return route?.kind === 'app' && route.state === 'live' ? route.upstreams.filter((u) => u.host === node.address) : [];
        });
        await deps.refreshRoutes();
        await Promise.all(leaving.map((upstream) => deps.dataPlane.drain(upstream, deps.drainMs)));
        return await inner.setAvailability(id, availability, signal);
      } finally {
        deps.runtime.stay(id);
      }
    },
  };
}
