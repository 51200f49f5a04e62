// Routes: API keys (list, create, revoke).
import type { FastifyPluginAsync } from 'fastify';
import { Type } from '@sinclair/typebox';
import { createApiKey, deleteApiKey, listApiKeys } from '../../domain/api-keys.js';
import { assertUuid } from '../../domain/deployments.js';
import type { ApiDeps } from '../app.js';
import { principalOf } from '../authenticate.js';
import { CreateApiKeyBody, CreateApiKeyResponse, IdParams, errorResponses } from '../schemas.js';

export const apiKeyRoutes =
  (deps: ApiDeps): FastifyPluginAsync =>
  async (app) => {
    app.get(
      '/api-keys',
      { schema: { tags: ['api-keys'], summary: "The caller's API keys", response: { 200: Type.Array(Type.Ref('ApiKey')), ...errorResponses(401) } } },
      async (request) => listApiKeys(deps.db, deps.keyUsage, principalOf(request)),
    );

    app.post<{ Body: CreateApiKeyBody }>(
      '/api-keys',
      {
        schema: {
          tags: ['api-keys'],
          summary: 'Create an API key; the full key is returned only here',
          body: CreateApiKeyBody,
          response: { 201: CreateApiKeyResponse, ...errorResponses(400, 401) },
        },
      },
      async (request, reply) => reply.code(201).send(await createApiKey(deps.db, principalOf(request), request.body)),
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
        await deleteApiKey(deps.db, principalOf(request), request.params.id, (keyId) => deps.tunnels.closeForKey(keyId));
        return reply.code(204).send();
      },
    );
  };
