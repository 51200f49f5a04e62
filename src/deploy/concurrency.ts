// Concurrency limits: a counting semaphore with abortable waits, and per-key mutexes built on it.

/** Releases a held slot; calling it more than once is harmless. */
export type Release = () => void;

/** At most `limit` holders at once; waiters are served in order and can give up via an AbortSignal. */
export class Semaphore {
  readonly #limit: number;
  #held = 0;
  readonly #waiters: Array<{ grant: () => void }> = [];

  constructor(limit: number) {
    this.#limit = limit;
  }

  get held(): number {
    return this.#held;
  }

  get waiting(): number {
    return this.#waiters.length;
  }

  /** Waits for a slot. Rejects with the signal's reason (an AbortError) if it aborts first. */
  acquire(signal?: AbortSignal): Promise<Release> {
    signal?.throwIfAborted();
    if (this.#held < this.#limit) {
      this.#held += 1;
      return Promise.resolve(this.#releaser());
    }
    return new Promise<Release>((resolve, reject) => {
      const waiter = {
        grant: () => {
          signal?.removeEventListener('abort', onAbort);
          resolve(this.#releaser());
        },
      };
      const onAbort = (): void => {
        const index = this.#waiters.indexOf(waiter);
        if (index !== -1) this.#waiters.splice(index, 1);
        reject(signal?.reason);
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      this.#waiters.push(waiter);
    });
  }

  #releaser(): Release {
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const next = this.#waiters.shift();
      if (next === undefined) this.#held -= 1;
      else next.grant(); // the slot passes straight to the next waiter
    };
  }
}

/** One mutex per key (e.g. per deployment), created on demand and dropped when idle. */
export class KeyedMutex {
  readonly #locks = new Map<string, Semaphore>();

  /** Waits for the key's lock; rejects if `signal` aborts first. */
  async acquire(key: string, signal?: AbortSignal): Promise<Release> {
    let lock = this.#locks.get(key);
    if (lock === undefined) {
      lock = new Semaphore(1);
      this.#locks.set(key, lock);
    }
    const release = await lock.acquire(signal);
    const held = lock;
    return () => {
      release();
      if (held.held === 0 && held.waiting === 0 && this.#locks.get(key) === held) this.#locks.delete(key);
    };
  }

  /** Runs `fn` while holding the key's lock. */
  async run<T>(key: string, fn: () => Promise<T>, signal?: AbortSignal): Promise<T> {
    const release = await this.acquire(key, signal);
    try {
      return await fn();
    } finally {
      release();
    }
  }
}
