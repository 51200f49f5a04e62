// Backup schedules (decisions §20): the `backup` field of a database checked, and which due time of a cron expression is owed now.
import { Cron } from 'croner';
import { DomainError } from '../core/errors.js';

const invalid = (message: string): DomainError => new DomainError('validation_error', message);
/** Due times looked through at most when catching up (a schedule missed for long is taken once, at its latest due time). */
const MAX_STEPS = 100_000;

export interface ScheduleInput {
  readonly schedule?: unknown;
  readonly destination_id?: unknown;
  readonly keep?: unknown;
  readonly pitr?: unknown;
}

/** A checked schedule (`pitr`: point-in-time recovery, whose engine the caller checks). */
export function checkSchedule(input: ScheduleInput): { schedule: string; destination_id: string; keep: number; pitr: boolean } {
  if (typeof input.schedule !== 'string' || input.schedule.trim() === '') throw invalid('backup.schedule must be a cron expression, e.g. "0 3 * * *"');
  const schedule = input.schedule.trim();
  try {
    new Cron(schedule, { paused: true }).stop();
  } catch (err) {
    throw invalid(`backup.schedule is not a cron expression: ${err instanceof Error ? err.message : String(err)}`);
  }
  if (typeof input.destination_id !== 'string') throw invalid('backup.destination_id is required');
  const keep = input.keep ?? 7;
  if (typeof keep !== 'number' || !Number.isInteger(keep) || keep < 1 || keep > 365) throw invalid('backup.keep must be a whole number from 1 to 365');
  const pitr = input.pitr ?? false;
  if (typeof pitr !== 'boolean') throw invalid('backup.pitr must be true or false');
  return { schedule, destination_id: input.destination_id, keep, pitr };
}

/** The latest due time of `expression` after `since` and not after `now` (UTC), if any: the one backup owed. */
export function dueTime(expression: string, since: Date, now: Date): Date | undefined {
  const cron = new Cron(expression, { paused: true, timezone: 'UTC' });
  try {
    let due: Date | undefined;
    let next = cron.nextRun(since);
    for (let i = 0; next !== null && next.getTime() <= now.getTime() && i < MAX_STEPS; i++) {
      due = next;
      next = cron.nextRun(next);
    }
    return due;
  } finally {
    cron.stop();
  }
}
