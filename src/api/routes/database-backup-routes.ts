// Routes: a database's backups (decisions §20) — take one now, list, one, delete, download decrypted.
import type { FastifyPluginAsync } from 'fastify';
import { Type } from '@sinclair/typebox';
import type { BackupsContext } from '../../backups/backups-context.js';
import { deleteBackup, downloadBackup, getBackupRow, listBackups, presentBackup, startBackup, type BackupPosition } from '../../backups/backups.js';
import { PageQuery, isSeqPosition, listResponse, pageRequest, sendPage, type ListCursors, type ListRef } from '../list-pages.js';
import { principalOf } from '../authenticate.js';
import { IdParams, errorResponses } from '../schemas.js';
import { BackupParams, BackupResponse, RecoveryWindowResponse, RestoreBody, RestoreResponse, StartBackupBody } from '../backup-schemas.js';
import { getRestore, startRestore } from '../../backups/restore-backup.js';
import { getRecoveryWindow, startPointInTimeRestore } from '../../backups/point-in-time.js';
import { clientGone } from './deployment-routes.js';

type BackupRequest = { Params: { id: string; backup_id: string } };

export const databaseBackupRoutes =
  (ctx: BackupsContext, cursors: ListCursors): FastifyPluginAsync =>
  async (app) => {
    const tags = ['backups'];

    app.post<{ Params: { id: string }; Body: StartBackupBody }>(
      '/databases/:id/backups',
      {
        schema: {
          tags,
          summary: "Take a backup now (into destination_id, or the schedule's destination): running, then verified or failed",
          params: IdParams,
          body: StartBackupBody,
          response: { 202: BackupResponse, ...errorResponses(400, 401, 403, 404, 409) },
        },
        // "Starts one now" needs no body: a POST without one is the same as `{}` (the schema alone would refuse it).
        preValidation: async (request) => {
          request.body ??= {};
        },
      },
      async (request, reply) => reply.code(202).send(presentBackup(await startBackup(ctx, principalOf(request), request.params.id, request.body))),
    );

    app.get<{ Params: { id: string }; Querystring: PageQuery }>(
      '/databases/:id/backups',
      { schema: { tags, summary: "The database's backups, newest first, a page at a time", params: IdParams, querystring: PageQuery, response: { 200: listResponse(Type.Array(BackupResponse)), ...errorResponses(400, 401, 404) } } },
      async (request, reply) => {
        const principal = principalOf(request);
        const path = `/api/v1/databases/${encodeURIComponent(request.params.id)}/backups`;
        const ref: ListRef<BackupPosition> = { cursors, path, list: `backups:${request.params.id}`, scope: principal.userId, valid: isSeqPosition };
        const page = pageRequest(ref, request.query);
        const result = await listBackups(ctx, principal, request.params.id, page);
        return sendPage(request, reply, ref, page, result.items.map(presentBackup), result.next);
      },
    );

    app.get<BackupRequest>(
      '/databases/:id/backups/:backup_id',
      { schema: { tags, summary: 'One backup', params: BackupParams, response: { 200: BackupResponse, ...errorResponses(401, 404) } } },
      async (request) => presentBackup(await getBackupRow(ctx, principalOf(request), request.params.id, request.params.backup_id, 'read')),
    );

    app.delete<BackupRequest>(
      '/databases/:id/backups/:backup_id',
      { schema: { tags, summary: 'Delete a backup: its object in the destination, then its record', params: BackupParams, response: { 204: { type: 'null' }, ...errorResponses(401, 403, 404, 409) } } },
      async (request, reply) => {
        await deleteBackup(ctx, principalOf(request), request.params.id, request.params.backup_id);
        return reply.code(204).send();
      },
    );

    app.get<BackupRequest>(
      '/databases/:id/backups/:backup_id/download',
      {
        schema: {
          tags,
          summary: "The backup's dump, decrypted and streamed (owner or developer); a tampered object is cut off, never served whole",
          params: BackupParams,
          response: { 200: Type.String({ format: 'binary' }), ...errorResponses(401, 403, 404, 409) },
        },
      },
      async (request, reply) => {
        const { stream, filename } = await downloadBackup(ctx, principalOf(request), request.params.id, request.params.backup_id, clientGone(reply));
        // A failure mid-stream (a tag that fails) ends the response early: the client sees a cut transfer, never a whole file.
        stream.on('error', () => reply.raw.destroy());
        return reply
          .type('application/octet-stream')
          .header('Content-Disposition', `attachment; filename="${filename}"`)
          .header('Cache-Control', 'no-store')
          .send(stream);
      },
    );

    app.post<{ Params: { id: string }; Body: RestoreBody }>(
      '/databases/:id/restore',
      {
        schema: {
          tags,
          summary: 'Restore a backup: in place (a safety backup first, linked apps restarted) or into a new database; 409 for a failed backup. {at, into}: point-in-time recovery (PostgreSQL with pitr) into a new database; 400 naming the recoverable window',
          params: IdParams,
          body: RestoreBody,
          response: { 202: RestoreResponse, ...errorResponses(400, 401, 403, 404, 409) },
        },
      },
      async (request, reply) => {
        if (request.body.at !== undefined) return reply.code(202).send(await startPointInTimeRestore(ctx, principalOf(request), request.params.id, request.body));
        return reply.code(202).send(await startRestore(ctx, principalOf(request), request.params.id, request.body));
      },
    );

    app.get<{ Params: { id: string } }>(
      '/databases/:id/recovery-window',
      {
        schema: {
          tags,
          summary: 'Point-in-time recovery (PostgreSQL with pitr): the window a restore {at, into} may name (null while there is none), and the archiver\'s last error',
          params: IdParams,
          response: {
            200: RecoveryWindowResponse,
            ...errorResponses(401, 404),
          },
        },
      },
      async (request) => getRecoveryWindow(ctx, principalOf(request), request.params.id),
    );

    app.get<{ Params: { id: string; restore_id: string } }>(
      '/databases/:id/restores/:restore_id',
      { schema: { tags, summary: 'A restore: running, succeeded or failed with the step', params: Type.Object({ id: Type.String(), restore_id: Type.String() }), response: { 200: RestoreResponse, ...errorResponses(401, 404) } } },
      async (request) => getRestore(ctx, principalOf(request), request.params.id, request.params.restore_id),
    );
  };
