// Routes: a deployment's build records and their logs.
import type { FastifyPluginAsync } from 'fastify';
import { Type } from '@sinclair/typebox';
import { getBuildRow, isBuildFinished, listBuilds, presentBuild } from '../../domain/builds.js';
import type { ApiDeps } from '../app.js';
import { principalOf } from '../authenticate.js';
import { BuildParams, FollowQuery, IdParams, TextResponse, errorResponses, isFlagSet } from '../schemas.js';
import { clientGone, sendText } from './deployment-routes.js';

export const buildRoutes =
  (deps: ApiDeps): FastifyPluginAsync =>
  async (app) => {
    app.get<{ Params: { id: string } }>(
      '/deployments/:id/builds',
      {
        schema: {
          tags: ['builds'],
          summary: "A deployment's builds, newest first",
          params: IdParams,
          response: { 200: Type.Array(Type.Ref('Build')), ...errorResponses(401, 404) },
        },
      },
      async (request) => (await listBuilds(deps.db, principalOf(request), request.params.id)).map(presentBuild),
    );

    app.get<{ Params: { id: string; build_id: string } }>(
      '/deployments/:id/builds/:build_id',
      { schema: { tags: ['builds'], summary: 'One build', params: BuildParams, response: { 200: Type.Ref('Build'), ...errorResponses(401, 404) } } },
      async (request) => presentBuild((await getBuildRow(deps.db, principalOf(request), request.params.id, request.params.build_id)).build),
    );

    app.get<{ Params: { id: string; build_id: string }; Querystring: FollowQuery }>(
      '/deployments/:id/builds/:build_id/logs',
      {
        schema: {
          tags: ['builds'],
          summary: "A build's output (text); follow=true streams until the build ends",
          params: BuildParams,
          querystring: FollowQuery,
          response: { 200: TextResponse, ...errorResponses(401, 404) },
        },
      },
      async (request, reply) => {
        const { deployment, build } = await getBuildRow(deps.db, principalOf(request), request.params.id, request.params.build_id);
        const follow = isFlagSet(request.query.follow);
        const chunks = deps.buildLogs.read(deployment.id, build.id, {
          ...(follow ? { isFinished: () => isBuildFinished(deps.db, build.id) } : {}),
          signal: clientGone(reply),
        });
        return sendText(reply, chunks);
      },
    );
  };
