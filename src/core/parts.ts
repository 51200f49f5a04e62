// The server as a list of parts: built in dependency order, started in that order, stopped in reverse.

/** What a part's builder returns: what it offers the parts after it, and how to start and stop it. */
export interface Part<T> {
  readonly offers: T;
  /** Runs once every part is built, in the order the parts were added (listen, recover, first orders…). */
  start?(): Promise<void> | void;
  /**
   * Releases what the part holds. Called in reverse order on every close and on a start that
   * failed, so it must be safe on a part built but never started (or whose start threw).
   */
  stop?(): Promise<void> | void;
}

export type PartsLog = (level: 'warn' | 'error', msg: string, detail?: object) => void;

/** How long one part's stop may take before the next one stops anyway (a hung stop never holds the others). */
const STOP_TIMEOUT_MS = 30_000;

/**
 * The parts of one running server (Fastify's onClose hooks, in small): `add` records a built part
 * and hands back what it offers; `start` starts them in order; `stop` stops every part added so far
 * in reverse, each bounded in time, a failure logged without stopping the rest.
 */
export class Parts {
  readonly #log: PartsLog;
  readonly #stopTimeoutMs: number;
  readonly #parts: Array<{ readonly name: string; readonly part: Part<unknown> }> = [];
  #started = 0;
  #stopping: Promise<void> | undefined;

  constructor(log: PartsLog, options: { stopTimeoutMs?: number } = {}) {
    this.#log = log;
    this.#stopTimeoutMs = options.stopTimeoutMs ?? STOP_TIMEOUT_MS;
  }

  /** Records a built part (it will be stopped); returns what it offers. */
  add<T>(name: string, part: Part<T>): T {
    if (this.#stopping !== undefined) throw new Error(`part ${name} added after the parts stopped`);
    this.#parts.push({ name, part });
    return part.offers;
  }

  /** Starts the parts not started yet, in the order they were added; the first failure is thrown (call `stop`). */
  async start(): Promise<void> {
    while (this.#started < this.#parts.length) {
      const entry = this.#parts[this.#started++];
      if (entry === undefined || this.#stopping !== undefined) return;
      await entry.part.start?.();
    }
  }

  /** Stops every part added, last first; resolves once each stopped or ran out of time. Idempotent. */
  stop(): Promise<void> {
    this.#stopping ??= (async () => {
      for (const { name, part } of [...this.#parts].reverse()) {
        if (part.stop === undefined) continue;
        await this.#stopOne(name, part.stop.bind(part));
      }
    })();
    return this.#stopping;
  }

  async #stopOne(name: string, stop: () => Promise<void> | void): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<'timeout'>((resolve) => {
      timer = setTimeout(() => resolve('timeout'), this.#stopTimeoutMs);
    });
    try {
      const outcome = await Promise.race([Promise.resolve().then(stop), timedOut]);
      if (outcome === 'timeout') this.#log('warn', `stopping ${name} took over ${this.#stopTimeoutMs} ms; the next part stops anyway`);
    } catch (err) {
      this.#log('error', `stopping ${name} failed`, { error: err });
    } finally {
      clearTimeout(timer);
    }
  }
}
