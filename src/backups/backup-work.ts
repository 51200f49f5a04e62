// The backup work running in the background on this instance: tracked so a shutdown aborts and awaits it, and a test can wait for it.

export class BackupWork {
  readonly #running = new Map<string, { controller: AbortController; done: Promise<void> }>();
  #closed = false;

  /** Runs `task` under `key` (a backup's id); its failure is the task's to record. */
  run(key: string, task: (signal: AbortSignal) => Promise<void>): void {
    if (this.#closed || this.#running.has(key)) return;
    const controller = new AbortController();
    const done = task(controller.signal)
      .catch(() => undefined)
      .finally(() => this.#running.delete(key));
    this.#running.set(key, { controller, done });
  }

  has(key: string): boolean {
    return this.#running.has(key);
  }

  readonly #held = new Set<string>();

  /** Marks a backup as taken here from before its record exists until it ends (a round never takes it for lost). */
  hold(backupId: string): void {
    this.#held.add(backupId);
  }

  drop(backupId: string): void {
    this.#held.delete(backupId);
  }

  holds(backupId: string): boolean {
    return this.#held.has(backupId);
  }

  /** Aborts what runs (a shutdown: a backup cut short is marked failed and retaken by the next start). */
  async close(): Promise<void> {
    this.#closed = true;
    const entries = [...this.#running.values()];
    for (const entry of entries) entry.controller.abort(new Error('the server is stopping'));
    await Promise.all(entries.map((e) => e.done));
  }
}
