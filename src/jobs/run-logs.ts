// A job run's log: written in capped, batched pieces to the job store (any instance reads it), followed like a build log.
import { setTimeout as sleep } from 'node:timers/promises';
import { CappedLog, type LogSink } from '../deploy/build-logs.js';
import type { JobStore } from './job-store.js';

/** A run's log is kept to this (its head and its tail, like a build log's). */
export const RUN_LOG_MAX_BYTES = 1024 * 1024;
/** A piece is written at most this long after its first byte came. */
const FLUSH_MS = 200;
/** A follower reads again this often (no announcement across instances: runs' logs are small). */
const POLL_MS = 250;
/** A follower of a run that ended without its last piece (its instance died) stops after this. */
const FINAL_GRACE_MS = 5000;

/** Wakes this instance's followers of a run when a piece of it is written here. */
export class RunLogWakeups {
  readonly #waiting = new Map<string, Set<() => void>>();

  fire(runId: string): void {
    for (const wake of this.#waiting.get(runId) ?? []) wake();
  }

  async wait(runId: string, ms: number, signal: AbortSignal | undefined): Promise<void> {
    let wake = (): void => undefined;
    const woken = new Promise<void>((resolve) => (wake = resolve));
    const set = this.#waiting.get(runId) ?? new Set();
    set.add(wake);
    this.#waiting.set(runId, set);
    const timer = new AbortController();
    try {
      await Promise.race([woken, sleep(ms, undefined, { signal: signal === undefined ? timer.signal : AbortSignal.any([signal, timer.signal]) }).catch(() => undefined)]);
    } finally {
      timer.abort();
      set.delete(wake);
      if (set.size === 0) this.#waiting.delete(runId);
    }
  }
}

/** The writer of one run's log: `append` as output comes, `close` once it ended (the last piece marked final). */
export function runLogWriter(store: JobStore, runId: string, wakeups: RunLogWakeups, warn: (msg: string, detail?: object) => void): { append(text: string): void; close(): Promise<void> } {
  let pending: Buffer[] = [];
  let timer: NodeJS.Timeout | undefined;
  let chain: Promise<void> = Promise.resolve();
  const flush = (final: boolean): Promise<void> => {
    clearTimeout(timer);
    timer = undefined;
    const data = Buffer.concat(pending);
    pending = [];
    if (data.length > 0 || final) {
      chain = chain
        .then(() => store.appendLog(runId, data, final))
        .then(() => wakeups.fire(runId))
        .catch((err: unknown) => warn(`a piece of the log of job run ${runId.slice(0, 8)} could not be stored`, { err }));
    }
    return chain;
  };
  const sink: LogSink = {
    write(data) {
      if (data.length === 0) return;
      pending.push(data);
      timer ??= setTimeout(() => void flush(false), FLUSH_MS);
    },
    end: () => flush(true),
  };
  const log = new CappedLog(sink, RUN_LOG_MAX_BYTES);
  return { append: (text) => log.append(text), close: () => log.close() };
}

/**
 * Yields a run's log from the start; with `follow`, keeps yielding until its last piece was read
 * (or the run ended without one a few seconds ago: its instance died), or `signal` aborts.
 */
export async function* readRunLog(store: JobStore, runId: string, options: { follow: boolean; signal?: AbortSignal; wakeups: RunLogWakeups }): AsyncGenerator<Buffer> {
  let last = 0;
  let endedSince: number | undefined;
  for (;;) {
    if (options.signal?.aborted === true) return;
    const status = options.follow ? await store.runStatus(runId) : undefined;
    const rows = await store.readLog(runId, last, 64);
    for (const row of rows) {
      last = row.id;
      if (row.data.length > 0) yield row.data;
      if (row.final) return;
    }
    if (rows.length > 0) continue;
    if (!options.follow || status === undefined) return;
    if (status !== 'running') {
      endedSince ??= Date.now();
      // A skipped run has no log at all; an ended one gets its last piece within a moment.
      if (status === 'skipped' || Date.now() - endedSince > FINAL_GRACE_MS) return;
    }
    await options.wakeups.wait(runId, POLL_MS, options.signal);
  }
}
