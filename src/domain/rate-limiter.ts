// Limits counted before the expensive work: a sliding-window failure counter whose attempts are
// reserved up front, and a bound on how many password hashes run at once.

/** A reserved attempt: it already counts as a failure for each of its keys until refunded. */
export interface ReservedAttempt {
  /** The attempt succeeded, or never did the expensive work: it stops counting (idempotent). */
  refund(): void;
}

/** One change of a limiter's counts, as another instance applies it (decisions §15: limits count across instances). */
export type LimiterEvent = { readonly op: 'add' | 'remove'; readonly key: string; readonly at: number } | { readonly op: 'reset'; readonly key: string };

/**
 * Counts failures per key within a window. An attempt is reserved BEFORE the work it guards
 * ({@link FailureLimiter.reserve}), so parallel attempts all count against the limit: at most
 * `max` attempts per key start within any window, whatever the concurrency.
 */
export class FailureLimiter {
  readonly #max: number;
  readonly #maxByKind: Readonly<Record<string, number>>;
  readonly #windowMs: number;
  readonly #now: () => number;
  readonly #failures = new Map<string, number[]>();
  readonly #onChange: ((event: LimiterEvent) => void) | undefined;

  /**
   * `maxFailures` applies to every key; `maxFailuresByKind` overrides it for keys of one kind
   * (the text before the first `:`, e.g. `ip` in `ip:127.0.0.1`).
   */
  constructor(options: {
    maxFailures: number;
    maxFailuresByKind?: Record<string, number>;
    windowMs: number;
    now?: () => number;
    /** Told each change made here (not those given to `apply`): other instances apply it. */
    onChange?: (event: LimiterEvent) => void;
  }) {
    this.#onChange = options.onChange;
    this.#max = options.maxFailures;
    this.#maxByKind = options.maxFailuresByKind ?? {};
    this.#windowMs = options.windowMs;
    this.#now = options.now ?? Date.now;
  }

  /** Seconds until `key` may try again, or 0 when it may try now. */
  retryAfterSeconds(key: string): number {
    const recent = this.#recent(key);
    const max = this.#maxFor(key);
    if (recent.length < max) return 0;
    const oldest = recent[recent.length - max] ?? this.#now();
    return Math.max(1, Math.ceil((oldest + this.#windowMs - this.#now()) / 1000));
  }

  /**
   * Reserves one attempt for all `keys` at once: when every key may try, each counts one failure
   * now and the attempt is returned (refund it on success); otherwise nothing is counted and the
   * answer is the seconds to wait (the largest over the keys). Synchronous, so two concurrent
   * callers can never both take the last slot.
   */
  reserve(keys: readonly string[], alsoCount: readonly string[] = []): ReservedAttempt | { retryAfterSeconds: number } {
    const wait = Math.max(0, ...keys.map((key) => this.retryAfterSeconds(key)));
    if (wait > 0) return { retryAfterSeconds: wait };
    const at = this.#now();
    // `alsoCount` keys count the attempt (and get it back on refund) without being checked.
    keys = [...keys, ...alsoCount];
    for (const key of keys) this.#record(key, at);
    let refunded = false;
    return {
      refund: () => {
        if (refunded) return;
        refunded = true;
        for (const key of keys) this.#remove(key, at);
      },
    };
  }

  /** Failures of `key` within the window. */
  failures(key: string): number {
    return this.#recent(key).length;
  }

  recordFailure(key: string): void {
    this.#record(key, this.#now());
  }

  reset(key: string): void {
    this.#failures.delete(key);
    this.#onChange?.({ op: 'reset', key });
  }

  /** Applies a change another instance made (not told to `onChange` again). */
  apply(event: LimiterEvent): void {
    if (event.op === 'reset') this.#failures.delete(event.key);
    else if (event.op === 'add') this.#record(event.key, event.at, false);
    else this.#remove(event.key, event.at, false);
  }

  #maxFor(key: string): number {
    return this.#maxByKind[key.split(':', 1)[0] ?? ''] ?? this.#max;
  }

  #record(key: string, at: number, tell = true): void {
    const recent = this.#recent(key);
    recent.push(at);
    // Another instance's attempt may arrive after a later one of this instance: kept in time order.
    if (recent.length > 1 && (recent[recent.length - 2] ?? 0) > at) recent.sort((x, y) => x - y);
    if (tell) this.#onChange?.({ op: 'add', key, at });
    this.#failures.set(key, recent);
    // Keep memory bounded under a flood of distinct keys.
    if (this.#failures.size > 100_000) this.#prune();
  }

  /** Takes back one failure recorded at `at` (gone already when the key was reset or expired). */
  #remove(key: string, at: number, tell = true): void {
    if (tell) this.#onChange?.({ op: 'remove', key, at });
    const list = this.#failures.get(key);
    if (list === undefined) return;
    const index = list.lastIndexOf(at);
    if (index >= 0) list.splice(index, 1);
    if (list.length === 0) this.#failures.delete(key);
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

/** Raised by {@link WorkLimit.run} when its queue is full: answer "busy, retry" rather than wait. */
export class WorkLimitFullError extends Error {
  constructor() {
    super('too much of this work is waiting');
    this.name = 'WorkLimitFullError';
  }
}

/**
 * Runs at most `concurrency` tasks at once and lets at most `maxWaiting` more wait their turn;
 * beyond that {@link run} rejects with {@link WorkLimitFullError} at once (nothing queued).
 */
export class WorkLimit {
  readonly #concurrency: number;
  readonly #maxWaiting: number;
  #running = 0;
  readonly #waiting: Array<() => void> = [];

  constructor(options: { concurrency: number; maxWaiting: number }) {
    this.#concurrency = Math.max(1, options.concurrency);
    this.#maxWaiting = Math.max(0, options.maxWaiting);
  }

  /** Tasks running now. */
  get running(): number {
    return this.#running;
  }

  /** Tasks waiting for a slot. */
  get waiting(): number {
    return this.#waiting.length;
  }

  async run<T>(task: () => Promise<T>): Promise<T> {
    if (this.#running >= this.#concurrency) {
      if (this.#waiting.length >= this.#maxWaiting) throw new WorkLimitFullError();
      // The slot is handed over by the task that finishes (see finally): #running stays counted.
      await new Promise<void>((resolve) => this.#waiting.push(resolve));
    } else {
      this.#running++;
    }
    try {
      return await task();
    } finally {
      const next = this.#waiting.shift();
      if (next !== undefined) next();
      else this.#running--;
    }
  }
}
