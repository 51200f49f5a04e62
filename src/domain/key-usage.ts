// API key use, recorded in memory and written at most once a second per key (not on every request).

/** Where uses are written: `last_used_at` of each key (src/db/api-key-store.ts). */
export interface KeyUseWriter {
  /** Sets `last_used_at` of each key in `uses` (key id → ISO time) in one transaction. */
  recordUses(uses: ReadonlyMap<string, string>): Promise<void>;
}

/** How long a use may wait in memory before it is written. */
const FLUSH_INTERVAL_MS = 1000;

/**
 * `last_used_at` of API keys. Every use is recorded at once in memory (the API shows it from there),
 * and the database gets the latest use of each key at most once per interval, and on close; so a
 * key's stored `last_used_at` is at most about a second behind, and a busy key costs one write a
 * second instead of one per request.
 */
export class KeyUsage {
  readonly #writer: KeyUseWriter;
  readonly #intervalMs: number;
  /** Key id → ISO time of its latest use not yet written. */
  #pending = new Map<string, string>();
  /** The batch being written now: still shown from here until the write is done, so no read sees the older stored value. */
  #writing = new Map<string, string>();
  #timer: NodeJS.Timeout | undefined;
  #flushing: Promise<void> = Promise.resolve();
  #log: (msg: string, detail: object) => void;

  constructor(writer: KeyUseWriter, options: { intervalMs?: number; log?: (msg: string, detail: object) => void } = {}) {
    this.#writer = writer;
    this.#intervalMs = options.intervalMs ?? FLUSH_INTERVAL_MS;
    this.#log = options.log ?? (() => undefined);
  }

  /** Records a use of `keyId` now. */
  record(keyId: string, at: string = new Date().toISOString()): void {
    this.#pending.set(keyId, at);
    if (this.#timer === undefined) {
      this.#timer = setTimeout(() => {
        this.#timer = undefined;
        void this.flush();
      }, this.#intervalMs);
      this.#timer.unref();
    }
  }

  /** The latest use of `keyId` not yet written, if any (newer than what the database holds). */
  unwritten(keyId: string): string | undefined {
    return this.#pending.get(keyId) ?? this.#writing.get(keyId);
  }

  /** Writes every pending use (one statement per key, in one transaction). */
  flush(): Promise<void> {
    this.#flushing = this.#flushing.then(async () => {
      if (this.#pending.size === 0) return;
      const batch = this.#pending;
      this.#pending = new Map();
      this.#writing = batch;
      try {
        await this.#writer.recordUses(batch);
      } catch (err) {
        this.#log('recording API key use failed', { err });
        // Keep what was not written, unless a newer use replaced it meanwhile.
        for (const [id, at] of batch) if (!this.#pending.has(id)) this.#pending.set(id, at);
      } finally {
        this.#writing = new Map();
      }
    });
    return this.#flushing;
  }

  /** Writes what is pending and stops the timer (server shutdown, before the database closes). */
  async close(): Promise<void> {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    await this.flush();
  }
}
