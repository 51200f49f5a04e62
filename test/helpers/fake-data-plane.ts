// An in-memory data plane for lifecycle unit tests: the published routes, and a record of every call.
import type { Upstream } from '../../src/core/upstream.js';
import type { DataPlane } from '../../src/proxy/data-plane.js';
import type { HostAlias, Route } from '../../src/proxy/routing-table.js';

export class FakeDataPlane implements DataPlane {
  readonly routes = new Map<string, Route>();
  /** `publish <subdomain> <state>`, `withdraw <subdomain>`, `drain <host:port>`, in order. */
  readonly calls: string[] = [];

  publish(subdomain: string, route: Route): void {
    this.calls.push(`publish ${subdomain} ${route.state}`);
    this.routes.set(subdomain, route);
  }

  withdraw(subdomain: string, expected?: Route): void {
    if (expected !== undefined && this.routes.get(subdomain) !== expected) return;
    this.calls.push(`withdraw ${subdomain}`);
    this.routes.delete(subdomain);
  }

  publishHost(hostname: string, alias: HostAlias): void {
    this.calls.push(`publishHost ${hostname} ${alias.subdomain}`);
  }

  withdrawHost(hostname: string): void {
    this.calls.push(`withdrawHost ${hostname}`);
  }

  route(subdomain: string): Route | undefined {
    return this.routes.get(subdomain);
  }

  async drain(upstream: Upstream): Promise<void> {
    this.calls.push(`drain ${upstream.host}:${upstream.port}`);
  }

  /** What a visitor of `subdomain` would get: 404, 503, or the (first replica's) upstream it is sent to. */
  answer(subdomain: string): '404' | '503' | Upstream {
    const route = this.routes.get(subdomain);
    if (route === undefined) return '404';
    if (route.kind === 'app' && route.state === 'live') return route.upstreams[0] ?? '503';
    return '503';
  }

  /** Every upstream a live subdomain is served by (one per replica); empty when it is not live. */
  upstreams(subdomain: string): readonly Upstream[] {
    const route = this.routes.get(subdomain);
    return route?.kind === 'app' && route.state === 'live' ? route.upstreams : [];
  }
}
