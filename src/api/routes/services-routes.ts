// Route: the services of a compose deployment's live set, as they run now (owner; contract §21).
import type { FastifyPluginAsync } from 'fastify';
import { Type } from '@sinclair/typebox';
import type { ApiDeps } from '../api-deps.js';
import { principalOf } from '../authenticate.js';
import { IdParams, errorResponses } from '../schemas.js';

export const ReleaseServicesResponse = Type.Array(
  Type.Object({
    name: Type.String(),
    web: Type.Boolean({ description: 'the service served at the subdomain' }),
    image: Type.String(),
    replicas: Type.Integer({ minimum: 1, description: 'containers it is released with (deploy.replicas)' }),
    running: Type.Integer({ minimum: 0, description: 'containers running now' }),
    state: Type.Union([Type.Literal('running'), Type.Literal('degraded'), Type.Literal('down'), Type.Literal('stopped')]),
    health: Type.Union([Type.Literal('healthy'), Type.Literal('unhealthy'), Type.Literal('starting'), Type.Null()], { description: "its health check's state (the worst over its containers); null without one" }),
  }),
  { description: 'in start order; empty for a deployment without a compose file or without a live build' },
);

/** GET /deployments/{id}/services, inside the authenticated /api/v1 scope. */
export const releaseServicesRoutes =
  (deps: ApiDeps): FastifyPluginAsync =>
  async (app) => {
    app.get<{ Params: { id: string } }>(
      '/deployments/:id/services',
      {
        schema: {
          tags: ['deployments'],
          summary: "The services of a compose deployment's live set: which is web, containers running, health",
          params: IdParams,
          response: { 200: ReleaseServicesResponse, ...errorResponses(401, 404) },
        },
      },
      async (request, reply) => {
        const services = (await deps.operations.services?.(principalOf(request), request.params.id)) ?? [];
        return reply.header('Cache-Control', 'no-store').send(services);
      },
    );
  };
