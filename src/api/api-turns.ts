// The API yields to app traffic: API requests start one per event-loop turn, so proxied requests and tunnels never queue behind a burst of them.

/**
 * Runs tasks (API requests) one per turn of the event loop (each from its own `setImmediate`), so
 * the I/O that arrived meanwhile — proxied app requests and responses, tunnel frames — is handled
 * between two of them instead of after all of them. An API request's work is mostly synchronous
 * (SQLite, serialization), so a burst of them would otherwise hold the loop for their sum; this way
 * traffic waits at most about one API request per turn. Order is kept; nothing is dropped.
 */
export class ApiTurns {
  readonly #queue: Array<() => void> = [];
  readonly #onError: (err: unknown) => void;
  #scheduled = false;

  /** `onError` gets what a task throws (the task must answer its own request before throwing, or not at all). */
  constructor(onError: (err: unknown) => void) {
    this.#onError = onError;
  }

  /** How many tasks wait for their turn. */
  get waiting(): number {
    return this.#queue.length;
  }

  /** Runs `task` on a coming turn, after the tasks queued before it. */
  run(task: () => void): void {
    this.#queue.push(task);
    if (!this.#scheduled) {
      this.#scheduled = true;
      setImmediate(this.#next);
    }
  }

  readonly #next = (): void => {
    const task = this.#queue.shift();
    if (task !== undefined) {
      try {
        task();
      } catch (err) {
        this.#onError(err);
      }
    }
    // A setImmediate queued from within a setImmediate callback runs on the next turn, after its I/O.
    if (this.#queue.length > 0) setImmediate(this.#next);
    else this.#scheduled = false;
  };
}
