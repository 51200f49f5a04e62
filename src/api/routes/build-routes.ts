// Routes: a deployment's build records and their logs.
import type { FastifyPluginAsync } from 'fastify';
import { Type } from '@sinclair/typebox';
import { getBuildRow, listBuilds, logReadEnd, presentBuild, type BuildPosition } from '../../domain/builds.js';
import { PageQuery, isSeqPosition, listResponse, pageRequest, sendPage, type ListRef } from '../list-pages.js';
import type { ApiDeps } from '../api-deps.js';
import { principalOf } from '../authenticate.js';
import { BuildParams, FollowQuery, IdParams, TextResponse, errorResponses, isFlagSet } from '../schemas.js';
import { clientGone, sendText } from './deployment-routes.js';
import { getBuildDockerfile } from '../../domain/build-dockerfiles.js';
import { dockerfileResponses, sendDockerfile } from './dockerfile-response.js';

export const buildRoutes =
  (deps: ApiDeps): FastifyPluginAsync =>
  async (app) => {
    app.get<{ Params: { id: string }; Querystring: PageQuery }>(
      '/deployments/:id/builds',
      {
        schema: {
          tags: ['builds'],
          summary: "A deployment's builds, newest first, a page at a time",
          params: IdParams,
          querystring: PageQuery,
          response: { 200: listResponse(Type.Array(Type.Ref('Build'))), ...errorResponses(400, 401, 404) },
        },
      },
      async (request, reply) => {
        const principal = principalOf(request);
        const id = request.params.id;
        const ref: ListRef<BuildPosition> = {
          cursors: deps.cursors,
          path: `/api/v1/deployments/${encodeURIComponent(id)}/builds`,
          list: 'builds',
          scope: `${principal.userId}:${id}`,
          valid: isSeqPosition,
        };
        const page = pageRequest(ref, request.query);
        const builds = await listBuilds(deps.deployments, principal, id, page);
        return sendPage(request, reply, ref, page, builds.items.map(presentBuild), builds.next);
      },
    );

    app.get<{ Params: { id: string; build_id: string } }>(
      '/deployments/:id/builds/:build_id',
      { schema: { tags: ['builds'], summary: 'One build', params: BuildParams, response: { 200: Type.Ref('Build'), ...errorResponses(401, 404) } } },
      async (request) => presentBuild((await getBuildRow(deps.deployments, principalOf(request), request.params.id, request.params.build_id)).build),
    );

    app.get<{ Params: { id: string; build_id: string } }>(
      '/deployments/:id/builds/:build_id/dockerfile',
      {
        schema: {
          tags: ['builds'],
          summary: "The Dockerfile a build used: the source's own, or the one Slipway generated (text; JSON with the detection for Accept: application/json)",
          params: BuildParams,
          response: dockerfileResponses,
        },
      },
      async (request, reply) => {
        const used = await getBuildDockerfile(deps.deployments, principalOf(request), request.params.id, request.params.build_id);
        return sendDockerfile(reply, request.headers.accept, used);
      },
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
        const { deployment, build } = await getBuildRow(deps.deployments, principalOf(request), request.params.id, request.params.build_id);
        const follow = isFlagSet(request.query.follow);
        const chunks = deps.buildLogs.read(deployment.id, build.id, {
          ...logReadEnd(deps.deployments, build, follow),
          signal: clientGone(reply),
        });
        return sendText(reply, chunks);
      },
    );
  };

