// The schedules' round (the leader's, every 30 s): backups lost with their instance failed and retaken (or verified again), each due time taken once (a claim in the database).
import { databaseRecord } from '../databases/databases.js';
import { DomainError } from '../core/errors.js';
import type { Principal } from '../core/principal.js';
import type { BackgroundTask } from '../core/background.js';
import { getDatabaseRow } from '../databases/database-access.js';
import { ENGINES } from '../databases/engines.js';
import type { BackupsContext } from './backups-context.js';
import type { BackupRow } from './backup-store.js';
import { newBackupRow, recordAndTake } from './backups.js';
import { getDestinationRow } from './destinations.js';
import { checkSchedule, dueTime, type ScheduleInput } from './schedule.js';
import { failBackup, verifyAndRecord } from './take-backup.js';

/** How often the leader looks for due backups. */
export const SCHEDULE_ROUND_MS = 30_000;

/** Sets (or with null removes) a database's backup schedule, as PATCH `backup` does. */
export async function setBackupSchedule(ctx: BackupsContext, principal: Principal, databaseId: string, input: ScheduleInput | null): Promise<void> {
  const db = await getDatabaseRow(ctx.databases, principal, databaseId, 'change');
  const audit = databaseRecord(principal, db, 'database.backup_schedule.set');
  if (input === null) return ctx.store.setSchedule({ database_id: db.id, remove: true }, { ...audit, event: { ...audit.event, action: 'database.backup_schedule.remove' } });
  if (typeof input !== 'object') throw new DomainError('validation_error', 'backup must be an object {schedule, destination_id, keep} or null');
  const checked = checkSchedule(input);
  if (checked.pitr && ENGINES[db.engine].pointInTime === undefined) throw new DomainError('validation_error', `backup.pitr (point-in-time recovery) is offered for PostgreSQL databases; "${db.name}" is ${db.engine}`);
  await getDestinationRow(ctx, principal, checked.destination_id, 'read');
  await ctx.store.setSchedule({ database_id: db.id, ...checked }, audit);
}

/**
 * One round: backups whose instance is gone are settled (one cut while verifying is verified again
 * here; one cut before its object was whole is failed, "instance lost", and taken again), then
 * every schedule's owed backup started. Retention follows each verified backup (retention.ts).
 */
export async function scheduleRound(ctx: BackupsContext, liveIds: readonly string[], now: Date): Promise<void> {
  const live = new Set(liveIds);
  for (const backup of await ctx.store.allRunning()) {
    const lost = backup.runner === null || (backup.runner === ctx.runner ? !ctx.work.holds(backup.id) : !live.has(backup.runner));
    if (!lost) continue;
    if (backup.status === 'succeeded') {
      reverify(ctx, backup);
      continue;
    }
    await failBackup(ctx, backup, 'instance lost', 'the instance taking it stopped before it ended; it is taken again');
    if (backup.due_at !== null) await ctx.store.releaseDue(backup.id);
    else if (backup.trigger === 'manual') await retake(ctx, backup);
  }
  for (const schedule of await ctx.store.allSchedules()) {
    const db = await ctx.databases.store.get(schedule.database_id);
    if (db === undefined || db.status !== 'running') continue;
    const since = new Date((await ctx.store.lastDue(db.id)) ?? schedule.updated_at ?? now.toISOString());
    const due = dueTime(schedule.schedule, since, now);
    if (due === undefined) continue;
    await recordAndTake(ctx, newBackupRow(ctx, db, schedule.destination_id, 'schedule', due.toISOString()));
  }
}

/** A manual backup lost with its instance, taken again into the same destination (when its database still runs). */
async function retake(ctx: BackupsContext, lost: BackupRow): Promise<void> {
  const db = await ctx.databases.store.get(lost.database_id);
  if (db === undefined || db.status !== 'running' || (await ctx.store.getDestination(lost.destination_id)) === undefined) return;
  await recordAndTake(ctx, newBackupRow(ctx, db, lost.destination_id, 'manual'));
}

/** A backup whose object was whole when its instance was lost mid-verification: verified again on this one. */
function reverify(ctx: BackupsContext, backup: BackupRow): void {
  ctx.work.hold(backup.id);
  ctx.work.run(backup.id, async (signal) => {
    try {
      await ctx.store.updateBackup(backup.id, { runner: ctx.runner });
      await verifyAndRecord(ctx, { ...backup, runner: ctx.runner }, signal);
    } finally {
      ctx.work.drop(backup.id);
    }
  });
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
