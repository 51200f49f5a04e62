// Samples every live container's stats at an interval into the metrics history, a few at a time, so the dashboard's charts have the last hour on page load.
import type { BackgroundTask } from '../core/background.js';
import type { ContainerStats } from '../runtime/engine.js';
import type { MetricsHistory } from '../domain/metrics-history.js';

export interface MetricsSamplerDeps {
  readonly history: MetricsHistory;
  /** The live releases (deployment and container), as the store knows them. */
  liveContainers(): Promise<ReadonlyArray<{ deploymentId: string; containerId: string }>>;
  containerStats(containerId: string, signal: AbortSignal): Promise<ContainerStats | null>;
}

/** Time a round may take before its stats calls are abandoned (the next round samples again). */
const ROUND_TIMEOUT_MS = 30_000;

/**
 * The sampling task: every `intervalMs` (a round never overlaps the previous one), `concurrency`
 * containers at a time, on every instance (each samples what its own API serves).
 */
export function metricsSamplingTask(deps: MetricsSamplerDeps, intervalMs = 10_000, concurrency = 4): BackgroundTask {
  const round = async (stopped: AbortSignal): Promise<void> => {
    const signal = AbortSignal.any([stopped, AbortSignal.timeout(ROUND_TIMEOUT_MS)]);
    const live = await deps.liveContainers();
    const queue = [...live];
    const worker = async (): Promise<void> => {
      for (let item = queue.shift(); item !== undefined && !signal.aborted; item = queue.shift()) {
        const stats = await deps.containerStats(item.containerId, signal).catch(() => null);
        if (stats === null) continue;
        deps.history.record(item.deploymentId, {
          at: Date.now(),
          containerId: item.containerId,
          cpuPercent: stats.cpuPercent,
          memoryBytes: stats.memoryBytes,
          memoryLimitBytes: stats.memoryLimitBytes,
          networkRxBytes: stats.networkRxBytes,
          networkTxBytes: stats.networkTxBytes,
        });
      }
    };
    await Promise.all(Array.from({ length: Math.min(concurrency, queue.length) }, worker));
    deps.history.prune(new Set(live.map((l) => l.deploymentId)), Date.now() - deps.history.capacity * intervalMs);
  };
  return { name: 'sampling app metrics', scope: 'everyInstance', everyMs: intervalMs, run: round };
}
