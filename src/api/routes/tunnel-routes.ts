// Routes: the caller's live tunnels.
import type { FastifyPluginAsync } from 'fastify';
import { Type } from '@sinclair/typebox';
import type { ApiDeps } from '../app.js';
import { principalOf } from '../authenticate.js';
import { errorResponses } from '../schemas.js';

export interface TunnelListing {
  id: string;
  subdomain: string;
  url: string;
  api_key_id: string;
  connected_at: string;
  state: string;
  streams: number;
}

/** What the API needs of the tunnel server. */
export interface TunnelDirectory {
  list(userId: string): TunnelListing[];
  closeForKey(apiKeyId: string): void;
}

export const tunnelRoutes =
  (deps: ApiDeps): FastifyPluginAsync =>
  async (app) => {
    app.get(
      '/tunnels',
      { schema: { tags: ['tunnels'], summary: "The caller's live tunnels", response: { 200: Type.Array(Type.Ref('Tunnel')), ...errorResponses(401) } } },
      async (request) => deps.tunnels.list(principalOf(request).userId),
    );
  };
