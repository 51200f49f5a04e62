// Jobs' use-cases (decisions §22): create, list, show, change, delete, run now, runs and their logs; each authorized by the deployment policy.
import crypto from 'node:crypto';
import { DomainError } from '../core/errors.js';
import { OBJECT_NAME_RULE, objectName } from '../core/object-name.js';
import { pageFromList, type Page, type PageRequest } from '../core/page.js';
import type { Principal } from '../core/principal.js';
import type { DeploymentCatalog } from '../domain/deployment-catalog.js';
import { assertUuid, getDeploymentRow } from '../domain/deployments.js';
import type { DeploymentAction } from '../domain/policy.js';
import { deploymentRecord, type AuditRecord } from '../domain/audit.js';
import type { DeploymentRow } from '../domain/deployment-rows.js';
import type { JobRunner } from './job-runner.js';
import { checkTimezone, JobSchedule } from '../core/cron-schedule.js';
import type { JobChanges, JobConcurrency, JobRow, JobStore, RunRow } from './job-store.js';
import { RUNS_KEPT } from './job-runner.js';
import { readRunLog, type RunLogWakeups } from './run-logs.js';

/** What the jobs' use-cases need, built once by the jobs part. */
export interface JobsContext {
  readonly store: JobStore;
  readonly deployments: DeploymentCatalog;
  readonly runner: Pick<JobRunner, 'start'>;
  readonly scheduler: { changed(): void };
  readonly wakeups: RunLogWakeups;
  /** Why jobs cannot run on this installation's runtime (create and run answer 409 with it); undefined: they can. */
  readonly unsupported: string | undefined;
}

export interface JobInput {
  name?: unknown;
  schedule?: unknown;
  command?: unknown;
  timezone?: unknown;
  timeout_seconds?: unknown;
  concurrency?: unknown;
  service?: unknown;
}

const DEFAULT_TIMEOUT_SECONDS = 3600;
const MAX_TIMEOUT_SECONDS = 86_400;
const MAX_ARGS = 100;
const MAX_ARG_LENGTH = 4096;

const invalid = (field: string, why: string): DomainError => new DomainError('validation_error', `${field}: ${why}`);

/** A job's name: free text (contract §22 gives no rule), trimmed; unique in the deployment (the store says when taken). */
function checkName(value: unknown): string {
  const name = objectName(value);
  if (name === undefined) throw invalid('name', OBJECT_NAME_RULE);
  return name;
}

function checkCommand(value: unknown): string[] {
  if (typeof value === 'string') throw invalid('command', 'an argv array such as ["sh", "-c", "…"], not a string (no shell runs it)');
  if (!Array.isArray(value) || value.length === 0 || value.length > MAX_ARGS) throw invalid('command', `an argv array of 1 to ${MAX_ARGS} strings`);
  for (const arg of value) {
    if (typeof arg !== 'string' || arg.length > MAX_ARG_LENGTH || arg.includes('\0')) throw invalid('command', `every argument is a string of at most ${MAX_ARG_LENGTH} characters without NUL`);
  }
  if ((value[0] as string).trim() === '') throw invalid('command', 'the program (its first argument) is empty');
  return value as string[];
}

function checkTimeout(value: unknown): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1 || value > MAX_TIMEOUT_SECONDS) throw invalid('timeout_seconds', `a whole number of seconds from 1 to ${MAX_TIMEOUT_SECONDS}`);
  return value;
}

function checkConcurrency(value: unknown): JobConcurrency {
  if (value !== 'forbid' && value !== 'allow') throw invalid('concurrency', '"forbid" (a due time while a run goes is skipped) or "allow"');
  return value;
}

/** A compose service's name (checked against the live release when a run starts: the source may change). */
function checkService(value: unknown): string | null {
  if (value === null) return null;
  if (typeof value !== 'string' || !/^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,62}$/.test(value)) throw invalid('service', 'the name of a service of the compose file (letters, digits, ".", "_", "-"), or null for the web service');
  return value;
}

function checkZone(value: unknown): string {
  if (typeof value !== 'string') throw invalid('timezone', 'an IANA time zone name (e.g. UTC, Europe/Paris)');
  return checkTimezone(value);
}

function checkSchedule(value: unknown, timezone: string): string {
  if (typeof value !== 'string' || value.length > 200) throw invalid('schedule', 'a cron expression (5 or 6 fields) or @hourly, @daily, @weekly, @monthly');
  JobSchedule.parse(value, timezone);
  return value.trim();
}

/** A deployment the caller may `action`, that can have jobs (404 for another user's; 409 when this runtime runs none). */
async function jobDeployment(ctx: JobsContext, principal: Principal, deploymentId: string, action: DeploymentAction): Promise<DeploymentRow> {
  return getDeploymentRow(ctx.deployments, principal, deploymentId, action);
}

async function jobOf(ctx: JobsContext, principal: Principal, deploymentId: string, jobId: string, action: DeploymentAction): Promise<{ dep: DeploymentRow; job: JobRow }> {
  const dep = await jobDeployment(ctx, principal, deploymentId, action);
  assertUuid(jobId, 'job');
  const job = await ctx.store.job(dep.id, jobId);
  if (job === undefined) throw new DomainError('not_found', 'job not found');
  return { dep, job };
}

/** The audit entry of `action` on a job of `dep` (decisions §18: every change is in the audit log). */
const jobRecord = (principal: Principal, dep: DeploymentRow, jobId: string, action: string): AuditRecord => deploymentRecord(principal, dep, `job.${action}`, 'job', jobId);

function refuseUnsupported(ctx: JobsContext): void {
  if (ctx.unsupported !== undefined) throw new DomainError('invalid_state', ctx.unsupported);
}

export async function createJob(ctx: JobsContext, principal: Principal, deploymentId: string, input: JobInput): Promise<JobRow> {
  const dep = await jobDeployment(ctx, principal, deploymentId, 'change');
  const name = checkName(input.name);
  const timezone = input.timezone === undefined ? 'UTC' : checkZone(input.timezone);
  const schedule = checkSchedule(input.schedule, timezone);
  const command = checkCommand(input.command);
  const timeout = input.timeout_seconds === undefined ? DEFAULT_TIMEOUT_SECONDS : checkTimeout(input.timeout_seconds);
  const concurrency = input.concurrency === undefined ? 'forbid' : checkConcurrency(input.concurrency);
  const service = input.service === undefined ? null : checkService(input.service);
  refuseUnsupported(ctx);
  // A deployment without a live release yet may get jobs (contract §22: 201): their runs are `skipped` until it has one.
  const now = new Date().toISOString();
  const job: JobRow = { id: crypto.randomUUID(), deployment_id: dep.id, name, schedule, command, timezone, timeout_seconds: timeout, concurrency, service, created_at: now, updated_at: now };
  if ((await ctx.store.create(job, jobRecord(principal, dep, job.id, 'create'))) === 'name_taken') throw new DomainError('validation_error', `name: the deployment already has a job named "${name}"`);
  ctx.scheduler.changed();
  return job;
}

/** Where a page of jobs ends: its last job's creation time and name (unique in the deployment). */
export type JobPosition = readonly [createdAt: string, name: string];

/** `GET …/jobs`: the deployment's jobs, oldest first, a page at a time (§14). */
export async function listJobs(ctx: JobsContext, principal: Principal, deploymentId: string, page: PageRequest<JobPosition>): Promise<Page<JobRow, JobPosition>> {
  const dep = await jobDeployment(ctx, principal, deploymentId, 'read');
  return pageFromList(await ctx.store.jobs(dep.id), page, (job) => [job.created_at, job.name] as const);
}

export async function getJob(ctx: JobsContext, principal: Principal, deploymentId: string, jobId: string): Promise<JobRow> {
  return (await jobOf(ctx, principal, deploymentId, jobId, 'read')).job;
}

export async function updateJob(ctx: JobsContext, principal: Principal, deploymentId: string, jobId: string, input: JobInput): Promise<JobRow> {
  const { dep, job } = await jobOf(ctx, principal, deploymentId, jobId, 'change');
  const timezone = input.timezone === undefined ? job.timezone : checkZone(input.timezone);
  const schedule = checkSchedule(input.schedule ?? job.schedule, timezone);
  const changes: JobChanges = {
    ...(input.schedule === undefined ? {} : { schedule }),
    ...(input.name === undefined ? {} : { name: checkName(input.name) }),
    ...(input.timezone === undefined ? {} : { timezone }),
    ...(input.command === undefined ? {} : { command: checkCommand(input.command) }),
    ...(input.timeout_seconds === undefined ? {} : { timeout_seconds: checkTimeout(input.timeout_seconds) }),
    ...(input.concurrency === undefined ? {} : { concurrency: checkConcurrency(input.concurrency) }),
    ...(input.service === undefined ? {} : { service: checkService(input.service) }),
  };
  const updatedAt = new Date().toISOString();
  if ((await ctx.store.update(job.id, changes, updatedAt, jobRecord(principal, dep, job.id, 'update'))) === 'name_taken') throw new DomainError('validation_error', `name: the deployment already has a job named "${changes.name ?? job.name}"`);
  ctx.scheduler.changed();
  return { ...job, ...changes, updated_at: updatedAt };
}

export async function deleteJob(ctx: JobsContext, principal: Principal, deploymentId: string, jobId: string): Promise<void> {
  const { dep, job } = await jobOf(ctx, principal, deploymentId, jobId, 'change');
  await ctx.store.remove(job.id, jobRecord(principal, dep, job.id, 'delete'));
  ctx.scheduler.changed();
}

/** Starts a run now (trigger `manual`): recorded at once, `running` or `skipped` (forbid while one goes). */
export async function runJobNow(ctx: JobsContext, principal: Principal, deploymentId: string, jobId: string): Promise<RunRow> {
  const { dep, job } = await jobOf(ctx, principal, deploymentId, jobId, 'change');
  refuseUnsupported(ctx);
  const run = await ctx.runner.start(job, 'manual', null, jobRecord(principal, dep, job.id, 'run'));
  // A manual run has no due time: nothing can claim it first.
  if (run === null) throw new DomainError('internal_error', 'the run could not be recorded');
  return run;
}

export async function listRuns(ctx: JobsContext, principal: Principal, deploymentId: string, jobId: string): Promise<RunRow[]> {
  const { job } = await jobOf(ctx, principal, deploymentId, jobId, 'read');
  return ctx.store.runs(job.id, RUNS_KEPT);
}

export async function runLogs(ctx: JobsContext, principal: Principal, deploymentId: string, jobId: string, runId: string, options: { follow: boolean; signal: AbortSignal }): Promise<AsyncGenerator<Buffer>> {
  const { job } = await jobOf(ctx, principal, deploymentId, jobId, 'read');
  assertUuid(runId, 'run');
  if ((await ctx.store.run(job.id, runId)) === undefined) throw new DomainError('not_found', 'run not found');
  return readRunLog(ctx.store, runId, { follow: options.follow, signal: options.signal, wakeups: ctx.wakeups });
}

/** A job as the API shows it, with its next due time. */
export function presentJob(job: JobRow): Record<string, unknown> {
  let next: string | null = null;
  try {
    next = JobSchedule.parse(job.schedule, job.timezone).next(new Date())?.toISOString() ?? null;
  } catch {
    next = null;
  }
  return {
    id: job.id, deployment_id: job.deployment_id, name: job.name, schedule: job.schedule, command: [...job.command], timezone: job.timezone,
    timeout_seconds: job.timeout_seconds, concurrency: job.concurrency, service: job.service ?? null, next_run_at: next, created_at: job.created_at, updated_at: job.updated_at,
  };
}

export function presentRun(run: RunRow): Record<string, unknown> {
  return {
    id: run.id, job_id: run.job_id, status: run.status, trigger: run.trigger, due_at: run.due_at, exit_code: run.exit_code, message: run.message,
    started_at: run.started_at, finished_at: run.finished_at,
  };
}
