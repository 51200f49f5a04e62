// Routes of backups (decisions §20): their destinations, and a database's backups.
import type { FastifyPluginAsync } from 'fastify';
import type { BackupsContext } from '../../backups/backups-context.js';
import type { ListCursors } from '../list-pages.js';
import { backupDestinationRoutes } from './backup-destination-routes.js';
import { databaseBackupRoutes } from './database-backup-routes.js';

export const backupRoutes =
  (ctx: BackupsContext, cursors: ListCursors): FastifyPluginAsync =>
  async (app) => {
    await app.register(backupDestinationRoutes(ctx, cursors));
    await app.register(databaseBackupRoutes(ctx, cursors));
  };
