// The lifecycle's background work (old releases retired, images pruned, recovery): failures logged, close waits for all of it.

/** Tasks running in the background; `settle` waits until none is left. */
export class BackgroundTasks {
  readonly #tasks = new Set<Promise<unknown>>();
  readonly #log: (level: 'warn', msg: string, detail?: object) => void;

  constructor(log: (level: 'warn', msg: string, detail?: object) => void) {
    this.#log = log;
  }

  /** Runs `task` in the background: a failure is logged, never thrown. */
  track(task: Promise<unknown>): void {
    const tracked = task.catch((err: unknown) => this.#log('warn', 'background cleanup failed', { err }));
    this.#tasks.add(tracked);
    void tracked.finally(() => this.#tasks.delete(tracked));
  }

  /** Waits for every background task (including those started meanwhile). */
  async settle(): Promise<void> {
    while (this.#tasks.size > 0) await Promise.allSettled([...this.#tasks]);
  }
}
