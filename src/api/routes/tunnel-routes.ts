// Routes: the caller's live tunnels, and everyone's for an administrator (`?all=true`).
import type { FastifyPluginAsync } from 'fastify';
import { Type } from '@sinclair/typebox';
import type { ApiDeps } from '../api-deps.js';
import { principalOf } from '../authenticate.js';
import { errorResponses } from '../schemas.js';
import { authorizeAdmin } from '../../domain/policy.js';

export const tunnelRoutes =
  (deps: ApiDeps): FastifyPluginAsync =>
  async (app) => {
    app.get<{ Querystring: { all?: 'true' | 'false' } }>(
      '/tunnels',
      {
        schema: {
          tags: ['tunnels'],
          summary: "The caller's live tunnels; with all=true every user's, with the owner's e-mail (administrators only)",
          querystring: Type.Object({ all: Type.Optional(Type.Union([Type.Literal('true'), Type.Literal('false')])) }),
          response: { 200: Type.Array(Type.Ref('Tunnel')), ...errorResponses(400, 401, 403) },
        },
      },
      async (request) => {
        const principal = principalOf(request);
        if (request.query.all !== 'true') return deps.tunnels.list(principal.userId);
        authorizeAdmin(principal);
        const tunnels = await deps.tunnels.list(undefined);
        const emails = new Map<string, string>();
        for (const t of tunnels) {
          const owner = t.user_id;
          if (owner === undefined || emails.has(owner)) continue;
          emails.set(owner, (await deps.accounts.userById(owner))?.email ?? '');
        }
        return tunnels.map((t) => ({ ...t, owner_email: emails.get(t.user_id ?? '') ?? '' }));
      },
    );
  };
