// Routes: managed databases (decisions §19) — create, list, one, change, delete, stop, start, credentials, metrics, logs — and their links to deployments.
import type { FastifyPluginAsync } from 'fastify';
import { Type } from '@sinclair/typebox';
import type { DatabasesContext } from '../../databases/database-context.js';
import {
  createDatabase,
  databaseLogs,
  databaseMetrics,
  deleteDatabase,
  getDatabase,
  getDatabaseRow,
  listDatabases,
  presentDatabase,
  readCredentials,
  startDatabase,
  stopDatabase,
  updateDatabase,
  type DatabasePosition,
} from '../../databases/databases.js';
import { linkDatabase, listLinks, unlinkDatabase } from '../../databases/database-links.js';
import { PageQuery, isSeqPosition, listResponse, pageRequest, sendPage, type ListCursors, type ListRef } from '../list-pages.js';
import { principalOf } from '../authenticate.js';
import { IdParams, MAX_TAIL_LINES, RuntimeLogsQuery, TextResponse, errorResponses, isFlagSet } from '../schemas.js';
import {
  CreateDatabaseBody,
  CredentialsResponse,
  DatabaseMetricsResponse,
  DatabaseResponse,
  DeleteDatabaseQuery,
  LinkBody,
  LinkParams,
  LinkResponse,
  UpdateDatabaseBody,
} from '../database-schemas.js';
import { clientGone, sendText } from './deployment-routes.js';
import { DomainError } from '../../core/errors.js';
import type { Principal } from '../../core/principal.js';
import type { DatabaseRow } from '../../databases/database-store.js';

type IdRequest = { Params: { id: string } };

/** A database's backup schedule set (or, null, removed) and read back: the backups part's, when it runs. */
export interface BackupScheduleHooks {
  set(principal: Principal, databaseId: string, backup: object | null): Promise<void>;
  /** The schedules of these databases, in their order (null: none). */
  get(databaseIds: readonly string[]): Promise<Array<{ schedule: string; destination_id: string; keep: number; pitr: boolean } | null>>;
  /** Deletes every backup of a database just deleted (`?delete_backups=true`). */
  deleteAll(databaseId: string): Promise<void>;
}

/** Databases as the API shows them, each with its `backup` schedule when the backups part runs. */
async function presentWithBackup(rows: readonly DatabaseRow[], schedules: BackupScheduleHooks | undefined): Promise<Array<ReturnType<typeof presentDatabase> & { backup?: Awaited<ReturnType<BackupScheduleHooks['get']>>[number] }>> {
  const backups = schedules === undefined ? undefined : await schedules.get(rows.map((r) => r.id));
  return rows.map((row, i) => ({ ...presentDatabase(row), ...(backups === undefined ? {} : { backup: backups[i] ?? null }) }));
}

export const databaseRoutes =
  (ctx: DatabasesContext, cursors: ListCursors, schedules?: BackupScheduleHooks): FastifyPluginAsync =>
  async (app) => {
    const tags = ['databases'];
    const one = { 200: DatabaseResponse, ...errorResponses(401, 403, 404) };

    app.post<{ Body: CreateDatabaseBody }>(
      '/databases',
      {
        schema: {
          tags,
          summary: 'Create a managed database (status creating, then running or failed)',
          body: CreateDatabaseBody,
          response: { 201: DatabaseResponse, ...errorResponses(400, 401, 403, 404, 409, 429) },
        },
      },
      async (request, reply) => reply.code(201).send(presentDatabase(await createDatabase(ctx, principalOf(request), request.body))),
    );

    app.get<{ Querystring: PageQuery }>(
      '/databases',
      { schema: { tags, summary: 'Your databases and your teams\', newest first, a page at a time', querystring: PageQuery, response: { 200: listResponse(Type.Array(DatabaseResponse)), ...errorResponses(400, 401) } } },
      async (request, reply) => {
        const principal = principalOf(request);
        const ref: ListRef<DatabasePosition> = { cursors, path: '/api/v1/databases', list: 'databases', scope: principal.userId, valid: isSeqPosition };
        const page = pageRequest(ref, request.query);
        const result = await listDatabases(ctx, principal, page);
        return sendPage(request, reply, ref, page, await presentWithBackup(result.items, schedules), result.next);
      },
    );

    app.get<IdRequest>(
      '/databases/:id',
      { schema: { tags, summary: 'One database (its size measured again while it runs)', params: IdParams, response: one } },
      async (request) => (await presentWithBackup([await getDatabase(ctx, principalOf(request), request.params.id)], schedules))[0],
    );

    app.patch<IdRequest & { Body: UpdateDatabaseBody }>(
      '/databases/:id',
      { schema: { tags, summary: 'Change its memory and CPU limits (applied at its next start)', params: IdParams, body: UpdateDatabaseBody, response: { ...one, ...errorResponses(400) } } },
      async (request) => {
        const principal = principalOf(request);
        const { backup, ...limits } = request.body;
        if (backup === undefined || Object.keys(limits).length > 0) await updateDatabase(ctx, principal, request.params.id, limits);
        if (backup !== undefined) {
          if (schedules === undefined) throw new DomainError('invalid_state', 'backups are not available on this server');
          await schedules.set(principal, request.params.id, backup);
        }
        return (await presentWithBackup([await getDatabaseRow(ctx, principal, request.params.id, 'read')], schedules))[0];
      },
    );

    app.delete<IdRequest & { Querystring: { force?: string; delete_backups?: string } }>(
      '/databases/:id',
      {
        schema: {
          tags,
          summary: 'Delete it with its container and volume (its data), unlinking it from its deployments; its backups are kept unless delete_backups=true',
          params: IdParams,
          querystring: DeleteDatabaseQuery,
          response: { 204: { type: 'null' }, ...errorResponses(401, 403, 404) },
        },
      },
      async (request, reply) => {
        await deleteDatabase(ctx, principalOf(request), request.params.id);
        if (isFlagSet(request.query.delete_backups)) await schedules?.deleteAll(request.params.id);
        return reply.code(204).send();
      },
    );

    app.post<IdRequest>(
      '/databases/:id/stop',
      { schema: { tags, summary: 'Stop it (its data stays)', params: IdParams, response: { ...one, ...errorResponses(409) } } },
      async (request) => presentDatabase(await stopDatabase(ctx, principalOf(request), request.params.id)),
    );

    app.post<IdRequest>(
      '/databases/:id/start',
      { schema: { tags, summary: 'Start it and wait until it accepts logins (running, or failed with the reason)', params: IdParams, response: { ...one, ...errorResponses(409) } } },
      async (request) => presentDatabase(await startDatabase(ctx, principalOf(request), request.params.id)),
    );

    app.get<IdRequest>(
      '/databases/:id/credentials',
      { schema: { tags, summary: 'Its credentials and URL (owner or developer; every read is in the audit log)', params: IdParams, response: { 200: CredentialsResponse, ...errorResponses(401, 403, 404) } } },
      async (request, reply) => reply.header('Cache-Control', 'no-store').send(await readCredentials(ctx, principalOf(request), request.params.id)),
    );

    app.get<IdRequest>(
      '/databases/:id/metrics',
      { schema: { tags, summary: 'CPU, memory, network and restarts of its container (409 when it does not run)', params: IdParams, response: { 200: DatabaseMetricsResponse, ...errorResponses(401, 404, 409) } } },
      async (request, reply) => {
        const s = await databaseMetrics(ctx, principalOf(request), request.params.id, clientGone(reply));
        return reply.header('Cache-Control', 'no-store').send({
          cpu_percent: s.cpuPercent,
          memory_bytes: s.memoryBytes,
          memory_limit_bytes: s.memoryLimitBytes,
          network_rx_bytes: s.networkRxBytes,
          network_tx_bytes: s.networkTxBytes,
          restarts: s.restarts,
          started_at: s.startedAt,
        });
      },
    );

    app.get<IdRequest & { Querystring: RuntimeLogsQuery }>(
      '/databases/:id/logs',
      { schema: { tags, summary: "Its container's output (text); tail=N, follow=true streams", params: IdParams, querystring: RuntimeLogsQuery, response: { 200: TextResponse, ...errorResponses(401, 404, 409) } } },
      async (request, reply) => {
        const chunks = await databaseLogs(ctx, principalOf(request), request.params.id, {
          tail: request.query.tail === undefined ? undefined : Math.min(Number(request.query.tail), MAX_TAIL_LINES),
          follow: isFlagSet(request.query.follow),
          signal: clientGone(reply),
        });
        return sendText(reply, chunks);
      },
    );

    app.post<IdRequest & { Body: LinkBody }>(
      '/deployments/:id/databases',
      {
        schema: {
          tags,
          summary: 'Link a database of the same owner or team: from the next release the app gets its URL as a secret variable (env, default DATABASE_URL)',
          params: IdParams,
          body: LinkBody,
          response: { 201: LinkResponse, ...errorResponses(400, 401, 403, 404, 409) },
        },
      },
      async (request, reply) => reply.code(201).send(await linkDatabase(ctx, principalOf(request), request.params.id, request.body)),
    );

    app.get<IdRequest>(
      '/deployments/:id/databases',
      { schema: { tags, summary: 'The databases linked to a deployment', params: IdParams, response: { 200: Type.Array(LinkResponse), ...errorResponses(401, 404) } } },
      async (request) => listLinks(ctx, principalOf(request), request.params.id),
    );

    app.delete<{ Params: { id: string; database_id: string } }>(
      '/deployments/:id/databases/:database_id',
      { schema: { tags, summary: 'Unlink: its containers leave the database\'s network now, the variable goes at the next release', params: LinkParams, response: { 204: { type: 'null' }, ...errorResponses(401, 403, 404) } } },
      async (request, reply) => {
        await unlinkDatabase(ctx, principalOf(request), request.params.id, request.params.database_id);
        return reply.code(204).send();
      },
    );
  };
