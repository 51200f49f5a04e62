// The build queue port: builds wait in one queue and an instance with a free slot takes the next, fairly across users; the one-instance queue over BuildSlots.
import type { Release } from './concurrency.js';
import type { BuildSlots } from './fair-build-slots.js';

/** A recorded build waiting for a slot. */
export interface QueuedBuild {
  readonly buildId: string;
  readonly deploymentId: string;
  /** The deployment's owner (fairness is across users). */
  readonly userId: string;
  /** Set when the build is queued again because its instance was lost (decisions §15: the log says so). */
  readonly lostFrom?: string;
}

/** A build this instance took: it holds one of this instance's slots until `release`. */
export interface TakenBuild extends QueuedBuild {
  /** The instance that queued it (the build's runner until the taker claims it); absent when it is this one. */
  readonly queuedBy?: string;
  /** This instance's id, as the log names it (absent with one instance). */
  readonly takenBy?: string;
}

/**
 * Where recorded builds wait for a build slot (decisions §15): one queue for every instance sharing
 * the database; any instance with a free slot takes the next, chosen by the fair rule (`pickFair`).
 * A build is taken once. With one instance (SQLite) the queue is this process's (`LocalBuildQueue`).
 */
export interface BuildQueue {
  /** Queues a recorded build (again, at the back, if it was queued or taken before). */
  enqueue(build: QueuedBuild): Promise<void>;
  /** The next build this instance may start now, or undefined; it then holds one of this instance's slots. */
  take(): Promise<TakenBuild | undefined>;
  /** Frees the slot a taken build holds (its image is built, or it ended). */
  release(buildId: string): Promise<void>;
  /** Removes the deployment's builds still waiting (not taken) from the queue; returns their ids. */
  withdraw(deploymentId: string): Promise<string[]>;
  /** Told when a build may have become takeable here (one was queued, or a slot freed). Returns an unsubscribe function. */
  onChange(listener: () => void): () => void;
  /** Stops; returns the builds that waited only in this process (they are lost with it; the caller ends them). */
  close(): Promise<QueuedBuild[]>;
}

/** Lets the callbacks of granted slots run before an answer is given. */
const settle = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/** The queue of one instance: each build waits for a slot of `slots` (the fair scheduler, or another policy). */
export class LocalBuildQueue implements BuildQueue {
  readonly #slots: BuildSlots;
  readonly #waiting = new Map<string, { readonly build: QueuedBuild; readonly controller: AbortController }>();
  /** Builds granted a slot, not taken yet, in the order granted. */
  #ready: QueuedBuild[] = [];
  readonly #held = new Map<string, Release>();
  readonly #listeners = new Set<() => void>();

  constructor(slots: BuildSlots) {
    this.#slots = slots;
  }

  async enqueue(build: QueuedBuild): Promise<void> {
    this.#forget(build.buildId);
    const controller = new AbortController();
    this.#waiting.set(build.buildId, { build, controller });
    this.#slots.acquire(build.userId, controller.signal).then(
      (release) => {
        this.#waiting.delete(build.buildId);
        this.#held.set(build.buildId, release);
        this.#ready.push(build);
        for (const listener of this.#listeners) listener();
      },
      () => undefined, // withdrawn
    );
    await settle();
  }

  async take(): Promise<TakenBuild | undefined> {
    return this.#ready.shift();
  }

  async release(buildId: string): Promise<void> {
    this.#forget(buildId);
    await settle();
  }

  async withdraw(deploymentId: string): Promise<string[]> {
    const gone = [...this.#waiting.values(), ...this.#ready.map((build) => ({ build }))]
      .map((entry) => entry.build)
      .filter((build) => build.deploymentId === deploymentId);
    for (const build of gone) this.#forget(build.buildId);
    await settle();
    return gone.map((build) => build.buildId);
  }

  onChange(listener: () => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  async close(): Promise<QueuedBuild[]> {
    const left = [...[...this.#waiting.values()].map((entry) => entry.build), ...this.#ready];
    for (const build of left) this.#forget(build.buildId);
    this.#listeners.clear();
    return left;
  }

  /** Out of the queue, its slot (if granted) freed. */
  #forget(buildId: string): void {
    const waiting = this.#waiting.get(buildId);
    if (waiting !== undefined) {
      this.#waiting.delete(buildId);
      waiting.controller.abort();
    }
    this.#ready = this.#ready.filter((build) => build.buildId !== buildId);
    const release = this.#held.get(buildId);
    this.#held.delete(buildId);
    release?.();
  }
}
