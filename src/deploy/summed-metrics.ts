// A release's metrics as the API shows them: each replica's figures, and their sums.
import type { DeploymentMetrics } from '../domain/operations.js';
import type { ReplicaStats } from '../runtime/app-runtime.js';

/** A release's metrics: each replica's figures, and their sums (started_at: the earliest start). */
export function summedMetrics(stats: readonly ReplicaStats[]): DeploymentMetrics {
  const replicas = stats.map((r) => ({
    replica: r.replica,
    cpu_percent: r.cpuPercent,
    memory_bytes: r.memoryBytes,
    memory_limit_bytes: r.memoryLimitBytes,
    network_rx_bytes: r.networkRxBytes,
    network_tx_bytes: r.networkTxBytes,
    restarts: r.restarts,
    started_at: r.startedAt,
  }));
  const sum = (pick: (r: (typeof replicas)[number]) => number): number => replicas.reduce((total, r) => total + pick(r), 0);
  return {
    cpu_percent: sum((r) => r.cpu_percent),
    memory_bytes: sum((r) => r.memory_bytes),
    memory_limit_bytes: sum((r) => r.memory_limit_bytes),
    network_rx_bytes: sum((r) => r.network_rx_bytes),
    network_tx_bytes: sum((r) => r.network_tx_bytes),
    restarts: sum((r) => r.restarts),
    started_at: replicas.map((r) => r.started_at).sort()[0] ?? new Date(0).toISOString(),
    replicas,
  };
}
