// Routes: a git deployment's webhook (create or rotate the secret, show it without the secret) and its deliveries.
import type { FastifyPluginAsync } from 'fastify';
import { Type } from '@sinclair/typebox';
import { getWebhook, listDeliveries, setWebhook } from '../../domain/webhooks.js';
import type { ApiDeps } from '../api-deps.js';
import { principalOf } from '../authenticate.js';
import { noStore } from '../no-store.js';
import { IdParams, WebhookResponse, WebhookSecretResponse, errorResponses } from '../schemas.js';

type IdRequest = { Params: { id: string } };

export const webhookRoutes =
  (deps: ApiDeps): FastifyPluginAsync =>
  async (app) => {
    const hookDeps = { deployments: deps.deployments, webhooks: deps.webhooks, publicUrl: deps.config.publicUrl };

    app.post<IdRequest>(
      '/deployments/:id/webhook',
      {
        schema: {
          tags: ['webhooks'],
          summary: 'Create or rotate the webhook secret of a git deployment; the secret is shown in this answer only',
          params: IdParams,
          response: { 201: WebhookSecretResponse, ...errorResponses(400, 401, 403, 404) },
        },
      },
      async (request, reply) => noStore(reply).code(201).send(await setWebhook(hookDeps, principalOf(request), request.params.id)),
    );

    app.get<IdRequest>(
      '/deployments/:id/webhook',
      {
        schema: {
          tags: ['webhooks'],
          summary: "The webhook's URL and whether a secret is set (never the secret)",
          params: IdParams,
          response: { 200: WebhookResponse, ...errorResponses(400, 401, 404) },
        },
      },
      async (request) => getWebhook(hookDeps, principalOf(request), request.params.id),
    );

    app.get<IdRequest>(
      '/deployments/:id/webhook/deliveries',
      {
        schema: {
          tags: ['webhooks'],
          summary: 'The last 100 deliveries the webhook received, newest first, with what came of each',
          params: IdParams,
          response: { 200: Type.Array(Type.Ref('WebhookDelivery')), ...errorResponses(401, 404) },
        },
      },
      async (request) => listDeliveries(hookDeps, principalOf(request), request.params.id),
    );
  };
