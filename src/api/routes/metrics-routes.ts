// Routes: a deployment's live resource use (owner) and the server's Prometheus metrics (administrators).
import type { FastifyPluginAsync } from 'fastify';
import { Type } from '@sinclair/typebox';
import type { ApiDeps } from '../api-deps.js';
import { principalOf } from '../authenticate.js';
import { authorizeAdmin } from '../../domain/policy.js';
import { IdParams, errorResponses } from '../schemas.js';
import { clientGone } from './deployment-routes.js';

const ReplicaFigures = {
  cpu_percent: Type.Number({ description: 'CPU use over the last second, in percent of one CPU' }),
  memory_bytes: Type.Integer({ description: 'memory in use, page cache excluded' }),
  memory_limit_bytes: Type.Integer(),
  network_rx_bytes: Type.Integer(),
  network_tx_bytes: Type.Integer(),
  restarts: Type.Integer({ description: 'restarts by the engine (the app crashed)' }),
  started_at: Type.String({ format: 'date-time' }),
};

export const DeploymentMetricsResponse = Type.Object({
  ...ReplicaFigures,
  replicas: Type.Array(Type.Object({ replica: Type.Integer({ minimum: 1 }), ...ReplicaFigures }), {
    description: "each running replica's own figures; the fields above are their sums (started_at: the earliest)",
  }),
  services: Type.Optional(
    Type.Array(Type.Object({ service: Type.String(), replicas: Type.Integer({ minimum: 1 }), ...ReplicaFigures }), {
      description: 'a compose deployment (contract §21): each service\'s figures summed over its running containers',
    }),
  ),
});

const Rate = Type.Union([Type.Integer(), Type.Null()], { description: 'bytes per second since the previous sample; null for a container\'s first sample' });

export const MetricsHistoryResponse = Type.Object({
  interval_seconds: Type.Integer({ description: 'time between samples' }),
  points: Type.Array(
    Type.Object({
      at: Type.String({ format: 'date-time' }),
      cpu_percent: Type.Number(),
      memory_bytes: Type.Integer(),
      memory_limit_bytes: Type.Integer(),
      network_rx_bytes_per_second: Rate,
      network_tx_bytes_per_second: Rate,
    }),
    { description: 'oldest first; at most the last hour, kept in memory by the server that answers' },
  ),
});

/** GET /deployments/{id}/metrics and …/metrics/history, inside the authenticated /api/v1 scope. */
export const deploymentMetricsRoutes =
  (deps: ApiDeps): FastifyPluginAsync =>
  async (app) => {
    app.get<{ Params: { id: string } }>(
      '/deployments/:id/metrics',
      {
        schema: {
          tags: ['deployments'],
          summary: "The live release's CPU, memory, network and restarts, summed over its replicas (409 when nothing runs)",
          params: IdParams,
          response: { 200: DeploymentMetricsResponse, ...errorResponses(401, 404, 409) },
        },
      },
      async (request, reply) => {
        const metrics = await deps.operations.metrics(principalOf(request), request.params.id, clientGone(reply));
        return reply.header('Cache-Control', 'no-store').send(metrics);
      },
    );

    app.get<{ Params: { id: string } }>(
      '/deployments/:id/metrics/history',
      {
        schema: {
          tags: ['deployments'],
          summary: "The app's CPU, memory and network over the last hour, sampled every 10 s while it runs",
          params: IdParams,
          response: { 200: MetricsHistoryResponse, ...errorResponses(401, 404) },
        },
      },
      async (request, reply) => {
        const points = await deps.operations.metricsHistory(principalOf(request), request.params.id);
        return reply.header('Cache-Control', 'no-store').send({ interval_seconds: deps.metricsIntervalSeconds ?? 10, points });
      },
    );
  };

/** GET /metrics, in a scope of its own that authenticates: administrators only. */
export const serverMetricsRoutes =
  (deps: ApiDeps): FastifyPluginAsync =>
  async (app) => {
    app.get(
      '/metrics',
      {
        schema: {
          tags: ['health'],
          summary: 'Prometheus metrics of the server (administrators only)',
          response: { 200: { description: 'Prometheus text format 0.0.4', content: { 'text/plain': { schema: Type.String() } } }, ...errorResponses(401, 403) },
        },
      },
      async (request, reply) => {
        authorizeAdmin(principalOf(request));
        return reply.type('text/plain; version=0.0.4; charset=utf-8').header('Cache-Control', 'no-store').send(await deps.metrics.render());
      },
    );
  };
