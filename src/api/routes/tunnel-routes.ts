// Routes: the caller's live tunnels, and everyone's for an administrator (`?all=true`).
import type { FastifyPluginAsync } from 'fastify';
import { Type } from '@sinclair/typebox';
import type { ApiDeps } from '../app.js';
import { principalOf } from '../authenticate.js';
import { errorResponses } from '../schemas.js';
import { authorizeAdmin } from '../../domain/policy.js';

export interface TunnelListing {
  id: string;
  subdomain: string;
  url: string;
  api_key_id: string;
  connected_at: string;
  state: string;
  streams: number;
  user_id?: string;
  owner_email?: string;
}

/** What the API needs of the tunnel server. */
export interface TunnelDirectory {
  /** The user's tunnels; every user's (with `user_id`) when `userId` is undefined (held by any instance). */
  list(userId: string | undefined): TunnelListing[] | Promise<TunnelListing[]>;
  closeForKey(apiKeyId: string): void;
  /** Closes every tunnel of the user on every instance (the account was disabled). */
  closeForUser(userId: string): void;
}

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
