// A sliding-window failure counter: after too many failures for one key, further attempts wait.

/** Counts failures per key within a window; `check` says how long a blocked key must wait. */
export class FailureLimiter {
  readonly #max: number;
  readonly #maxByKind: Readonly<Record<string, number>>;
  readonly #windowMs: number;
  readonly #now: () => number;
  readonly #failures = new Map<string, number[]>();

  /**
   * `maxFailures` applies to every key; `maxFailuresByKind` overrides it for keys of one kind
   * (the text before the first `:`, e.g. `ip` in `ip:127.0.0.1`).
   */
  constructor(options: { maxFailures: number; maxFailuresByKind?: Record<string, number>; windowMs: number; now?: () => number }) {
    this.#max = options.maxFailures;
    this.#maxByKind = options.maxFailuresByKind ?? {};
    this.#windowMs = options.windowMs;
    this.#now = options.now ?? Date.now;
  }

  /** Seconds until `key` may try again, or 0 when it may try now. */
  retryAfterSeconds(key: string): number {
    const recent = this.#recent(key);
    const max = this.#maxByKind[key.split(':', 1)[0] ?? ''] ?? this.#max;
    if (recent.length < max) return 0;
    const oldest = recent[recent.length - max] ?? this.#now();
    return Math.max(1, Math.ceil((oldest + this.#windowMs - this.#now()) / 1000));
  }

  recordFailure(key: string): void {
    const recent = this.#recent(key);
    recent.push(this.#now());
    this.#failures.set(key, recent);
    // Keep memory bounded under a flood of distinct keys.
    if (this.#failures.size > 100_000) this.#prune();
  }

  reset(key: string): void {
    this.#failures.delete(key);
  }

  #recent(key: string): number[] {
    const since = this.#now() - this.#windowMs;
    return (this.#failures.get(key) ?? []).filter((t) => t > since);
  }

  #prune(): void {
    for (const key of this.#failures.keys()) {
      if (this.#recent(key).length === 0) this.#failures.delete(key);
    }
  }
}
