// Routes of backups (decisions §20): their destinations, and a database's backups.
import type { FastifyPluginAsync } from 'fastify';
import type { BackupsContext } from '../../backups/backups-context.js';
import type { ListCursors } from '../list-pages.js';
import { backupDestinationRoutes } from './backup-destination-routes.js';
import { databaseBackupRoutes } from './database-backup-routes.js';
import type { BackupScheduleHooks } from './database-routes.js';
import { setBackupSchedule } from '../../backups/scheduler.js';
import { deleteDatabaseBackups } from '../../backups/delete-database-backups.js';

export const backupRoutes =
  (ctx: BackupsContext, cursors: ListCursors): FastifyPluginAsync =>
  async (app) => {
    await app.register(backupDestinationRoutes(ctx, cursors));
    await app.register(databaseBackupRoutes(ctx, cursors));
  };

/** The PATCH database `backup` field, served by the backups part. */
export const backupScheduleHooks = (ctx: BackupsContext): BackupScheduleHooks => ({
  set: (principal, databaseId, backup) => setBackupSchedule(ctx, principal, databaseId, backup),
  get: async (databaseIds) => {
    const found = new Map((await ctx.store.schedulesOf(databaseIds)).map((s) => [s.database_id, { schedule: s.schedule, destination_id: s.destination_id, keep: s.keep, pitr: s.pitr }]));
    return databaseIds.map((id) => found.get(id) ?? null);
  },
  deleteAll: (databaseId) => deleteDatabaseBackups(ctx, databaseId),
});
