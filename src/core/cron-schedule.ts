// Cron schedules (decisions §22, also the self-backup's §25): cron expressions (5 fields, 6 with seconds, or @hourly/@daily/@weekly/@monthly) in an IANA time zone, read with croner.
import { Cron } from 'croner';
import { DomainError } from './errors.js';

const NICKNAMES = new Set(['@hourly', '@daily', '@weekly', '@monthly']);
/** How many due times one look walks at most (a per-second schedule over an hour is 3,600). */
const MAX_STEPS = 10_000;

const invalid = (field: string, why: string): DomainError => new DomainError('validation_error', `${field}: ${why}`);

/** A checked IANA time zone name (`UTC` included); throws a 400 naming `timezone`. */
export function checkTimezone(value: string): string {
  // Offsets and abbreviations some engines accept are refused: only names from the IANA database.
  if (!/^[A-Za-z][A-Za-z0-9_+-]*(\/[A-Za-z0-9_+-]+)*$/.test(value) || value.length > 64) throw invalid('timezone', `${JSON.stringify(value)} is not an IANA time zone name (e.g. UTC, Europe/Paris)`);
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: value });
  } catch {
    throw invalid('timezone', `${JSON.stringify(value)} is not an IANA time zone name (e.g. UTC, Europe/Paris)`);
  }
  return value;
}

/** A job's schedule: the due times of a checked cron expression in its time zone. */
export class JobSchedule {
  readonly #cron: Cron;
  /** The expression as read: a nickname lower-cased, fields single-spaced. */
  readonly expression: string;

  private constructor(cron: Cron, expression: string) {
    this.#cron = cron;
    this.expression = expression;
  }

  /**
   * Reads `expression` in `timezone` (already checked): 5 fields (minute precision), 6 (seconds
   * first), or a nickname of the contract. Throws a 400 naming `schedule` for anything else,
   * including an expression that never comes due (30 February).
   */
  static parse(expression: string, timezone: string): JobSchedule {
    const text = expression.trim();
    if (text.startsWith('@')) {
      if (!NICKNAMES.has(text.toLowerCase())) throw invalid('schedule', `${JSON.stringify(text)} is not one of @hourly, @daily, @weekly, @monthly`);
    } else {
      const fields = text.split(/\s+/).length;
      if (text === '' || (fields !== 5 && fields !== 6)) throw invalid('schedule', `a cron expression has 5 fields (minute hour day month weekday) or 6 (seconds first); ${JSON.stringify(text)} has ${text === '' ? 0 : fields}`);
    }
    const normalized = text.startsWith('@') ? text.toLowerCase() : text.split(/\s+/).join(' ');
    let cron: Cron;
    try {
      cron = new Cron(normalized, { paused: true, timezone });
    } catch (err) {
      throw invalid('schedule', err instanceof Error ? err.message.replace(/^CronPattern: /, '') : 'not a cron expression');
    }
    if (cron.nextRun(new Date()) === null) throw invalid('schedule', `${JSON.stringify(text)} never comes due`);
    return new JobSchedule(cron, normalized);
  }

  /** The first due time strictly after `after`, or null when none comes. */
  next(after: Date): Date | null {
    return this.#cron.nextRun(after);
  }

  /** Every due time in (`after`, `until`], oldest first (the last `limit` when there are more). */
  dueIn(after: Date, until: Date, limit: number): Date[] {
    const due: Date[] = [];
    let at = after;
    for (let step = 0; step < MAX_STEPS; step++) {
      const next = this.#cron.nextRun(at);
      if (next === null || next.getTime() > until.getTime()) break;
      due.push(next);
      if (due.length > limit) due.shift();
      at = next;
    }
    return due;
  }

  /** The latest due time in (`after`, `until`], or null when none falls in it. */
  latestIn(after: Date, until: Date): Date | null {
    let latest: Date | null = null;
    let at = after;
    for (let step = 0; step < MAX_STEPS; step++) {
      const next = this.#cron.nextRun(at);
      if (next === null || next.getTime() > until.getTime()) return latest;
      latest = next;
      at = next;
    }
    return latest;
  }
}
