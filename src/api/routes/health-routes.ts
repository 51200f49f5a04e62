// Route: GET /healthz, public: 200 when the database and the Docker engine answer, else 503 with the reason.
import type { FastifyPluginAsync } from 'fastify';
import { HealthResponse } from '../schemas.js';

export type HealthCheck = () => Promise<{ ok: boolean; checks: Record<string, { ok: boolean; detail?: string }> }>;

export const healthRoutes: FastifyPluginAsync<{ health: HealthCheck }> = async (app, options) => {
  app.get(
    '/healthz',
    {
      schema: {
        tags: ['health'],
        summary: 'Whether the database and the Docker engine answer (no authentication)',
        security: [],
        response: { 200: HealthResponse, 503: HealthResponse },
      },
    },
    async (_request, reply) => {
      const result = await options.health();
      return reply.code(result.ok ? 200 : 503).send({ status: result.ok ? 'ok' : 'unavailable', checks: result.checks });
    },
  );
};
