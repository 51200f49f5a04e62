// Routes: backup destinations (decisions §20) — create, list, one, change, delete, test.
import type { FastifyPluginAsync } from 'fastify';
import { Type } from '@sinclair/typebox';
import type { BackupsContext } from '../../backups/backups-context.js';
import {
  createDestination,
  deleteDestination,
  getDestinationRow,
  listDestinations,
  presentDestination,
  testDestination,
  updateDestination,
  type DestinationPosition,
} from '../../backups/destinations.js';
import { PageQuery, isSeqPosition, listResponse, pageRequest, sendPage, type ListCursors, type ListRef } from '../list-pages.js';
import { principalOf } from '../authenticate.js';
import { IdParams, errorResponses } from '../schemas.js';
import { CreateDestinationBody, DestinationResponse, DestinationTestResponse, UpdateDestinationBody } from '../backup-schemas.js';

type IdRequest = { Params: { id: string } };

export const backupDestinationRoutes =
  (ctx: BackupsContext, cursors: ListCursors): FastifyPluginAsync =>
  async (app) => {
    const tags = ['backups'];
    const one = { 200: DestinationResponse, ...errorResponses(401, 403, 404) };

    app.post<{ Body: CreateDestinationBody }>(
      '/backup-destinations',
      { schema: { tags, summary: 'Create a backup destination (s3 or local); the secret is stored encrypted and never shown', body: CreateDestinationBody, response: { 201: DestinationResponse, ...errorResponses(400, 401, 403, 404, 409) } } },
      async (request, reply) => reply.code(201).send(presentDestination(await createDestination(ctx, principalOf(request), request.body))),
    );

    app.get<{ Querystring: PageQuery }>(
      '/backup-destinations',
      { schema: { tags, summary: "Your backup destinations and your teams', newest first", querystring: PageQuery, response: { 200: listResponse(Type.Array(DestinationResponse)), ...errorResponses(400, 401) } } },
      async (request, reply) => {
        const principal = principalOf(request);
        const ref: ListRef<DestinationPosition> = { cursors, path: '/api/v1/backup-destinations', list: 'backup-destinations', scope: principal.userId, valid: isSeqPosition };
        const page = pageRequest(ref, request.query);
        const result = await listDestinations(ctx, principal, page);
        return sendPage(request, reply, ref, page, result.items.map(presentDestination), result.next);
      },
    );

    app.get<IdRequest>(
      '/backup-destinations/:id',
      { schema: { tags, summary: 'One backup destination', params: IdParams, response: one } },
      async (request) => presentDestination(await getDestinationRow(ctx, principalOf(request), request.params.id, 'read')),
    );

    app.patch<IdRequest & { Body: UpdateDestinationBody }>(
      '/backup-destinations/:id',
      { schema: { tags, summary: 'Change its name or S3 settings (a secret given replaces the stored one)', params: IdParams, body: UpdateDestinationBody, response: { ...one, ...errorResponses(400, 409) } } },
      async (request) => presentDestination(await updateDestination(ctx, principalOf(request), request.params.id, request.body)),
    );

    app.delete<IdRequest>(
      '/backup-destinations/:id',
      { schema: { tags, summary: "Delete it (409 naming the databases whose schedule uses it); the objects stay in the bucket", params: IdParams, response: { 204: { type: 'null' }, ...errorResponses(401, 403, 404, 409) } } },
      async (request, reply) => {
        await deleteDestination(ctx, principalOf(request), request.params.id);
        return reply.code(204).send();
      },
    );

    app.post<IdRequest>(
      '/backup-destinations/:id/test',
      { schema: { tags, summary: 'Write, read back and delete a probe object: {ok: true}, or {ok: false, step, message} naming the step that failed', params: IdParams, response: { 200: DestinationTestResponse, ...errorResponses(401, 403, 404) } } },
      async (request) => testDestination(ctx, principalOf(request), request.params.id),
    );
  };
