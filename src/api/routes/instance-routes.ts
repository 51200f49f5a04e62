// Route: GET /api/v1/instances, the control-plane instances sharing the database (administrators only).
import type { FastifyPluginAsync } from 'fastify';
import { Type } from '@sinclair/typebox';
import type { ApiDeps } from '../api-deps.js';
import { principalOf } from '../authenticate.js';
import { errorResponses } from '../schemas.js';
import { listInstances } from '../../domain/instances.js';

const InstanceSchema = Type.Object({
  id: Type.String(),
  url: Type.Union([Type.String(), Type.Null()]),
  version: Type.String(),
  state: Type.Union([Type.Literal('live'), Type.Literal('lost')]),
  started_at: Type.String(),
  last_seen_at: Type.String(),
  leader: Type.Boolean(),
  builds_running: Type.Integer(),
});

export const instanceRoutes =
  (deps: ApiDeps): FastifyPluginAsync =>
  async (app) => {
    app.get(
      '/instances',
      {
        schema: {
          tags: ['health'],
          summary: 'The control-plane instances sharing the database (administrators only)',
          response: { 200: Type.Array(InstanceSchema), ...errorResponses(401, 403) },
        },
      },
      async (request) => listInstances(deps.instances, principalOf(request)),
    );
  };
