// A short, bounded history of each running app's resource use (decisions §12, issue 26): a ring of samples per deployment, kept in memory.

/** One sample of the engine's stats (cumulative network counters, as the engine gives them). */
export interface MetricsSample {
  /** Milliseconds since the epoch. */
  readonly at: number;
  readonly containerId: string;
  readonly cpuPercent: number;
  readonly memoryBytes: number;
  readonly memoryLimitBytes: number;
  readonly networkRxBytes: number;
  readonly networkTxBytes: number;
}

/** A point of GET /deployments/{id}/metrics/history: rates instead of counters. */
export interface MetricsPoint {
  at: string;
  cpu_percent: number;
  memory_bytes: number;
  memory_limit_bytes: number;
  /** Bytes per second since the previous sample of the same container; null for a container's first. */
  network_rx_bytes_per_second: number | null;
  network_tx_bytes_per_second: number | null;
}

/**
 * Samples per deployment, oldest first, at most `capacity` each (1 h at 10 s by default), for at
 * most `maxDeployments` deployments (the one sampled least recently is dropped first), so memory
 * stays bounded whatever runs.
 */
export class MetricsHistory {
  readonly #series = new Map<string, MetricsSample[]>();
  readonly capacity: number;
  readonly maxDeployments: number;

  constructor(options: { capacity?: number; maxDeployments?: number } = {}) {
    this.capacity = options.capacity ?? 360;
    this.maxDeployments = options.maxDeployments ?? 2000;
  }

  record(deploymentId: string, sample: MetricsSample): void {
    let samples = this.#series.get(deploymentId);
    if (samples === undefined) {
      if (this.#series.size >= this.maxDeployments) {
        const oldest = this.#series.keys().next().value;
        if (oldest !== undefined) this.#series.delete(oldest);
      }
      samples = [];
    } else {
      // Map order is insertion order: moving it to the end keeps the least recently sampled first.
      this.#series.delete(deploymentId);
    }
    this.#series.set(deploymentId, samples);
    samples.push(sample);
    if (samples.length > this.capacity) samples.splice(0, samples.length - this.capacity);
  }

  /** Drops deployments not in `live` (stopped, deleted) whose newest sample is older than `olderThan`. */
  prune(live: ReadonlySet<string>, olderThan: number): void {
    for (const [id, samples] of this.#series) {
      if (!live.has(id) && (samples.at(-1)?.at ?? 0) < olderThan) this.#series.delete(id);
    }
  }

  forget(deploymentId: string): void {
    this.#series.delete(deploymentId);
  }

  /** The deployment's points, oldest first. */
  points(deploymentId: string): MetricsPoint[] {
    const samples = this.#series.get(deploymentId) ?? [];
    return samples.map((s, i) => {
      const prev = i > 0 ? samples[i - 1] : undefined;
      const seconds = prev === undefined ? 0 : (s.at - prev.at) / 1000;
      // A new container (restart, deploy) starts its counters again: no rate across it.
      const comparable = prev !== undefined && prev.containerId === s.containerId && seconds > 0 && s.networkRxBytes >= prev.networkRxBytes && s.networkTxBytes >= prev.networkTxBytes;
      return {
        at: new Date(s.at).toISOString(),
        cpu_percent: s.cpuPercent,
        memory_bytes: s.memoryBytes,
        memory_limit_bytes: s.memoryLimitBytes,
        network_rx_bytes_per_second: comparable ? Math.round((s.networkRxBytes - prev.networkRxBytes) / seconds) : null,
        network_tx_bytes_per_second: comparable ? Math.round((s.networkTxBytes - prev.networkTxBytes) / seconds) : null,
      };
    });
  }

  /** How many deployments have a history (for tests and the metrics page). */
  get size(): number {
    return this.#series.size;
  }
}
