// Routes: notification channels (decisions §23) — create, list, one, change, delete, test, deliveries.
import type { FastifyPluginAsync } from 'fastify';
import { Type } from '@sinclair/typebox';
import { createChannel, deleteChannel, getChannel, listChannels, listDeliveries, testChannel, updateChannel, type ChannelPosition, type ChannelsContext } from '../../notifications/channels.js';
import { isTimeIdPosition, listResponse, pageRequest, sendPage, type ListCursors, type ListRef } from '../list-pages.js';
import { principalOf } from '../authenticate.js';
import { ChannelListQuery, ChannelResponse, CreateChannelBody, DeliveryResponse, TestResponse, UpdateChannelBody } from '../notification-schemas.js';
import { IdParams, errorResponses } from '../schemas.js';

type IdRequest = { Params: { id: string } };

export const notificationRoutes =
  (ctx: ChannelsContext, cursors: ListCursors): FastifyPluginAsync =>
  async (app) => {
    const tags = ['notifications'];
    const one = { 200: ChannelResponse, ...errorResponses(401, 403, 404) };

    app.post<{ Body: CreateChannelBody }>(
      '/notification-channels',
      { schema: { tags, summary: 'Create a channel (a webhook channel\'s answer carries its signing secret, once)', body: CreateChannelBody, response: { 201: ChannelResponse, ...errorResponses(400, 401, 403, 404) } } },
      async (request, reply) => reply.code(201).header('Cache-Control', 'no-store').send(await createChannel(ctx, principalOf(request), request.body)),
    );

    app.get<{ Querystring: ChannelListQuery }>(
      '/notification-channels',
      { schema: { tags, summary: 'Your channels and your teams\' (one team\'s with team_id), oldest first, a page at a time', querystring: ChannelListQuery, response: { 200: listResponse(Type.Array(ChannelResponse)), ...errorResponses(400, 401, 404) } } },
      async (request, reply) => {
        const principal = principalOf(request);
        const ref: ListRef<ChannelPosition> = { cursors, path: '/api/v1/notification-channels', list: 'notification-channels', scope: principal.userId, valid: isTimeIdPosition };
        const page = pageRequest(ref, request.query);
        const result = await listChannels(ctx, principal, request.query.team_id, page);
        return sendPage(request, reply, ref, page, result.items, result.next);
      },
    );

    app.get<IdRequest>('/notification-channels/:id', { schema: { tags, summary: 'One channel', params: IdParams, response: one } }, async (request) => getChannel(ctx, principalOf(request), request.params.id));

    app.patch<IdRequest & { Body: UpdateChannelBody }>(
      '/notification-channels/:id',
      { schema: { tags, summary: 'Change its name, URL or e-mail, events; rotate_secret: a new webhook secret, shown once', params: IdParams, body: UpdateChannelBody, response: { ...one, ...errorResponses(400) } } },
      async (request, reply) => reply.header('Cache-Control', 'no-store').send(await updateChannel(ctx, principalOf(request), request.params.id, request.body)),
    );

    app.delete<IdRequest>(
      '/notification-channels/:id',
      { schema: { tags, summary: 'Delete it with its delivery log', params: IdParams, response: { 204: { type: 'null' }, ...errorResponses(401, 403, 404) } } },
      async (request, reply) => {
        await deleteChannel(ctx, principalOf(request), request.params.id);
        return reply.code(204).send();
      },
    );

    app.post<IdRequest>(
      '/notification-channels/:id/test',
      { schema: { tags, summary: 'Send a test message now: ok, the receiver\'s status code, or the error', params: IdParams, response: { 200: TestResponse, ...errorResponses(401, 403, 404) } } },
      async (request) => testChannel(ctx, principalOf(request), request.params.id),
    );

    app.get<IdRequest>(
      '/notification-channels/:id/deliveries',
      { schema: { tags, summary: 'Its last messages, newest first (retries keep a message\'s id)', params: IdParams, response: { 200: Type.Array(DeliveryResponse), ...errorResponses(401, 404) } } },
      async (request, reply) => reply.header('Cache-Control', 'no-store').send(await listDeliveries(ctx, principalOf(request), request.params.id)),
    );
  };
