// Routes: a deployment's scheduled jobs (decisions §22) — create, list, one, change, delete — their runs (now, history) and the runs' logs.
import type { FastifyPluginAsync } from 'fastify';
import { Type } from '@sinclair/typebox';
import { createJob, deleteJob, getJob, listJobs, listRuns, presentJob, presentRun, runJobNow, runLogs, updateJob, type JobPosition, type JobsContext } from '../../jobs/jobs.js';
import { PageQuery, isTimeIdPosition, listResponse, pageRequest, sendPage, type ListCursors, type ListRef } from '../list-pages.js';
import { principalOf } from '../authenticate.js';
import { FollowQuery, IdParams, TextResponse, errorResponses, isFlagSet } from '../schemas.js';
import { CreateJobBody, JobParams, JobResponse, RunParams, RunResponse, UpdateJobBody } from '../job-schemas.js';
import { clientGone, sendText } from './deployment-routes.js';

type JobRequest = { Params: { id: string; job_id: string } };

export const jobRoutes =
  (ctx: JobsContext, cursors: ListCursors): FastifyPluginAsync =>
  async (app) => {
    const tags = ['jobs'];
    const one = { 200: JobResponse, ...errorResponses(401, 403, 404) };

    app.post<{ Params: { id: string }; Body: CreateJobBody }>(
      '/deployments/:id/jobs',
      {
        schema: {
          tags,
          summary: "Schedule a job: a command run in a container of the live release's image",
          params: IdParams,
          body: CreateJobBody,
          response: { 201: JobResponse, ...errorResponses(400, 401, 403, 404, 409) },
        },
      },
      async (request, reply) => reply.code(201).send(presentJob(await createJob(ctx, principalOf(request), request.params.id, request.body))),
    );

    app.get<{ Params: { id: string }; Querystring: PageQuery }>(
      '/deployments/:id/jobs',
      { schema: { tags, summary: "A deployment's jobs, oldest first, a page at a time", params: IdParams, querystring: PageQuery, response: { 200: listResponse(Type.Array(JobResponse)), ...errorResponses(400, 401, 404) } } },
      async (request, reply) => {
        const principal = principalOf(request);
        const ref: ListRef<JobPosition> = { cursors, path: `/api/v1/deployments/${request.params.id}/jobs`, list: 'jobs', scope: `${principal.userId}:${request.params.id}`, valid: isTimeIdPosition };
        const page = pageRequest(ref, request.query);
        const result = await listJobs(ctx, principal, request.params.id, page);
        return sendPage(request, reply, ref, page, result.items.map(presentJob), result.next);
      },
    );

    app.get<JobRequest>(
      '/deployments/:id/jobs/:job_id',
      { schema: { tags, summary: 'One job', params: JobParams, response: one } },
      async (request) => presentJob(await getJob(ctx, principalOf(request), request.params.id, request.params.job_id)),
    );

    app.patch<JobRequest & { Body: UpdateJobBody }>(
      '/deployments/:id/jobs/:job_id',
      { schema: { tags, summary: 'Change a job (its next due time follows the new schedule)', params: JobParams, body: UpdateJobBody, response: { ...one, ...errorResponses(400, 409) } } },
      async (request) => presentJob(await updateJob(ctx, principalOf(request), request.params.id, request.params.job_id, request.body)),
    );

    app.delete<JobRequest>(
      '/deployments/:id/jobs/:job_id',
      { schema: { tags, summary: 'Delete a job with its runs (a run going ends on its own)', params: JobParams, response: { 204: { type: 'null' }, ...errorResponses(401, 403, 404) } } },
      async (request, reply) => {
        await deleteJob(ctx, principalOf(request), request.params.id, request.params.job_id);
        return reply.code(204).send();
      },
    );

    app.post<JobRequest>(
      '/deployments/:id/jobs/:job_id/runs',
      { schema: { tags, summary: 'Run it now (202: the run as recorded, running or skipped)', params: JobParams, response: { 202: RunResponse, ...errorResponses(401, 403, 404, 409) } } },
      async (request, reply) => reply.code(202).send(presentRun(await runJobNow(ctx, principalOf(request), request.params.id, request.params.job_id))),
    );

    app.get<JobRequest>(
      '/deployments/:id/jobs/:job_id/runs',
      { schema: { tags, summary: 'Its last 100 runs, newest first', params: JobParams, response: { 200: Type.Array(RunResponse), ...errorResponses(401, 404) } } },
      async (request) => (await listRuns(ctx, principalOf(request), request.params.id, request.params.job_id)).map(presentRun),
    );

    app.get<{ Params: { id: string; job_id: string; run_id: string }; Querystring: FollowQuery }>(
      '/deployments/:id/jobs/:job_id/runs/:run_id/logs',
      { schema: { tags, summary: "A run's output (text); follow=true streams until the run ends", params: RunParams, querystring: FollowQuery, response: { 200: TextResponse, ...errorResponses(401, 404) } } },
      async (request, reply) => {
        const chunks = await runLogs(ctx, principalOf(request), request.params.id, request.params.job_id, request.params.run_id, {
          follow: isFlagSet(request.query.follow),
          signal: clientGone(reply),
        });
        return sendText(reply, chunks);
      },
    );
  };
