// The data plane port: what the control plane tells whatever serves app hosts (the Node proxy today, HAProxy later).
import type { Upstream } from '../core/upstream.js';
import type { HostAlias, Route } from './routing-table.js';

/**
 * The whole contract between the control plane and a data plane. Routes are published and
 * withdrawn only through it (deployments and tunnels alike); the 404/503 decisions follow from
 * what is published: no route → 404, a route that is not live or connected → 503.
 */
export interface DataPlane {
  /** Publishes (or replaces) the route of `<subdomain>.<domain>`. */
  publish(subdomain: string, route: Route): void;
  /** Withdraws a subdomain's route; with `expected`, only if that route is still the one published. */
  withdraw(subdomain: string, expected?: Route): void;
  /**
   * Publishes a custom domain: `hostname` reaches the deployment at `alias.subdomain` and follows
   * its route (while that route is still the deployment's). Withdrawing the deployment's route drops it.
   */
  publishHost(hostname: string, alias: HostAlias): void;
  /** Withdraws a custom domain. */
  withdrawHost(hostname: string): void;
  /** The route published for a subdomain now, if any. */
  route(subdomain: string): Route | undefined;
  /** Resolves once the requests in flight to `upstream` have finished, or after `timeoutMs`. */
  drain(upstream: Upstream, timeoutMs: number): Promise<void>;
}
