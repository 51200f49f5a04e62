// The server's Prometheus metrics (decisions §12): app requests, builds, live tunnels, data plane health.
import { Collected, Counter, Gauge, Histogram, MetricsRegistry } from '../core/metrics.js';

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

export function createServerMetrics(sources: ServerMetricsSources): ServerMetrics {
  const registry = new MetricsRegistry();
  const haproxy = new HaproxyTotals();
  const nodeRequests = new Counter('slipway_http_requests_total', '', ['app', 'code']);
  registry.add(
    new Collected(
      'slipway_http_requests_total',
      'Requests to app hosts by app (subdomain; empty when no route) and status class: those the Node proxy answered plus those HAProxy sent straight to an app.',
      'counter',
      ['app', 'code'],
      () => {
        const merged = new Map<string, { labels: string[]; value: number }>();
        const add = (app: string, code: string, value: number): void => {
          const key = `${app}\u0000${code}`;
          const entry = merged.get(key);
          if (entry === undefined) merged.set(key, { labels: [app, code], value });
          else entry.value += value;
        };
        for (const { labels, value } of nodeRequests.samples()) add(labels[0] ?? '', labels[1] ?? '', value);
        for (const [app, counts] of haproxy.totals()) for (const c of CLASSES) if (counts[c] > 0) add(app, c, counts[c]);
        return [...merged.values()];
      },
    ),
  );
  const latency = registry.add(
    new Histogram('slipway_http_request_duration_seconds', 'Time from an app-host request to the end of its answer, by app (requests the Node proxy served).', REQUEST_BOUNDS, ['app']),
  );
  if (sources.haproxyServers !== undefined) {
    registry.add(
      new Gauge('slipway_haproxy_response_time_seconds', "HAProxy's average total time of the last 1024 requests it sent straight to an app, by app.", ['app'], () =>
        [...haproxy.averages()].map(([app, value]) => ({ labels: [app], value })),
      ),
    );
  }
  const builds = registry.add(new Counter('slipway_builds_total', 'Builds ended since the server started, by outcome.', ['outcome']));
  const buildTime = registry.add(
    new Histogram('slipway_build_duration_seconds', 'Build durations (image build and release), by outcome.', BUILD_BOUNDS, ['outcome']),
  );
  registry.add(new Gauge('slipway_tunnels_live', 'Tunnels whose client is connected.', [], () => [{ labels: [], value: sources.liveTunnels() }]));
  registry.add(
    new Gauge('slipway_data_plane_up', 'Whether the data plane serving the public ports is up (1) or not (0).', ['plane'], () => {
      const { plane, up } = sources.dataPlane();
      return [{ labels: [plane], value: up ? 1 : 0 }];
    }),
  );
  for (const outcome of ['succeeded', 'failed', 'cancelled']) builds.inc([outcome], 0);
  return {
    requestEnded(app, status, seconds) {
      nodeRequests.inc([app, statusClass(status)]);
      latency.observe(seconds, [app]);
    },
    buildEnded(outcome, seconds) {
      builds.inc([outcome]);
      buildTime.observe(seconds, [outcome]);
    },
    async render() {
      // HAProxy down or restarting: its last figures stand, and data_plane_up says it is down.
      if (sources.haproxyServers !== undefined) {
        const servers = await sources.haproxyServers().catch(() => undefined);
        if (servers !== undefined) haproxy.update(servers);
      }
      return registry.render();
    },
  };
}
