// Routes: the nodes apps run on, and draining or activating one (administrators only).
import type { FastifyPluginAsync } from 'fastify';
import { Type } from '@sinclair/typebox';
import type { ApiDeps } from '../api-deps.js';
import { principalOf } from '../authenticate.js';
import { errorResponses } from '../schemas.js';
import { listNodes, setNodeAvailability } from '../../domain/nodes.js';

export const NodeSchema = Type.Object({
  id: Type.String(),
  hostname: Type.String(),
  address: Type.String({ description: 'where the edge reaches the replicas on this node' }),
  role: Type.Union([Type.Literal('manager'), Type.Literal('worker')]),
  availability: Type.Union([Type.Literal('active'), Type.Literal('pause'), Type.Literal('drain')]),
  state: Type.String({ description: 'ready, down, unknown or disconnected' }),
  replicas: Type.Integer({ description: 'app replicas running on the node now' }),
});

const NodeParams = Type.Object({ id: Type.String({ maxLength: 200 }) });

export const nodeRoutes =
  (deps: ApiDeps): FastifyPluginAsync =>
  async (app) => {
    app.get(
      '/nodes',
      {
        schema: {
          tags: ['health'],
          summary: 'The nodes apps run on (administrators only)',
          response: { 200: Type.Array(NodeSchema), ...errorResponses(401, 403) },
        },
      },
      async (request) => listNodes(deps.nodes, principalOf(request)),
    );
    for (const [action, availability] of [['drain', 'drain'], ['activate', 'active']] as const) {
      app.post<{ Params: { id: string } }>(
        `/nodes/:id/${action}`,
        {
          schema: {
            tags: ['health'],
            summary:
              action === 'drain'
                ? "Drain a node: its replicas are started elsewhere and leave the edge; it takes no new ones (administrators only)"
                : 'Make a drained node take replicas again (administrators only)',
            params: NodeParams,
            response: { 200: NodeSchema, ...errorResponses(401, 403, 404, 409) },
          },
        },
        async (request) => setNodeAvailability(deps.nodes, principalOf(request), request.params.id, availability),
      );
    }
  };
