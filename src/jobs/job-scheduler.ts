// The jobs' scheduler (decisions §22): on every instance, each job's due times come due on a timer and are claimed once across instances by the store.
import type { Log } from '../core/log.js';
import type { JobRow, JobStore } from './job-store.js';
import { JobSchedule } from '../core/cron-schedule.js';

/** A due time later than this is never run (decisions §22: a missed run runs once at start if it is less than an hour late). */
export const MAX_LATE_MS = 3_600_000;
/**
 * While instances run, a due time up to this late (a slow round, a busy event loop) still runs;
 * older ones missed in between collapse into one run, as at start.
 */
const CATCH_UP_MS = 60_000;
/** Due times one look at one job starts at most. */
const MAX_PER_TICK = 100;
/** How often the jobs are read again (jobs made or changed on another instance). */
const REFRESH_MS = 5000;
/**
 * How long before its due time a run is claimed and its container created (started at the due
 * time): the engine's start is then the only call left between the due time and the run.
 */
export const LEAD_MS = 1500;

export interface JobSchedulerDeps {
  readonly store: Pick<JobStore, 'allJobs' | 'lastDueAt'>;
  /** Claims and starts the run of `job` for `dueAt` (the store makes it once across instances). */
  readonly start: (job: JobRow, dueAt: Date) => Promise<unknown>;
  readonly log: Log;
  /** How far ahead due times are claimed (default LEAD_MS). */
  readonly leadMs?: number;
}

interface Entry {
  job: JobRow;
  schedule: JobSchedule;
  /** Due times up to this one are handled (run, claimed elsewhere, or too late). */
  cursor: Date;
  /** Not looked at since it was first read: its past due times (missed) run once, the latest. */
  fresh: boolean;
}

/**
 * Every instance runs one. A job seen for the first time (at start, or made since) starts after
 * the latest of: its last change, an hour ago, and its last recorded due time, so the latest due
 * time missed within the hour runs once, and nothing runs for a time before the job existed.
 */
export class JobScheduler {
  readonly #deps: JobSchedulerDeps;
  readonly #entries = new Map<string, Entry>();
  #refreshedAt = 0;
  #wake: (() => void) | undefined;
  #stale = true;

  constructor(deps: JobSchedulerDeps) {
    this.#deps = deps;
  }

  /** A job was made, changed or deleted here: read them again now. */
  changed(): void {
    this.#stale = true;
    this.#wake?.();
  }

  /** Reads every job again; new and changed ones get their schedule and cursor. */
  async refresh(now: Date): Promise<void> {
    const jobs = await this.#deps.store.allJobs();
    const seen = new Set<string>();
    for (const job of jobs) {
      seen.add(job.id);
      const known = this.#entries.get(job.id);
      if (known !== undefined && known.job.updated_at === job.updated_at) continue;
      let schedule: JobSchedule;
      try {
        schedule = JobSchedule.parse(job.schedule, job.timezone);
      } catch (err) {
        this.#deps.log('warn', `job ${job.name} has a schedule that no longer reads; it does not run`, { err });
        this.#entries.delete(job.id);
        continue;
      }
      const changedAt = Date.parse(job.updated_at);
      const floor = known === undefined ? Math.max(changedAt, now.getTime() - MAX_LATE_MS, Date.parse((await this.#deps.store.lastDueAt(job.id)) ?? '') || 0) : Math.max(changedAt, known.cursor.getTime());
      this.#entries.set(job.id, { job, schedule, cursor: new Date(floor), fresh: known === undefined });
    }
    for (const id of this.#entries.keys()) if (!seen.has(id)) this.#entries.delete(id);
    this.#refreshedAt = now.getTime();
    this.#stale = false;
  }

  get #lead(): number {
    return this.#deps.leadMs ?? LEAD_MS;
  }

  /** Starts, for each job, the due times reached (or coming within the lead) since its cursor; missed ones run once (their latest). */
  async tick(now: Date): Promise<void> {
    const starts: Array<Promise<unknown>> = [];
    const horizon = new Date(now.getTime() + this.#lead);
    for (const entry of this.#entries.values()) {
      const dues = entry.schedule.dueIn(entry.cursor, horizon, MAX_PER_TICK);
      const fresh = entry.fresh;
      entry.fresh = false;
      const last = dues.at(-1);
      if (last === undefined) continue;
      entry.cursor = last;
      // Each due time runs; those missed (before this instance looked, or long ago) collapse into their latest.
      const missedBefore = fresh ? now.getTime() : now.getTime() - CATCH_UP_MS;
      const missed = dues.filter((d) => d.getTime() < missedBefore);
      const current = dues.filter((d) => d.getTime() >= missedBefore);
      const chosen = current.length > 0 ? current : missed.slice(-1);
      for (const due of chosen) {
        if (now.getTime() - due.getTime() >= MAX_LATE_MS) continue;
        starts.push(this.#deps.start(entry.job, due).catch((err: unknown) => this.#deps.log('warn', `job ${entry.job.name} could not start`, { err })));
      }
    }
    await Promise.all(starts);
  }

  /** The earliest due time to come after the cursors, or null when no job has one. */
  nextDue(): Date | null {
    let next: Date | null = null;
    for (const entry of this.#entries.values()) {
      const due = entry.schedule.next(entry.cursor);
      if (due !== null && (next === null || due < next)) next = due;
    }
    return next;
  }

  /** The scheduler's life on this instance: refresh, tick, sleep until the next due time (or the next refresh), until `signal` aborts. */
  async run(signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      try {
        const now = new Date();
        if (this.#stale || now.getTime() - this.#refreshedAt >= REFRESH_MS) await this.refresh(now);
        await this.tick(new Date());
      } catch (err) {
        if (!signal.aborted) this.#deps.log('warn', 'the job scheduler failed a round', { err });
      }
      const next = (this.nextDue()?.getTime() ?? Infinity) - this.#lead;
      const until = Math.min(next, this.#refreshedAt + REFRESH_MS, Date.now() + REFRESH_MS);
      await this.#sleep(Math.max(0, until - Date.now()), signal);
    }
  }

  #sleep(ms: number, signal: AbortSignal): Promise<void> {
    if (this.#stale) return Promise.resolve();
    return new Promise((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        signal.removeEventListener('abort', done);
        this.#wake = undefined;
        resolve();
      };
      const timer = setTimeout(done, ms);
      signal.addEventListener('abort', done, { once: true });
      this.#wake = done;
    });
  }
}
