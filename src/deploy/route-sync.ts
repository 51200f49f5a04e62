// Routes on every instance: changes announced by id (the route itself is read from the store), plus a periodic resync.
import type { DataPlane } from '../proxy/data-plane.js';
import type { HostAlias, Route } from '../proxy/routing-table.js';
import { sameUpstreams } from '../core/upstream.js';
import type { Coordination } from './coordination.js';
import type { DeploymentStore, RouteFact } from './deployment-store.js';

/** Announcements: `d:<deployment id>` (its route changed), `h:<hostname>` (a custom domain changed). */
const DEPLOYMENT = 'd:';
const HOST = 'h:';

/** When this instance itself last changed a deployment's route (a resync read before that is stale for it). */
export interface LocalChanges {
  /** A mark to compare with later. */
  now(): number;
  changedAfter(deploymentId: string, mark: number): boolean;
}

/**
 * A data plane that also announces each change of an app route or custom domain to the other
 * instances (ids only, with this instance's id so it ignores its own). Tunnel routes stay local.
 */
export function announcingDataPlane(inner: DataPlane, coordination: Coordination, self: string): DataPlane & LocalChanges {
  let clock = 0;
  const changedAt = new Map<string, number>();
  const announceDeployment = (route: Route | undefined): void => {
    if (route?.kind !== 'app') return;
    changedAt.set(route.deploymentId, ++clock);
    coordination.announce(`${self} ${DEPLOYMENT}${route.deploymentId}`);
  };
  return {
    now: () => clock,
    changedAfter: (deploymentId, mark) => (changedAt.get(deploymentId) ?? 0) > mark,
    publish(subdomain, route) {
      inner.publish(subdomain, route);
      announceDeployment(route);
    },
    withdraw(subdomain, expected) {
      const before = inner.route(subdomain);
      inner.withdraw(subdomain, expected);
      if (inner.route(subdomain) !== before) announceDeployment(before);
    },
    publishHost(hostname, alias) {
      inner.publishHost(hostname, alias);
      coordination.announce(`${self} ${HOST}${hostname}`);
    },
    withdrawHost(hostname) {
      inner.withdrawHost(hostname);
      coordination.announce(`${self} ${HOST}${hostname}`);
    },
    route: (subdomain) => inner.route(subdomain),
    drain: (upstream, timeoutMs) => inner.drain(upstream, timeoutMs),
  };
}

export interface RouteSyncDeps {
  readonly coordination: Coordination;
  readonly store: DeploymentStore;
  /** The local plane itself (what the sync writes is not announced again). */
  readonly dataPlane: DataPlane;
  /** Every app route published now, by subdomain (to find routes of deployments gone). */
  readonly appRoutes: () => Iterable<readonly [string, Route]>;
  /** Custom domains now published, and as the database has them. */
  readonly publishedHosts: () => Iterable<readonly [string, HostAlias]>;
  readonly storedHosts: () => Promise<Array<{ hostname: string; deploymentId: string; subdomain: string }>>;
  /** Deployments whose route this instance is deciding itself now (its recovery): left alone. */
  readonly isLocal: (deploymentId: string) => boolean;
  /** This instance's own route changes (announced, so skipped by the feed). */
  readonly localChanges: LocalChanges;
  readonly self: string;
  readonly resyncMs: number;
  readonly log: (level: 'info' | 'warn' | 'error', msg: string, detail?: object) => void;
}

/** The route a deployment's facts give (what start-up recovery publishes, for a running release). */
export function routeOf(fact: RouteFact): Route {
  const serving = fact.upstreams.length > 0 && (fact.status === 'running' || fact.status === 'failed' || fact.status === 'building');
  if (serving) return { kind: 'app', deploymentId: fact.deploymentId, state: 'live', upstreams: fact.upstreams };
  const state = fact.status === 'stopped' ? 'stopped' : fact.status === 'failed' ? 'failed' : 'starting';
  return { kind: 'app', deploymentId: fact.deploymentId, state };
}

function sameRoute(a: Route | undefined, b: Route): boolean {
  if (a === undefined || a.kind !== 'app' || b.kind !== 'app' || a.deploymentId !== b.deploymentId || a.state !== b.state) return false;
  if (a.state === 'live' && b.state === 'live') return sameUpstreams(a.upstreams, b.upstreams);
  return true;
}

/**
 * Applies announced changes (one deployment read again, or the custom domains) and resyncs every
 * route every `resyncMs` and after each reconnect of the feed. Returns a stop function.
 */
export function syncRoutes(deps: RouteSyncDeps): () => void {
  const { dataPlane, store } = deps;
  const apply = (fact: RouteFact, mark: number): void => {
    // Changed here since the facts were read: this instance's own write is newer than what was read.
    if (deps.isLocal(fact.deploymentId) || deps.localChanges.changedAfter(fact.deploymentId, mark)) return;
    const route = routeOf(fact);
    if (!sameRoute(dataPlane.route(fact.subdomain), route)) dataPlane.publish(fact.subdomain, route);
  };
  const syncDeployment = async (deploymentId: string): Promise<void> => {
    const mark = deps.localChanges.now();
    const facts = await store.routeFacts(deploymentId);
    for (const fact of facts) apply(fact, mark);
    if (facts.length === 0) {
      if (deps.localChanges.changedAfter(deploymentId, mark)) return;
      for (const [subdomain, route] of [...deps.appRoutes()]) if (route.kind === 'app' && route.deploymentId === deploymentId) dataPlane.withdraw(subdomain, route);
    } else {
      // A subdomain the deployment no longer holds (never today, but cheap to keep right).
      const subdomain = facts[0]?.subdomain;
      for (const [other, route] of [...deps.appRoutes()]) if (route.kind === 'app' && route.deploymentId === deploymentId && other !== subdomain) dataPlane.withdraw(other, route);
    }
  };
  const syncHosts = async (): Promise<void> => {
    const stored = await deps.storedHosts();
    const wanted = new Map(stored.map((h) => [h.hostname, h]));
    for (const [hostname, alias] of [...deps.publishedHosts()]) {
      const want = wanted.get(hostname);
      if (want === undefined) dataPlane.withdrawHost(hostname);
      else if (want.deploymentId === alias.deploymentId && want.subdomain === alias.subdomain) wanted.delete(hostname);
    }
    for (const h of wanted.values()) dataPlane.publishHost(h.hostname, { subdomain: h.subdomain, deploymentId: h.deploymentId });
  };
  const syncAll = async (): Promise<void> => {
    const mark = deps.localChanges.now();
    const facts = await store.routeFacts();
    const known = new Set<string>();
    for (const fact of facts) {
      known.add(fact.deploymentId);
      apply(fact, mark);
    }
    for (const [subdomain, route] of [...deps.appRoutes()]) {
      if (route.kind === 'app' && !known.has(route.deploymentId) && !deps.localChanges.changedAfter(route.deploymentId, mark)) dataPlane.withdraw(subdomain, route);
    }
    await syncHosts();
  };
  // One sync at a time, in order: a change announced while one runs is applied after it.
  let chain: Promise<void> = Promise.resolve();
  const run = (what: string, task: () => Promise<void>): void => {
    chain = chain.then(task).catch((err: unknown) => deps.log('warn', `route sync (${what}) failed; the periodic resync repairs it`, { err }));
  };
  const unsubscribe = deps.coordination.onAnnounce((message) => {
    if (message === null) return run('resync', syncAll);
    const [origin, id] = message.split(' ');
    if (origin === deps.self || id === undefined) return;
    if (id.startsWith(DEPLOYMENT)) run(id, () => syncDeployment(id.slice(DEPLOYMENT.length)));
    else if (id.startsWith(HOST)) run(id, syncHosts);
  });
  const timer = setInterval(() => run('resync', syncAll), deps.resyncMs);
  timer.unref();
  return () => {
    clearInterval(timer);
    unsubscribe();
  };
}
