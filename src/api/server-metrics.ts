// The server's Prometheus metrics (decisions §12): app requests, builds, live tunnels, data plane health.
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';

/** Seconds: from a fast static answer to a slow upstream. */
const REQUEST_BOUNDS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];
/** Seconds: from a cached rebuild to the build time limit. */
const BUILD_BOUNDS = [5, 10, 30, 60, 120, 300, 600, 1200, 1800, 3600];
const CLASSES = ['1xx', '2xx', '3xx', '4xx', '5xx', 'none'] as const;
type StatusClass = (typeof CLASSES)[number];

/** What HAProxy reports of one app server (see HaproxyDataPlane.appStats). */
export interface AppServerFigures {
  readonly server: string;
  readonly app: string | undefined;
  readonly serving: boolean;
  readonly responses: Readonly<Record<StatusClass, number>>;
  readonly averageSeconds: number;
}

export interface ServerMetricsSources {
  /** Tunnels whose client is connected now. */
  liveTunnels(): number;
  /** Which data plane serves the public ports, and whether it is up now. */
  dataPlane(): { plane: string; up: boolean };
  /** With the HAProxy data plane: its per-server counters, read at each scrape. */
  haproxyServers?(): Promise<readonly AppServerFigures[]>;
}

/** The families, the hooks that feed them, and the text a scrape gets. */
export interface ServerMetrics {
  /** An app-host request ended (see AppProxyOptions.onRequestEnd). */
  requestEnded(app: string, status: number, seconds: number): void;
  buildEnded(outcome: 'succeeded' | 'failed' | 'cancelled', seconds: number): void;
  render(): Promise<string>;
}

/** `2xx`…`5xx`, or `none` when the visitor got no status (it left, or the connection was cut). */
export function statusClass(status: number): StatusClass {
  return status >= 100 && status <= 599 ? (`${Math.floor(status / 100)}xx` as StatusClass) : 'none';
}

/**
 * The last figures HAProxy gave, per app. The data plane keeps the counts of servers it removed
 * (each release gets a server whose counters start at zero) in a `retired:<app>` row, so the sum
 * per app only grows while HAProxy runs; a restart of HAProxy resets it (a counter reset).
 */
class HaproxyTotals {
  #servers: readonly AppServerFigures[] = [];

  update(servers: readonly AppServerFigures[]): void {
    this.#servers = servers;
  }

  totals(): Map<string, Record<StatusClass, number>> {
    const out = new Map<string, Record<StatusClass, number>>();
    for (const s of this.#servers) {
      if (s.app === undefined) continue;
      const total = out.get(s.app) ?? zero();
      for (const c of CLASSES) total[c] += s.responses[c];
      out.set(s.app, total);
    }
    return out;
  }

  averages(): Map<string, number> {
    return new Map(this.#servers.filter((s) => s.serving && s.app !== undefined && Number.isFinite(s.averageSeconds)).map((s) => [s.app!, s.averageSeconds]));
  }
}

function zero(): Record<StatusClass, number> {
  return { '1xx': 0, '2xx': 0, '3xx': 0, '4xx': 0, '5xx': 0, none: 0 };
}

/**
 * The families on `registry`, one per server instance (main.ts makes it; no default registry, so two
 * servers in one process count apart). Scrape-time figures are set by each family's collect().
 */
export function createServerMetrics(registry: Registry, sources: ServerMetricsSources): ServerMetrics {
  const haproxy = new HaproxyTotals();
  // What the Node proxy counted, by app then status class; merged into the exposed family at each scrape.
  const nodeRequests = new Map<string, Record<StatusClass, number>>();
  new Counter({
    name: 'slipway_http_requests_total',
    help: 'Requests to app hosts by app (subdomain; empty when no route) and status class: those the Node proxy answered plus those HAProxy sent straight to an app.',
    labelNames: ['app', 'code'],
    registers: [registry],
    // Synchronous: reset, refill and prom-client's read of the values run in one turn, so scrapes
    // at the same time cannot interleave and double a count.
    collect() {
      this.reset();
      for (const source of [nodeRequests, haproxy.totals()]) {
        for (const [app, counts] of source) for (const c of CLASSES) if (counts[c] > 0) this.inc({ app, code: c }, counts[c]);
      }
    },
  });
  const latency = new Histogram({
    name: 'slipway_http_request_duration_seconds',
    help: 'Time from an app-host request to the end of its answer, by app (requests the Node proxy served).',
    labelNames: ['app'],
    buckets: REQUEST_BOUNDS,
    registers: [registry],
  });
  if (sources.haproxyServers !== undefined) {
    new Gauge({
      name: 'slipway_haproxy_response_time_seconds',
      help: "HAProxy's average total time of the last 1024 requests it sent straight to an app, by app.",
      labelNames: ['app'],
      registers: [registry],
      collect() {
        this.reset();
        for (const [app, value] of haproxy.averages()) this.set({ app }, value);
      },
    });
  }
  const builds = new Counter({ name: 'slipway_builds_total', help: 'Builds ended since the server started, by outcome.', labelNames: ['outcome'], registers: [registry] });
  const buildTime = new Histogram({
    name: 'slipway_build_duration_seconds',
    help: 'Build durations (image build and release), by outcome.',
    labelNames: ['outcome'],
    buckets: BUILD_BOUNDS,
    registers: [registry],
  });
  new Gauge({
    name: 'slipway_tunnels_live',
    help: 'Tunnels whose client is connected.',
    registers: [registry],
    collect() {
      this.set(sources.liveTunnels());
    },
  });
  new Gauge({
    name: 'slipway_data_plane_up',
    help: 'Whether the data plane serving the public ports is up (1) or not (0).',
    labelNames: ['plane'],
    registers: [registry],
    collect() {
      const { plane, up } = sources.dataPlane();
      this.reset();
      this.set({ plane }, up ? 1 : 0);
    },
  });
  for (const outcome of ['succeeded', 'failed', 'cancelled']) builds.inc({ outcome }, 0);
  return {
    requestEnded(app, status, seconds) {
      const counts = nodeRequests.get(app) ?? zero();
      counts[statusClass(status)] += 1;
      nodeRequests.set(app, counts);
      latency.observe({ app }, seconds);
    },
    buildEnded(outcome, seconds) {
      builds.inc({ outcome });
      buildTime.observe({ outcome }, seconds);
    },
    async render() {
      // Read before the families collect (they run concurrently). HAProxy down or restarting: its
      // last figures stand, and data_plane_up says it is down.
      if (sources.haproxyServers !== undefined) {
        const servers = await sources.haproxyServers().catch(() => undefined);
        if (servers !== undefined) haproxy.update(servers);
      }
      return registry.metrics();
    },
  };
}
