// The server's Prometheus metrics (decisions §12): app requests, builds, live tunnels, data plane health.
import { Counter, Gauge, Histogram, MetricsRegistry } from '../core/metrics.js';

/** Seconds: from a fast static answer to a slow upstream. */
const REQUEST_BOUNDS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];
/** Seconds: from a cached rebuild to the build time limit. */
const BUILD_BOUNDS = [5, 10, 30, 60, 120, 300, 600, 1200, 1800, 3600];

export interface ServerMetricsSources {
  /** Tunnels whose client is connected now. */
  liveTunnels(): number;
  /** Which data plane serves the public ports, and whether it is up now. */
  dataPlane(): { plane: string; up: boolean };
}

/** The families, the hooks that feed them, and the text a scrape gets. */
export interface ServerMetrics {
  /** An app-host request ended (see AppProxyOptions.onRequestEnd). */
  requestEnded(app: string, status: number, seconds: number): void;
  buildEnded(outcome: 'succeeded' | 'failed' | 'cancelled', seconds: number): void;
  render(): string;
}

/** `2xx`…`5xx`, or `none` when the visitor got no status (it left, or the connection was cut). */
export function statusClass(status: number): string {
  return status >= 100 && status <= 599 ? `${Math.floor(status / 100)}xx` : 'none';
}

export function createServerMetrics(sources: ServerMetricsSources): ServerMetrics {
  const registry = new MetricsRegistry();
  const requests = registry.add(
    new Counter('slipway_http_requests_total', 'Requests to app hosts by app (subdomain; empty when no route) and status class.', ['app', 'code']),
  );
  const latency = registry.add(
    new Histogram('slipway_http_request_duration_seconds', 'Time from an app-host request to the end of its answer, by app.', REQUEST_BOUNDS, ['app']),
  );
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
      requests.inc([app, statusClass(status)]);
      latency.observe(seconds, [app]);
    },
    buildEnded(outcome, seconds) {
      builds.inc([outcome]);
      buildTime.observe(seconds, [outcome]);
    },
    render: () => registry.render(),
  };
}
