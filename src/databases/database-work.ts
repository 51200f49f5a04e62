// The starts of databases running in the background on this instance: one at a time per database, abortable, awaited on close.

/** Background starts (a creation, a reconciliation), keyed by database id. */
export class DatabaseWork {
  readonly #running = new Map<string, { controller: AbortController; done: Promise<void> }>();
  #closed = false;

  /** Runs `task` for database `id` unless one already runs for it; its failure is the task's to record. */
  run(id: string, task: (signal: AbortSignal) => Promise<void>): void {
    if (this.#closed || this.#running.has(id)) return;
    const controller = new AbortController();
    const done = task(controller.signal)
      .catch(() => undefined)
      .finally(() => this.#running.delete(id));
    this.#running.set(id, { controller, done });
  }

  /** Whether a start of `id` runs here now. */
  has(id: string): boolean {
    return this.#running.has(id);
  }

  /** Aborts the start of `id` (a deletion) and waits for it to end. */
  async abort(id: string): Promise<void> {
    const entry = this.#running.get(id);
    if (entry === undefined) return;
    entry.controller.abort(new Error('the database is being deleted'));
    await entry.done;
  }

  /** Waits for the start of `id`, if one runs. */
  async settled(id: string): Promise<void> {
    await this.#running.get(id)?.done;
  }

  /** Stops taking work and aborts what runs (a shutdown: those databases are finished at the next start). */
  async close(): Promise<void> {
    this.#closed = true;
    const entries = [...this.#running.values()];
    for (const entry of entries) entry.controller.abort(new Error('the server is stopping'));
    await Promise.all(entries.map((e) => e.done));
  }
}
