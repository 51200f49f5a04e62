// Background work (timers, watchers, resyncs, leader-only jobs), registered in one place that knows where each runs.

/** Where a task runs: on every instance, or on the current leader only (it moves when leadership does). */
export type TaskScope = 'everyInstance' | 'leaderOnly';

/** A task registered with `Background`. */
export interface BackgroundTask {
  /** What it does, as a log line reads it: `${name} failed`. */
  readonly name: string;
  readonly scope: TaskScope;
  /**
   * Runs `run` every `everyMs` (a round never overlaps the previous one). Absent: `run` is called
   * once each time the task starts (a watcher that sets itself up and lives until `signal` aborts).
   */
  readonly everyMs?: number;
  /** With `everyMs`: also one round at once when the task starts. */
  readonly immediately?: boolean;
  /** One round (or a watcher's set-up). `signal` aborts when the task stops: at shutdown, or on losing leadership. */
  run(signal: AbortSignal): Promise<void> | void;
}

/** What tasks need of coordination (the `Coordination` port satisfies it). */
export interface Leadership {
  isLeader(): boolean;
  /** Told the current state at once, then each change; returns the unsubscribe. */
  onLeadership(listener: (leader: boolean) => void): () => void;
}

export type BackgroundLog = (level: 'warn', msg: string, detail?: object) => void;

interface Running {
  readonly controller: AbortController;
  timer: NodeJS.Timeout | undefined;
  round: Promise<void> | undefined;
}

/**
 * The instance's background work. Tasks added before `start` wait for it; after, they start at
 * once. A leader-only task runs while this instance leads: losing leadership aborts its signal and
 * clears its timer, gaining it starts it again. A task's failure is logged, never thrown. `stop`
 * ends everything (signals aborted, timers cleared) and waits for rounds in flight.
 */
export class Background {
  readonly #leadership: Leadership;
  readonly #log: BackgroundLog;
  readonly #tasks: BackgroundTask[] = [];
  readonly #running = new Map<BackgroundTask, Running>();
  readonly #ending = new Set<Promise<void>>();
  #leader = false;
  #state: 'idle' | 'started' | 'stopped' = 'idle';
  #unsubscribe: (() => void) | undefined;

  constructor(leadership: Leadership, log: BackgroundLog) {
    this.#leadership = leadership;
    this.#log = log;
  }

  /** Registers a task (started now if the background already runs). */
  add(task: BackgroundTask): void {
    if (this.#state === 'stopped') return;
    this.#tasks.push(task);
    if (this.#state === 'started' && this.#wanted(task)) this.#begin(task);
  }

  /** The names of the tasks running on this instance now (tests, diagnostics). */
  runningNames(): string[] {
    return [...this.#running.keys()].map((task) => task.name);
  }

  start(): void {
    if (this.#state !== 'idle') return;
    this.#state = 'started';
    this.#leader = this.#leadership.isLeader();
    for (const task of this.#tasks) if (this.#wanted(task)) this.#begin(task);
    // Told the current state at once (already applied above), then each change.
    this.#unsubscribe = this.#leadership.onLeadership((leader) => this.#leadershipChanged(leader));
  }

  async stop(): Promise<void> {
    if (this.#state === 'stopped') return;
    this.#state = 'stopped';
    this.#unsubscribe?.();
    for (const task of [...this.#running.keys()]) this.#end(task);
    await Promise.all([...this.#ending]);
  }

  #wanted(task: BackgroundTask): boolean {
    return task.scope === 'everyInstance' || this.#leader;
  }

  #leadershipChanged(leader: boolean): void {
    if (this.#state !== 'started' || leader === this.#leader) return;
    this.#leader = leader;
    for (const task of this.#tasks) {
      if (task.scope !== 'leaderOnly') continue;
      if (leader && !this.#running.has(task)) this.#begin(task);
      else if (!leader) this.#end(task);
    }
  }

  #begin(task: BackgroundTask): void {
    const running: Running = { controller: new AbortController(), timer: undefined, round: undefined };
    this.#running.set(task, running);
    if (task.everyMs === undefined) {
      this.#round(task, running);
      return;
    }
    if (task.immediately === true) this.#round(task, running);
    running.timer = setInterval(() => this.#round(task, running), task.everyMs);
    running.timer.unref();
  }

  #round(task: BackgroundTask, running: Running): void {
    if (running.round !== undefined || running.controller.signal.aborted) return;
    const signal = running.controller.signal;
    running.round = Promise.resolve()
      .then(() => task.run(signal))
      .catch((err: unknown) => {
        // A round cut short by its stop is not a failure.
        if (!signal.aborted) this.#log('warn', `${task.name} failed`, { error: err });
      })
      .finally(() => (running.round = undefined));
  }

  #end(task: BackgroundTask): void {
    const running = this.#running.get(task);
    if (running === undefined) return;
    this.#running.delete(task);
    clearInterval(running.timer);
    running.controller.abort();
    const round = running.round;
    if (round !== undefined) {
      this.#ending.add(round);
      void round.finally(() => this.#ending.delete(round));
    }
  }
}

/** A task for a watcher that returns its own stop (a subscription, a module's own timer): stopped with the task's signal. */
export function watcherTask(name: string, scope: TaskScope, begin: () => () => void): BackgroundTask {
  return {
    name,
    scope,
    run: (signal) => {
      const stop = begin();
      if (signal.aborted) stop();
      else signal.addEventListener('abort', stop, { once: true });
    },
  };
}
