// Health-checked replicas at the edge: a replica that stops answering (its node lost, its task gone) leaves the routes within seconds, and comes back when it answers again.
import net from 'node:net';
import type { Upstream } from '../core/upstream.js';
import type { DataPlane } from './data-plane.js';
import type { Route } from './routing-table.js';

/** Whether an upstream takes a connection now (false: refused, unreachable or silent until `signal` ends). */
export type UpstreamProbe = (upstream: Upstream, signal: AbortSignal) => Promise<boolean>;

export interface ReplicaHealthOptions {
  /** How a replica is checked (default: a TCP connection, `tcpProbe`). */
  readonly probe?: UpstreamProbe;
  /** How often every replica of a route with more than one is checked (default 2 s). */
  readonly intervalMs?: number;
  /** How long one check may take (default 1.5 s). */
  readonly timeoutMs?: number;
  /** Failed checks in a row that take a replica out (default 2). */
  readonly fall?: number;
  readonly log?: (level: 'info' | 'warn', message: string, fields?: Record<string, unknown>) => void;
}

/** A data plane whose live app routes leave out the replicas that fail their checks; `close` stops the checks. */
export interface HealthCheckedPlane extends DataPlane {
  /** The routes as published (every replica), which the data plane below may serve with fewer. */
  routes(): IterableIterator<[string, Route]>;
  /** Checks every replica once now (the timer does this every interval). */
  checkNow(): Promise<void>;
  close(): void;
}

const DEFAULT_INTERVAL_MS = 2000;
const DEFAULT_TIMEOUT_MS = 1500;
const DEFAULT_FALL = 2;

const keyOf = (u: Upstream): string => `${u.host}:${u.port}`;

/** A TCP connection to the replica: accepted is healthy; refused, unreachable or no answer in time is not. */
export const tcpProbe: UpstreamProbe = (upstream, signal) =>
  new Promise((resolve) => {
    if (signal.aborted) return resolve(false);
    const socket = net.connect({ host: upstream.host, port: upstream.port });
    const done = (healthy: boolean): void => {
      signal.removeEventListener('abort', onAbort);
      socket.destroy();
      resolve(healthy);
    };
    const onAbort = (): void => done(false);
    signal.addEventListener('abort', onAbort, { once: true });
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
  });

/**
 * Wraps the data plane the control plane publishes to. Routes of live apps with two replicas or more
 * have each replica checked every interval; one that fails `fall` checks in a row is left out of the
 * route given to `inner` (both data planes serve from it) until a check succeeds again. When every
 * replica fails, all stay (the visitor gets the upstream's own error, as with one replica). A route
 * with one replica is never checked: there is nothing to send its requests to instead. The runtime's
 * view (the stored upstreams) is untouched: it replaces lost replicas in its own time.
 */
export function healthCheckedPlane(inner: DataPlane, options: ReplicaHealthOptions = {}): HealthCheckedPlane {
  const probe = options.probe ?? tcpProbe;
  const intervalMs = options.intervalMs ?? DEFAULT_INTERVAL_MS;
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const fall = options.fall ?? DEFAULT_FALL;
  /** subdomain (lower case) → the route as published */
  const published = new Map<string, Route>();
  /** "host:port" → failed checks in a row (absent: healthy, never failed) */
  const failures = new Map<string, number>();
  const down = (u: Upstream): boolean => (failures.get(keyOf(u)) ?? 0) >= fall;

  /** The route `inner` serves: the published one, or a copy without the replicas that are down. */
  const served = (route: Route): Route => {
    if (route.kind !== 'app' || route.state !== 'live' || route.upstreams.length < 2) return route;
    const up = route.upstreams.filter((u) => !down(u));
    return up.length === route.upstreams.length || up.length === 0 ? route : { ...route, upstreams: up };
  };
  const sameServed = (a: Route | undefined, b: Route): boolean =>
    a === b ||
    (a?.kind === 'app' && a.state === 'live' && b.kind === 'app' && b.state === 'live' && a.deploymentId === b.deploymentId &&
      a.upstreams.length === b.upstreams.length && a.upstreams.every((u, i) => keyOf(u) === keyOf(b.upstreams[i] as Upstream)));

  const checked = (): Upstream[] => {
    const seen = new Map<string, Upstream>();
    for (const route of published.values()) {
      if (route.kind === 'app' && route.state === 'live' && route.upstreams.length >= 2) for (const u of route.upstreams) seen.set(keyOf(u), u);
    }
    return [...seen.values()];
  };

  let running: Promise<void> | undefined;
  const checkNow = (): Promise<void> => {
    running ??= (async () => {
      const upstreams = checked();
      const results = await Promise.all(upstreams.map(async (u) => [u, await probe(u, AbortSignal.timeout(timeoutMs)).catch(() => false)] as const));
      // Only replicas still in some route keep a record.
      const keep = new Set(checked().map(keyOf));
      for (const key of [...failures.keys()]) if (!keep.has(key)) failures.delete(key);
      let changed = false;
      for (const [u, healthy] of results) {
        const key = keyOf(u);
        if (!keep.has(key)) continue;
        const before = down(u);
        if (healthy) failures.delete(key);
        else failures.set(key, (failures.get(key) ?? 0) + 1);
        if (before !== down(u)) {
          changed = true;
          options.log?.(healthy ? 'info' : 'warn', healthy ? 'a replica answers again and is back at the edge' : 'a replica does not answer and leaves the edge', { upstream: key });
        }
      }
      if (!changed) return;
      for (const [subdomain, route] of published) {
        const next = served(route);
        if (!sameServed(inner.route(subdomain), next)) inner.publish(subdomain, next);
      }
    })().finally(() => {
      running = undefined;
    });
    return running;
  };
  const timer = setInterval(() => void checkNow(), intervalMs);
  timer.unref();

  return {
    publish(subdomain, route) {
      published.set(subdomain.toLowerCase(), route);
      inner.publish(subdomain, served(route));
    },
    withdraw(subdomain, expected) {
      const key = subdomain.toLowerCase();
      const current = published.get(key);
      // `expected` may be the route as published or as served (a caller reading the table below).
      if (expected !== undefined && expected !== current && expected !== inner.route(key)) return;
      published.delete(key);
      inner.withdraw(subdomain);
    },
    publishHost: (hostname, alias) => inner.publishHost(hostname, alias),
    withdrawHost: (hostname) => inner.withdrawHost(hostname),
    route: (subdomain) => published.get(subdomain.toLowerCase()) ?? inner.route(subdomain),
    drain: (upstream, ms) => inner.drain(upstream, ms),
    routes: () => published.entries(),
    checkNow,
    close: () => clearInterval(timer),
  };
}
