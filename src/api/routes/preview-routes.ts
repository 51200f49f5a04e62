// Routes: a deployment's previews (decisions §17) — list, one, delete, and each one's builds, build logs, build Dockerfiles and runtime logs.
import type { FastifyPluginAsync } from 'fastify';
import { Type } from '@sinclair/typebox';
import { appUrl } from '../../config.js';
import { DomainError } from '../../core/errors.js';
import { logReadEnd, presentBuild, type BuildPosition } from '../../domain/builds.js';
import { assertUuid } from '../../domain/deployments.js';
import { deletePreview, getPreview, listPreviews, presentPreview } from '../../domain/previews.js';
import { pageFromRows } from '../../core/page.js';
import { PageQuery, isSeqPosition, listResponse, pageRequest, sendPage, type ListRef } from '../list-pages.js';
import type { ApiDeps } from '../api-deps.js';
import { principalOf } from '../authenticate.js';
import {
  FollowQuery,
  IdParams,
  MAX_TAIL_LINES,
  PreviewBuildParams,
  PreviewParams,
  RuntimeLogsQuery,
  TextResponse,
  errorResponses,
  isFlagSet,
} from '../schemas.js';
import { clientGone, sendText } from './deployment-routes.js';
import { usedDockerfile } from '../../domain/build-dockerfiles.js';
import { dockerfileResponses, sendDockerfile } from './dockerfile-response.js';

type PreviewRequest = { Params: { id: string; number: string } };
type PreviewBuildRequest = { Params: { id: string; number: string; build_id: string } };

export const previewRoutes =
  (deps: ApiDeps): FastifyPluginAsync =>
  async (app) => {
    const urlFor = (subdomain: string): string => appUrl(deps.config, subdomain);
    const previewDeps = { deployments: deps.deployments, previews: deps.previews, operations: deps.operations };
    const tags = ['previews'];

    app.get<{ Params: { id: string } }>(
      '/deployments/:id/previews',
      {
        schema: {
          tags,
          summary: "A deployment's previews (one per open pull request against its tracked branch), newest first",
          params: IdParams,
          response: { 200: Type.Array(Type.Ref('Preview')), ...errorResponses(401, 404) },
        },
      },
      async (request) => (await listPreviews(previewDeps, principalOf(request), request.params.id)).map((row) => presentPreview(row, urlFor)),
    );

    app.get<PreviewRequest>(
      '/deployments/:id/previews/:number',
      { schema: { tags, summary: 'The preview of one pull request', params: PreviewParams, response: { 200: Type.Ref('Preview'), ...errorResponses(401, 404) } } },
      async (request) => presentPreview(await getPreview(previewDeps, principalOf(request), request.params.id, request.params.number), urlFor),
    );

    app.delete<PreviewRequest>(
      '/deployments/:id/previews/:number',
      {
        schema: {
          tags,
          summary: 'Remove a preview now (containers, image, route, certificate, builds and logs); the next event of its pull request builds it again',
          params: PreviewParams,
          response: { 204: { type: 'null' }, ...errorResponses(401, 403, 404) },
        },
      },
      async (request, reply) => {
        await deletePreview(previewDeps, principalOf(request), request.params.id, request.params.number);
        return reply.code(204).send();
      },
    );

    app.get<PreviewRequest & { Querystring: PageQuery }>(
      '/deployments/:id/previews/:number/builds',
      {
        schema: {
          tags,
          summary: "A preview's builds, newest first, a page at a time",
          params: PreviewParams,
          querystring: PageQuery,
          response: { 200: listResponse(Type.Array(Type.Ref('Build'))), ...errorResponses(400, 401, 404) },
        },
      },
      async (request, reply) => {
        const principal = principalOf(request);
        const { id, number } = request.params;
        const preview = await getPreview(previewDeps, principal, id, number);
        const ref: ListRef<BuildPosition> = {
          cursors: deps.cursors,
          path: `/api/v1/deployments/${encodeURIComponent(id)}/previews/${encodeURIComponent(number)}/builds`,
          list: 'builds',
          scope: `${principal.userId}:${preview.id}`,
          valid: isSeqPosition,
        };
        const page = pageRequest(ref, request.query);
        const rows = await deps.deployments.builds(preview.id, page.after?.[0], page.limit + 1);
        const builds = pageFromRows(rows, page.limit, (row) => [row.seq] as const);
        return sendPage(request, reply, ref, page, builds.items.map(presentBuild), builds.next);
      },
    );

    /** One build of a preview (404 for anything else). */
    const previewBuild = async (request: { params: PreviewBuildRequest['Params'] } & Parameters<typeof principalOf>[0]) => {
      const preview = await getPreview(previewDeps, principalOf(request), request.params.id, request.params.number);
      assertUuid(request.params.build_id, 'build');
      const build = await deps.deployments.build(preview.id, request.params.build_id);
      if (build === undefined) throw new DomainError('not_found', 'build not found');
      return { preview, build };
    };

    app.get<PreviewBuildRequest>(
      '/deployments/:id/previews/:number/builds/:build_id',
      { schema: { tags, summary: 'One build of a preview', params: PreviewBuildParams, response: { 200: Type.Ref('Build'), ...errorResponses(401, 404) } } },
      async (request) => presentBuild((await previewBuild(request)).build),
    );

    app.get<PreviewBuildRequest>(
      '/deployments/:id/previews/:number/builds/:build_id/dockerfile',
      {
        schema: {
          tags,
          summary: "The Dockerfile a preview build used: the source's own, or the one Slipway generated (text; JSON with the detection for Accept: application/json)",
          params: PreviewBuildParams,
          response: dockerfileResponses,
        },
      },
      async (request, reply) => sendDockerfile(reply, request.headers.accept, await usedDockerfile(deps.deployments, (await previewBuild(request)).build.id)),
    );

    app.get<PreviewBuildRequest & { Querystring: FollowQuery }>(
      '/deployments/:id/previews/:number/builds/:build_id/logs',
      {
        schema: {
          tags,
          summary: "A preview build's output (text); follow=true streams until the build ends",
          params: PreviewBuildParams,
          querystring: FollowQuery,
          response: { 200: TextResponse, ...errorResponses(401, 404) },
        },
      },
      async (request, reply) => {
        const { preview, build } = await previewBuild(request);
        const chunks = deps.buildLogs.read(preview.id, build.id, {
          ...logReadEnd(deps.deployments, build, isFlagSet(request.query.follow)),
          signal: clientGone(reply),
        });
        return sendText(reply, chunks);
      },
    );

    app.get<PreviewRequest & { Querystring: RuntimeLogsQuery }>(
      '/deployments/:id/previews/:number/logs',
      {
        schema: {
          tags,
          summary: "The preview's running container output (text); tail=N, follow=true streams",
          params: PreviewParams,
          querystring: RuntimeLogsQuery,
          response: { 200: TextResponse, ...errorResponses(400, 401, 404, 409) },
        },
      },
      async (request, reply) => {
        const principal = principalOf(request);
        const preview = await getPreview(previewDeps, principal, request.params.id, request.params.number);
        const chunks = await deps.operations.runtimeLogs(principal, preview.id, {
          tail: request.query.tail === undefined ? undefined : Math.min(Number(request.query.tail), MAX_TAIL_LINES),
          follow: isFlagSet(request.query.follow),
          signal: clientGone(reply),
          service: request.query.service,
        });
        return sendText(reply, chunks);
      },
    );
  };
