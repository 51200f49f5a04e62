// The embedded Node data plane behind the port: the routing table it serves from, and the proxy's drain.
import type { DataPlane } from './data-plane.js';
import type { RoutingTable } from './routing-table.js';

/** A data plane over the in-process routing table, drained by the Node proxy that serves it. */
export function nodeDataPlane(table: RoutingTable, proxy: Pick<DataPlane, 'drain'>): DataPlane {
  return {
    publish: (subdomain, route) => table.set(subdomain, route),
    withdraw: (subdomain, expected) => table.delete(subdomain, expected),
    publishHost: (hostname, alias) => table.setHost(hostname, alias),
    withdrawHost: (hostname) => table.deleteHost(hostname),
    route: (subdomain) => table.get(subdomain),
    drain: (upstream, timeoutMs) => proxy.drain(upstream, timeoutMs),
  };
}
