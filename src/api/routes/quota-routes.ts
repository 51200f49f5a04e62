// Routes: a user's quotas — their own (GET /users/me/quotas), and any user's, read and set by administrators.
import type { FastifyPluginAsync } from 'fastify';
import { Type } from '@sinclair/typebox';
import { QUOTA_NAMES } from '../../domain/quotas.js';
import type { ApiDeps } from '../api-deps.js';
import { principalOf } from '../authenticate.js';
import { IdParams, errorResponses } from '../schemas.js';

const QuotaView = Type.Object({
  limit: Type.Integer({ description: 'the most the user may have' }),
  used: Type.Integer({ description: 'what the user has now' }),
  overridden: Type.Boolean({ description: "true: the user's own limit, set by an administrator; false: the installation's default" }),
});
const QuotasResponse = Type.Object({
  quotas: Type.Object(Object.fromEntries(QUOTA_NAMES.map((name) => [name, QuotaView]))),
});
/** Each named quota: a whole number, or null for the installation's default; unknown names are a 400. */
const SetQuotasBody = Type.Record(Type.String(), Type.Union([Type.Integer({ minimum: 0 }), Type.Null()]), {
  description: `any of ${QUOTA_NAMES.join(', ')}`,
});

export const quotaRoutes =
  (deps: ApiDeps): FastifyPluginAsync =>
  async (app) => {
    app.get(
      '/users/me/quotas',
      { schema: { tags: ['users'], summary: 'Your quotas: limit and use of each', response: { 200: QuotasResponse, ...errorResponses(401) } } },
      async (request) => ({ quotas: await deps.quotas.mine(principalOf(request)) }),
    );

    app.get<{ Params: { id: string } }>(
      '/users/:id/quotas',
      {
        schema: {
          tags: ['users'],
          summary: "A user's quotas (administrators only)",
          params: IdParams,
          response: { 200: QuotasResponse, ...errorResponses(401, 403, 404) },
        },
      },
      async (request) => ({ quotas: await deps.quotas.ofUser(principalOf(request), request.params.id) }),
    );

    app.patch<{ Params: { id: string }; Body: Record<string, number | null> }>(
      '/users/:id/quotas',
      {
        schema: {
          tags: ['users'],
          summary: "Set a user's own quotas, or null to return to the default (administrators only)",
          params: IdParams,
          body: SetQuotasBody,
          response: { 200: QuotasResponse, ...errorResponses(400, 401, 403, 404) },
        },
      },
      async (request) => ({ quotas: await deps.quotas.setForUser(principalOf(request), request.params.id, request.body) }),
    );
  };
