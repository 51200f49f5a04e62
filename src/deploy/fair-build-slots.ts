// Build slots shared fairly across users: the waiting user with the fewest running builds goes next (FIFO within a user), and the last free slot is kept for a user with none running.
import type { Release } from './concurrency.js';

/**
 * Where a build waits for one of the installation's build slots. The scheduling policy is the
 * implementation's; a coordinated (several-instance) one can wrap or replace {@link FairBuildSlots}.
 */
export interface BuildSlots {
  /** Waits for a slot for a build of `userId`'s. Rejects with the signal's reason if it aborts first. */
  acquire(userId: string, signal?: AbortSignal): Promise<Release>;
  /** Builds running now, per user (users with none are absent). */
  running(): ReadonlyMap<string, number>;
  /** Builds waiting for a slot. */
  readonly waiting: number;
}

/** Free slots kept for users with nothing running, out of `slots`. */
export function reservedSlots(slots: number): number {
  return slots >= 2 ? 1 : 0;
}

/**
 * The fair rule (shared by the scheduler here and the build queue across instances): of the
 * builds waiting (in the order they were queued), the next to start is the one whose user has the
 * fewest builds running, the longest waiting among those; none while no slot is free, and the last
 * `reserve` free slots only for a user with nothing running.
 */
export function pickFair<W extends { readonly userId: string }>(waiting: readonly W[], running: ReadonlyMap<string, number>, free: number, reserve: number): W | undefined {
  if (free <= 0) return undefined;
  let best: W | undefined;
  let bestRunning = Infinity;
  for (const waiter of waiting) {
    const count = running.get(waiter.userId) ?? 0;
    if (count < bestRunning && (count === 0 || free > reserve)) {
      best = waiter;
      bestRunning = count;
    }
  }
  return best;
}

interface Waiter {
  readonly userId: string;
  readonly seq: number;
  readonly grant: () => void;
}

/**
 * `slots` builds at once across all users. A free slot goes to the waiting build whose user has the
 * fewest builds running (ties: the one waiting longest), so one user's flood cannot hold every slot
 * while others wait. And with two slots or more, the last free slot only goes to a user with no
 * build running: a user arriving while one tenant is busy starts at once instead of waiting for
 * the tenant's builds to finish (the price: a lone user uses at most `slots - 1` at a time).
 */
export class FairBuildSlots implements BuildSlots {
  readonly #slots: number;
  /** Free slots kept for users with nothing running. */
  readonly #reserve: number;
  readonly #running = new Map<string, number>();
  #total = 0;
  #seq = 0;
  readonly #waiters: Waiter[] = [];

  constructor(slots: number) {
    this.#slots = Math.max(1, Math.floor(slots));
    this.#reserve = reservedSlots(this.#slots);
  }

  get waiting(): number {
    return this.#waiters.length;
  }

  running(): ReadonlyMap<string, number> {
    return new Map(this.#running);
  }

  acquire(userId: string, signal?: AbortSignal): Promise<Release> {
    if (signal?.aborted === true) return Promise.reject(signal.reason);
    return new Promise<Release>((resolve, reject) => {
      const onAbort = (): void => {
        const index = this.#waiters.indexOf(waiter);
        if (index === -1) return;
        this.#waiters.splice(index, 1);
        reject(signal?.reason);
      };
      const waiter: Waiter = {
        userId,
        seq: (this.#seq += 1),
        grant: () => {
          signal?.removeEventListener('abort', onAbort);
          resolve(this.#releaser(userId));
        },
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      this.#waiters.push(waiter);
      this.#dispatch();
    });
  }

  /** Grants slots while some waiter may start: fewest running first, then longest waiting. */
  #dispatch(): void {
    for (;;) {
      const best = pickFair(this.#waiters, this.#running, this.#slots - this.#total, this.#reserve);
      if (best === undefined) return;
      this.#waiters.splice(this.#waiters.indexOf(best), 1);
      this.#total += 1;
      this.#running.set(best.userId, (this.#running.get(best.userId) ?? 0) + 1);
      best.grant();
    }
  }

  #releaser(userId: string): Release {
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.#total -= 1;
      const left = (this.#running.get(userId) ?? 1) - 1;
      if (left <= 0) this.#running.delete(userId);
      else this.#running.set(userId, left);
      this.#dispatch();
    };
  }
}
