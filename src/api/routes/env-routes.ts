// Routes: a deployment's environment variables (GET lists them, PATCH sets and removes them at once).
import type { FastifyPluginAsync } from 'fastify';
import { getEnv, patchEnv } from '../../domain/app-config.js';
import type { ApiDeps } from '../api-deps.js';
import { principalOf } from '../authenticate.js';
import { EnvResponse, IdParams, PatchEnvBody, errorResponses } from '../schemas.js';

type IdRequest = { Params: { id: string } };

export const envRoutes =
  (deps: ApiDeps): FastifyPluginAsync =>
  async (app) => {
    const configDeps = { deployments: deps.deployments, configs: deps.configs };

    app.get<IdRequest>(
      '/deployments/:id/env',
      {
        schema: {
          tags: ['deployments'],
          summary: "The deployment's environment variables, sorted by key (a secret's value is null)",
          params: IdParams,
          response: { 200: EnvResponse, ...errorResponses(401, 404) },
        },
      },
      async (request) => getEnv(configDeps, principalOf(request), request.params.id),
    );

    app.patch<IdRequest & { Body: PatchEnvBody }>(
      '/deployments/:id/env',
      {
        schema: {
          tags: ['deployments'],
          summary: 'Set (string) and remove (null) variables at once; they apply at the next deploy, restart or rollback',
          params: IdParams,
          body: PatchEnvBody,
          response: { 200: EnvResponse, ...errorResponses(400, 401, 403, 404, 413, 415) },
        },
      },
      async (request) => patchEnv(configDeps, principalOf(request), request.params.id, request.body),
    );
  };
