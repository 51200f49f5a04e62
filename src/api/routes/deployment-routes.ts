// Routes: deployments (create, list, get, delete), upload, and the lifecycle (deploy, stop, restart, rollback, logs).
import { Readable } from 'node:stream';
import type { FastifyPluginAsync, FastifyReply } from 'fastify';
import { Type } from '@sinclair/typebox';
import { appUrl, appUrls } from '../../config.js';
import { CACHED_PAGE_HEADERS, NOT_MODIFIED, PageQuery, isSeqPosition, listResponse, nextLink, pageRequest, sendSerializedPage, serializedPage, type ListRef } from '../list-pages.js';
import { PageCache } from '../page-cache.js';
import { presentBuild } from '../../domain/builds.js';
import {
  createDeployment,
  getDeploymentRow,
  listDeployments,
  type DeploymentPosition,
  presentCreatedArchive,
  presentDeployment,
  updateDeployment,
} from '../../domain/deployments.js';
import { DomainError } from '../../core/errors.js';
import type { AppHealth } from '../../domain/app-health.js';
import { uploadTooLargeMessage } from '../../core/upload-limit.js';
import { authorizeUpload, uploadSource } from '../../domain/uploads.js';
import { quotaExceeded } from '../../domain/quotas.js';
import { assertRepoHostAllowed } from '../../source/git.js';
import type { ApiDeps } from '../api-deps.js';
import { principalOf } from '../authenticate.js';
import { hasMultipartBoundary, multipartParts } from '../upload-parts.js';
import {
  CreateDeploymentBody,
  DeployQuery,
  IdParams,
  MessageSchema,
  RollbackBody,
  RuntimeLogsQuery,
  UpdateDeploymentBody,
  TextResponse,
  UploadBody,
  UploadResponse,
  errorResponses,
  isFlagSet,
  MAX_TAIL_LINES,
} from '../schemas.js';

type IdRequest = { Params: { id: string } };

/** An AbortSignal that fires when the client goes away, for streamed and long-held responses. */
export function clientGone(reply: FastifyReply): AbortSignal {
  const controller = new AbortController();
  reply.raw.on('close', () => controller.abort());
  return controller.signal;
}

/** Sends an async iterable of text as a streamed `text/plain` response. */
export function sendText(reply: FastifyReply, chunks: AsyncIterable<string | Buffer>): FastifyReply {
  return reply
    .type('text/plain; charset=utf-8')
    .header('Cache-Control', 'no-store')
    .header('X-Content-Type-Options', 'nosniff')
    .send(Readable.from(chunks));
}

/** Bytes of deployment list pages kept (every user's together; a page of 100 is about 40 KB). */
const LIST_CACHE_BYTES = 16 * 1024 * 1024;

export const deploymentRoutes =
  (deps: ApiDeps): FastifyPluginAsync =>
  async (app) => {
    const urlFor = (subdomain: string): string => appUrl(deps.config, subdomain);
    const healthOf = (id: string): AppHealth | undefined => deps.appHealth?.of(id);
    /** Each upload's room under its user's upload quota, found before the body is read. */
    const uploadQuota = new WeakMap<object, { room: number; used: number; limit: number }>();
    const deploymentDeps = {
      deployments: deps.deployments,
      allowPrivateGit: deps.config.allowPrivateGit,
      checkRepoHost: (url: string) => assertRepoHostAllowed(url, deps.config.allowPrivateGit, { allowUnresolvable: true }),
      limits: { maxMemoryMb: deps.config.maxMemoryMb, maxCpus: deps.config.maxCpus },
    };
    // Pages as they were sent, by list version: a repeated call reads the version, not the rows.
    const pages = new PageCache(LIST_CACHE_BYTES);

    app.get<{ Querystring: PageQuery }>(
      '/deployments',
      {
        schema: {
          tags: ['deployments'],
          summary: "The caller's deployments, newest first, a page at a time",
          querystring: PageQuery,
          response: { 200: listResponse(Type.Array(Type.Ref('Deployment')), CACHED_PAGE_HEADERS), 304: NOT_MODIFIED, ...errorResponses(400, 401) },
        },
      },
      async (request, reply) => {
        const principal = principalOf(request);
        // Health is the watcher's, not the database's: its version is part of the list's name.
        const list = `deployments:${principal.userId}:${deps.appHealth?.version ?? 0}`;
        // The version is read before the rows, so a page is never older than the version it is kept under.
        const version = await deps.deployments.listVersion(principal.userId);
        const cached = pages.get(list, version, request.url);
        if (cached !== undefined) return sendSerializedPage(request, reply, cached);
        const ref: ListRef<DeploymentPosition> = { cursors: deps.cursors, path: '/api/v1/deployments', list: 'deployments', scope: principal.userId, valid: isSeqPosition };
        const page = pageRequest(ref, request.query);
        const deployments = await listDeployments(deps.deployments, principal, page);
        // Read the public URL once per answer: the port is only known once the server listens.
        const urlOf = appUrls(deps.config);
        const items = deployments.items.map((row) => presentDeployment(row, urlOf, healthOf(row.id)));
        const answer = serializedPage(reply, list, items, nextLink(request, ref, page, deployments.next));
        pages.set(list, version, request.url, answer);
        return sendSerializedPage(request, reply, answer);
      },
    );

    app.post<{ Body: CreateDeploymentBody }>(
      '/deployments',
      {
        schema: {
          tags: ['deployments'],
          summary: 'Create a deployment from a git repository or (source_type archive) an upload',
          body: CreateDeploymentBody,
          response: { 201: Type.Ref('Deployment'), ...errorResponses(400, 401, 403, 404, 429) },
        },
      },
      async (request, reply) => {
        await deps.quotas.assertRoom(principalOf(request), 'deployments');
        const row = await createDeployment(deploymentDeps, principalOf(request), request.body);
        deps.operations.registered(row);
        const view = row.source_type === 'archive' ? presentCreatedArchive(row) : presentDeployment(row, urlFor);
        return reply.code(201).send(view);
      },
    );

    app.get<IdRequest>(
      '/deployments/:id',
      { schema: { tags: ['deployments'], summary: 'One deployment', params: IdParams, response: { 200: Type.Ref('Deployment'), ...errorResponses(401, 404) } } },
      async (request) => {
        const row = await getDeploymentRow(deps.deployments, principalOf(request), request.params.id, 'read');
        return presentDeployment(row, urlFor, healthOf(row.id));
      },
    );

    app.patch<IdRequest & { Body: UpdateDeploymentBody }>(
      '/deployments/:id',
      {
        schema: {
          tags: ['deployments'],
          summary: 'Change settings (name, repo_url, branch, dockerfile_path, compose_path, health_check_path, memory_mb, cpus, volumes, replicas, auto_deploy); they apply at the next deploy, restart or rollback',
          params: IdParams,
          body: UpdateDeploymentBody,
          response: { 200: Type.Ref('Deployment'), ...errorResponses(400, 401, 403, 404) },
        },
      },
      async (request) => {
        const row = await updateDeployment(deploymentDeps, principalOf(request), request.params.id, request.body);
        return presentDeployment(row, urlFor, healthOf(row.id));
      },
    );

    app.delete<IdRequest>(
      '/deployments/:id',
      {
        schema: {
          tags: ['deployments'],
          summary: 'Delete a deployment with its containers, images, sources and logs',
          params: IdParams,
          response: { 204: { type: 'null' }, ...errorResponses(401, 403, 404) },
        },
      },
      async (request, reply) => {
        await deps.operations.remove(principalOf(request), request.params.id);
        return reply.code(204).send();
      },
    );

    app.post<IdRequest>(
      '/deployments/:id/upload',
      {
        schema: {
          tags: ['deployments'],
          summary: 'Upload the source of an archive deployment (multipart: archive = tar.gz, dockerfile = optional text)',
          consumes: ['multipart/form-data'],
          params: IdParams,
          body: UploadBody,
          response: { 200: UploadResponse, ...errorResponses(400, 401, 403, 404, 413, 415, 429) },
        },
        // The body is a stream of parts that the handler checks one by one (it is never buffered into
        // request.body), so the body schema documents it and is not run; the id is checked by the use-case.
        validatorCompiler: () => () => true,
        // Authorize before a single byte of the body is read.
        preValidation: async (request) => {
          await authorizeUpload(deps.deployments, principalOf(request), request.params.id);
          const quota = await deps.quotas.uploadRoom(principalOf(request), request.params.id);
          uploadQuota.set(request, quota);
          const length = Number(request.headers['content-length'] ?? 0);
          if (length > quota.room + 1024 * 1024) throw quotaExceeded('upload_bytes', quota.used, quota.limit);
          if (length > deps.config.maxUploadBytes + 1024 * 1024) {
            throw new DomainError('payload_too_large', uploadTooLargeMessage(deps.config.maxUploadBytes));
          }
          if (!request.isMultipart()) {
            throw new DomainError('unsupported_media_type', 'upload with Content-Type multipart/form-data');
          }
          if (!hasMultipartBoundary(request.headers['content-type'])) {
            throw new DomainError('validation_error', 'malformed multipart body: the Content-Type has no boundary');
          }
        },
      },
      async (request, reply) => {
        const quota = uploadQuota.get(request) ?? { room: Infinity, used: 0, limit: Infinity };
        // The archive may be as large as the limit, or as the user's room under the upload quota.
        const maxBytes = Math.min(deps.config.maxUploadBytes, quota.room);
        return uploadSource(
          {
            deployments: deps.deployments,
            store: deps.store,
            shared: deps.sharedUploads,
            maxUploadBytes: maxBytes,
            archiveLimits: { maxExpandedBytes: deps.config.maxExpandedBytes, maxEntries: deps.config.maxArchiveEntries },
          },
          principalOf(request),
          request.params.id,
          // The body is read here, not by @fastify/multipart's parts(): that iterator reports a body cut
          // before its closing boundary as a normal end, and can leave a part's reader waiting forever.
          multipartParts(request.raw, { maxFileBytes: maxBytes }),
          // The client gone (or its socket destroyed by a server timeout): stop extracting too.
          clientGone(reply),
        ).catch((err: unknown) => {
          if (err instanceof DomainError && err.code === 'payload_too_large' && quota.room < deps.config.maxUploadBytes) {
            throw quotaExceeded('upload_bytes', quota.used, quota.limit);
          }
          throw err;
        });
      },
    );

    app.post<IdRequest & { Querystring: DeployQuery }>(
      '/deployments/:id/deploy',
      {
        schema: {
          tags: ['deployments'],
          summary: 'Build and release; 202 with the build record (200 with the finished one when wait=true)',
          params: IdParams,
          querystring: DeployQuery,
          response: { 200: Type.Ref('Build'), 202: Type.Ref('Build'), ...errorResponses(401, 403, 404, 409, 429, 500) },
        },
      },
      async (request, reply) => {
        const wait = isFlagSet(request.query.wait);
        const build = await deps.operations.deploy(principalOf(request), request.params.id, {
          wait,
          signal: clientGone(reply),
        });
        return reply.code(wait ? 200 : 202).send(presentBuild(build));
      },
    );

    const SUMMARIES = {
      stop: 'Stop the app (cancels a build in flight)',
      restart: 'Restart the live release',
      cancel: 'Cancel the build in flight; the live release keeps serving (409 when no build runs)',
    } as const;
    for (const action of ['stop', 'restart', 'cancel'] as const) {
      app.post<IdRequest>(
        `/deployments/:id/${action}`,
        {
          schema: {
            tags: ['deployments'],
            summary: SUMMARIES[action],
            params: IdParams,
            response: { 200: MessageSchema, ...errorResponses(401, 403, 404, 409) },
          },
        },
        async (request) => deps.operations[action](principalOf(request), request.params.id),
      );
    }

    app.post<IdRequest & { Body: RollbackBody }>(
      '/deployments/:id/rollback',
      {
        schema: {
          tags: ['deployments'],
          summary: 'Serve an earlier succeeded build again',
          params: IdParams,
          body: RollbackBody,
          response: { 200: MessageSchema, ...errorResponses(400, 401, 403, 404, 409) },
        },
      },
      async (request) => deps.operations.rollback(principalOf(request), request.params.id, request.body.build_id),
    );

    app.get<IdRequest & { Querystring: RuntimeLogsQuery }>(
      '/deployments/:id/logs',
      {
        schema: {
          tags: ['deployments'],
          summary: "The running container's output (text); tail=N, follow=true streams",
          params: IdParams,
          querystring: RuntimeLogsQuery,
          response: { 200: TextResponse, ...errorResponses(400, 401, 404, 409) },
        },
      },
      async (request, reply) => {
        const chunks = await deps.operations.runtimeLogs(principalOf(request), request.params.id, {
          tail: request.query.tail === undefined ? undefined : Math.min(Number(request.query.tail), MAX_TAIL_LINES),
          follow: isFlagSet(request.query.follow),
          signal: clientGone(reply),
          service: request.query.service,
        });
        return sendText(reply, chunks);
      },
    );
  };
