// Reading the engine's stats answer: CPU percent from the cpu/precpu deltas, memory without page cache, network totals.
import type { ContainerStats } from '../engine.js';

/** The fields of the engine's `GET /containers/{id}/stats?stream=false` answer that are read. */
export interface EngineStatsSample {
  cpu_stats?: { cpu_usage?: { total_usage?: number; percpu_usage?: number[] | null }; system_cpu_usage?: number; online_cpus?: number };
  precpu_stats?: { cpu_usage?: { total_usage?: number }; system_cpu_usage?: number };
  memory_stats?: { usage?: number; limit?: number; stats?: Record<string, number> };
  networks?: Record<string, { rx_bytes?: number; tx_bytes?: number }>;
}

/**
 * The resource figures of one stats sample. CPU is the container's share of the host's CPU time
 * between the engine's two samples, scaled to CPUs (as `docker stats` shows it): 0 when the engine
 * gave no previous sample. Memory excludes the inactive page cache (cgroup v2 `inactive_file`,
 * v1 `total_inactive_file`), as `docker stats` does.
 */
export function statsFigures(sample: EngineStatsSample): Pick<ContainerStats, 'cpuPercent' | 'memoryBytes' | 'memoryLimitBytes' | 'networkRxBytes' | 'networkTxBytes'> {
  const cpu = sample.cpu_stats;
  const pre = sample.precpu_stats;
  const cpuDelta = (cpu?.cpu_usage?.total_usage ?? 0) - (pre?.cpu_usage?.total_usage ?? 0);
  const systemDelta = (cpu?.system_cpu_usage ?? 0) - (pre?.system_cpu_usage ?? 0);
  const cpus = cpu?.online_cpus ?? cpu?.cpu_usage?.percpu_usage?.length ?? 1;
  const hasPrevious = (pre?.system_cpu_usage ?? 0) > 0;
  const cpuPercent = hasPrevious && cpuDelta > 0 && systemDelta > 0 ? (cpuDelta / systemDelta) * cpus * 100 : 0;
  const memory = sample.memory_stats;
  const cache = memory?.stats?.['inactive_file'] ?? memory?.stats?.['total_inactive_file'] ?? 0;
  const usage = memory?.usage ?? 0;
  let rx = 0;
  let tx = 0;
  for (const net of Object.values(sample.networks ?? {})) {
    rx += net.rx_bytes ?? 0;
    tx += net.tx_bytes ?? 0;
  }
  return {
    cpuPercent: Math.round(cpuPercent * 100) / 100,
    memoryBytes: Math.max(0, usage - (cache < usage ? cache : 0)),
    memoryLimitBytes: memory?.limit ?? 0,
    networkRxBytes: rx,
    networkTxBytes: tx,
  };
}
