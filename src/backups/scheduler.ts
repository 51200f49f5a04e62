// The schedules' round (the leader's, every 30 s): backups lost with their instance failed and retaken, each due time taken once (a claim in the database), retention by `keep`.
import { DomainError } from '../core/errors.js';
import type { Principal } from '../core/principal.js';
import type { BackgroundTask } from '../core/background.js';
import { getDatabaseRow } from '../databases/database-access.js';
import { ENGINES } from '../databases/engines.js';
import type { BackupsContext } from './backups-context.js';
import { newBackupRow, removeBackupObject } from './backups.js';
import { getDestinationRow } from './destinations.js';
import { checkSchedule, dueTime, type ScheduleInput } from './schedule.js';
import { failBackup, takeBackup } from './take-backup.js';

/** How often the leader looks for due backups. */
export const SCHEDULE_ROUND_MS = 30_000;

/** Sets (or with null removes) a database's backup schedule, as PATCH `backup` does. */
export async function setBackupSchedule(ctx: BackupsContext, principal: Principal, databaseId: string, input: ScheduleInput | null): Promise<void> {
  const db = await getDatabaseRow(ctx.databases, principal, databaseId, 'change');
  if (input === null) return ctx.store.setSchedule({ database_id: db.id, remove: true });
  if (typeof input !== 'object') throw new DomainError('validation_error', 'backup must be an object {schedule, destination_id, keep} or null');
  const checked = checkSchedule(input);
  if (checked.pitr && ENGINES[db.engine].pointInTime === undefined) throw new DomainError('validation_error', `backup.pitr (point-in-time recovery) is offered for PostgreSQL databases; "${db.name}" is ${db.engine}`);
  await getDestinationRow(ctx, principal, checked.destination_id, 'read');
  await ctx.store.setSchedule({ database_id: db.id, ...checked });
}

/** One round: lost backups failed ("instance lost") and their due time freed, then every schedule's owed backup started. */
export async function scheduleRound(ctx: BackupsContext, liveIds: readonly string[], now: Date): Promise<void> {
  const live = new Set(liveIds);
  for (const backup of await ctx.store.allRunning()) {
    const lost = backup.runner === null || (backup.runner === ctx.runner ? !ctx.work.holds(backup.id) : !live.has(backup.runner));
    if (!lost) continue;
    await failBackup(ctx, backup, 'instance lost', 'the instance taking it stopped before it ended; the schedule takes it again');
    if (backup.due_at !== null) await ctx.store.releaseDue(backup.id);
  }
  for (const schedule of await ctx.store.allSchedules()) {
    const db = await ctx.databases.store.get(schedule.database_id);
    if (db === undefined || db.status !== 'running') continue;
    const since = new Date((await ctx.store.lastDue(db.id)) ?? schedule.updated_at ?? now.toISOString());
    const due = dueTime(schedule.schedule, since, now);
    if (due === undefined) continue;
    const row = newBackupRow(ctx, db, schedule.destination_id, 'schedule', due.toISOString());
    ctx.work.hold(row.id);
    // The claim: (database, due time) is unique, so one instance alone records it.
    if ((await ctx.store.createBackup(row)) === 'due_taken') {
      ctx.work.drop(row.id);
      continue;
    }
    const created = (await ctx.store.getBackup(row.id))!;
    ctx.work.run(row.id, async (signal) => {
      if ((await takeBackup(ctx, created, signal)) === 'verified') await pruneBackups(ctx, db.id, schedule.keep);
    });
  }
}

/** Keeps the `keep` newest verified backups of a database; older verified ones are deleted with their objects. */
export async function pruneBackups(ctx: BackupsContext, databaseId: string, keep: number): Promise<void> {
  for (const old of (await ctx.store.verifiedBackups(databaseId)).slice(keep)) {
    try {
      await removeBackupObject(ctx, old);
      await ctx.store.removeBackup(old.id);
    } catch (err) {
      ctx.log('warn', `an old backup ${old.id} could not be deleted`, { err: err instanceof Error ? err.message : String(err) });
    }
  }
}

/** The leader's schedule round as a background task. */
export function scheduleTask(ctx: BackupsContext, liveIds: () => Promise<string[]>): BackgroundTask {
  return {
    name: 'taking scheduled backups',
    scope: 'leaderOnly',
    everyMs: SCHEDULE_ROUND_MS,
    immediately: true,
    run: async () => scheduleRound(ctx, await liveIds(), new Date()),
  };
}
