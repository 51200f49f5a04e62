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
  const services = serviceSums(stats);
  return {
    cpu_percent: sum((r) => r.cpu_percent),
    memory_bytes: sum((r) => r.memory_bytes),
    memory_limit_bytes: sum((r) => r.memory_limit_bytes),
    network_rx_bytes: sum((r) => r.network_rx_bytes),
    network_tx_bytes: sum((r) => r.network_tx_bytes),
    restarts: sum((r) => r.restarts),
    started_at: replicas.map((r) => r.started_at).sort()[0] ?? new Date(0).toISOString(),
    replicas,
    ...(services.length === 0 ? {} : { services }),
  };
}

/** A set's figures per service (empty for a single image): each summed over the service's running containers. */
function serviceSums(stats: readonly ReplicaStats[]): NonNullable<DeploymentMetrics['services']> {
  const names = [...new Set(stats.flatMap((s) => (s.service === undefined ? [] : [s.service])))];
  return names.map((service) => {
    const own = stats.filter((s) => s.service === service);
    const sum = (pick: (s: ReplicaStats) => number): number => own.reduce((total, s) => total + pick(s), 0);
    return {
      service,
      replicas: own.length,
      cpu_percent: sum((s) => s.cpuPercent),
      memory_bytes: sum((s) => s.memoryBytes),
      memory_limit_bytes: sum((s) => s.memoryLimitBytes),
      network_rx_bytes: sum((s) => s.networkRxBytes),
      network_tx_bytes: sum((s) => s.networkTxBytes),
      restarts: sum((s) => s.restarts),
      started_at: own.map((s) => s.startedAt).sort()[0] ?? new Date(0).toISOString(),
    };
  });
}
