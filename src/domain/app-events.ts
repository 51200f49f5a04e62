// The app event port: what happens to a running app (a crash loop for now), told to whoever subscribed (notifications, logs).

/** An app whose container keeps exiting and being restarted: told once per crash-loop episode, not on every restart. */
export interface AppCrashedEvent {
  readonly type: 'app.crashed';
  readonly deploymentId: string;
  readonly subdomain: string;
  /** The release (runtime id) that crash-loops. */
  readonly releaseId: string;
  /** When the episode began (its first exit), ISO 8601. */
  readonly since: string;
  /** Restarts seen in the episode so far. */
  readonly restarts: number;
  readonly exitCode: number | null;
  /** The app's last output line before it exited (may be a secret's echo: never log it whole). */
  readonly lastLine: string | null;
}

export type AppEvent = AppCrashedEvent;
export type AppEventType = AppEvent['type'];
export type AppEventListener<T extends AppEventType> = (event: Extract<AppEvent, { type: T }>) => void;

/**
 * A small synchronous event emitter: listeners run in subscription order, and one that throws is
 * reported to `onError` without stopping the others or the emitter (a failing notification must
 * never stop the watcher that found the crash).
 */
export class AppEvents {
  readonly #listeners = new Map<AppEventType, Array<(event: AppEvent) => void>>();
  readonly #onError: (err: unknown, event: AppEvent) => void;

  constructor(onError: (err: unknown, event: AppEvent) => void = () => undefined) {
    this.#onError = onError;
  }

  /** Subscribes to one type of event; returns the unsubscribe. */
  on<T extends AppEventType>(type: T, listener: AppEventListener<T>): () => void {
    const list = this.#listeners.get(type) ?? [];
    const wrapped = listener as (event: AppEvent) => void;
    list.push(wrapped);
    this.#listeners.set(type, list);
    return () => {
      const at = list.indexOf(wrapped);
      if (at >= 0) list.splice(at, 1);
    };
  }

  emit(event: AppEvent): void {
    for (const listener of [...(this.#listeners.get(event.type) ?? [])]) {
      try {
        listener(event);
      } catch (err) {
        this.#onError(err, event);
      }
    }
  }
}
