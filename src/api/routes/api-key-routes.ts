// Routes: API keys (list, create, revoke).
import type { FastifyPluginAsync } from 'fastify';
import { Type } from '@sinclair/typebox';
import { createApiKey, deleteApiKey, listApiKeys } from '../../domain/api-keys.js';
import { assertUuid } from '../../domain/deployments.js';
import type { ApiDeps } from '../api-deps.js';
import { principalOf } from '../authenticate.js';
import { noStore } from '../no-store.js';
import { PageQuery, isTimeIdPosition, listResponse, pageRequest, sendPage, type ListRef } from '../list-pages.js';
import type { ApiKeyPosition } from '../../domain/api-keys.js';
import { CreateApiKeyBody, CreateApiKeyResponse, IdParams, errorResponses } from '../schemas.js';

export const apiKeyRoutes =
  (deps: ApiDeps): FastifyPluginAsync =>
  async (app) => {
    app.get<{ Querystring: PageQuery }>(
      '/api-keys',
      {
        schema: {
          tags: ['api-keys'],
          summary: "The caller's API keys, newest first, a page at a time",
          querystring: PageQuery,
          response: { 200: listResponse(Type.Array(Type.Ref('ApiKey'))), ...errorResponses(400, 401) },
        },
      },
      async (request, reply) => {
        const principal = principalOf(request);
        const ref: ListRef<ApiKeyPosition> = { cursors: deps.cursors, path: '/api/v1/api-keys', list: 'api-keys', scope: principal.userId, valid: isTimeIdPosition };
        const page = pageRequest(ref, request.query);
        const keys = await listApiKeys(deps.apiKeys, deps.keyUsage, principal, page);
        return sendPage(request, reply, ref, page, keys.items, keys.next);
      },
    );

    app.post<{ Body: CreateApiKeyBody }>(
      '/api-keys',
      {
        schema: {
          tags: ['api-keys'],
          summary: 'Create an API key; the full key is returned only here',
          body: CreateApiKeyBody,
          response: { 201: CreateApiKeyResponse, ...errorResponses(400, 401, 429) },
        },
      },
      async (request, reply) => {
        await deps.quotas.assertRoom(principalOf(request), 'api_keys');
        return noStore(reply).code(201).send(await createApiKey(deps.apiKeys, principalOf(request), request.body));
      },
    );

    app.delete<{ Params: { id: string } }>(
      '/api-keys/:id',
      {
        schema: {
          tags: ['api-keys'],
          summary: 'Revoke an API key (closes its tunnels)',
          params: IdParams,
          response: { 204: { type: 'null' }, ...errorResponses(401, 404) },
        },
      },
      async (request, reply) => {
        assertUuid(request.params.id, 'API key');
        await deleteApiKey(deps.apiKeys, principalOf(request), request.params.id, (keyId) => deps.tunnels.closeForKey(keyId));
        return reply.code(204).send();
      },
    );
  };
