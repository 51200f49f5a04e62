// Commands on an app's scheduled jobs (decisions §22): jobs ls, add, rm, run (--follow), runs, logs.
import { Option, type Command } from 'commander';
import type { ApiClient } from '../api-client.js';
import { CliError, usageError } from '../cli-error.js';
import type { CliIo } from '../cli-io.js';
import { connect, withInterrupt, withJson, type JsonOption } from '../command-context.js';
import { ago, commandWord, printJson, printTable } from '../output.js';
import { appFor } from '../resolve-app.js';

interface Job {
  id: string;
  name: string;
  schedule: string;
  command: string[];
  timezone: string;
  timeout_seconds: number;
  concurrency: string;
  next_run_at: string | null;
}
interface Run {
  id: string;
  status: string;
  trigger: string;
  due_at: string | null;
  exit_code: number | null;
  message: string | null;
  started_at: string;
  finished_at: string | null;
}

const jobsPath = (appId: string): string => `/api/v1/deployments/${appId}/jobs`;

/** A job by name or id. */
async function findJob(client: ApiClient, appId: string, ref: string): Promise<Job> {
  const jobs = await client.request<Job[]>('GET', jobsPath(appId));
  const job = jobs.find((j) => j.name === ref.trim() || j.id === ref);
  if (job === undefined) throw new CliError(`no job ${ref} (see \`slipway jobs ls\`)`);
  return job;
}

/** Registers `jobs` and its subcommands on `program`. */
export function registerJobsCommands(program: Command, io: CliIo): void {
  const run = (body: (client: ApiClient) => Promise<void>): Promise<void> => withInterrupt(io, async (signal) => body(await connect(io, signal)));
  const jobs = program.command('jobs').description("an app's scheduled jobs: commands run in its live release on a cron schedule").addHelpText(
    'after',
    `
A run is one container of the app's live release image with its variables and linked databases,
never reachable from outside. Schedules: 5 cron fields, 6 with seconds first, or @hourly, @daily,
@weekly, @monthly, read in --timezone (default UTC).

Examples:
  slipway jobs add hello nightly --schedule "0 3 * * *" -- node scripts/cleanup.js
  slipway jobs run hello nightly --follow
  slipway jobs runs hello nightly`,
  );

  withJson(jobs.command('ls').alias('list').description("list an app's jobs").argument('[app]', 'the app (name, subdomain or id)')).action((ref: string | undefined, options: JsonOption) =>
    run(async (client) => {
      const app = await appFor(client, io, ref);
      const list = await client.request<Job[]>('GET', jobsPath(app.id));
      if (options.json === true) return printJson(io.stdout, list);
      if (list.length === 0) return void io.stdout.write(`${app.name} has no jobs (add one with \`slipway jobs add ${app.subdomain} NAME --schedule "…" -- COMMAND…\`).\n`);
      printTable(io.stdout, list, [
        { header: 'name', value: (j) => j.name },
        { header: 'schedule', value: (j) => (j.timezone === 'UTC' ? j.schedule : `${j.schedule} (${j.timezone})`) },
        { header: 'command', value: (j) => j.command.join(' ') },
        { header: 'next run', value: (j) => j.next_run_at ?? '' },
      ]);
    }),
  );

  withJson(
    jobs
      .command('add')
      .description('schedule a command (give it after --)')
      .argument('<app>', 'the app (name, subdomain or id)')
      .argument('<name>', 'the job name')
      .argument('<command...>', 'the argv to run (after --)')
      .requiredOption('-s, --schedule <cron>', 'e.g. "0 3 * * *", "*/30 * * * * *", @daily')
      .option('--timezone <zone>', 'IANA time zone the schedule is read in (default UTC)')
      .option('--timeout <seconds>', 'kill a run after this (1–86400, default 3600)')
      .addOption(new Option('--concurrency <mode>', 'a due time while a run goes: forbid skips it, allow runs it').choices(['forbid', 'allow']))
      .option('--service <name>', "compose: the service whose image it runs in (default: the web service's)"),
  ).action((ref: string, name: string, command: string[], options: JsonOption & { schedule: string; timezone?: string; timeout?: string; concurrency?: string; service?: string }) =>
    run(async (client) => {
      const app = await appFor(client, io, ref);
      const timeout = options.timeout === undefined ? undefined : Number(options.timeout);
      if (timeout !== undefined && !Number.isInteger(timeout)) throw usageError('--timeout takes a whole number of seconds');
      const job = await client.request<Job>('POST', jobsPath(app.id), {
        body: { name, schedule: options.schedule, command, ...(options.timezone === undefined ? {} : { timezone: options.timezone }), ...(timeout === undefined ? {} : { timeout_seconds: timeout }), ...(options.concurrency === undefined ? {} : { concurrency: options.concurrency }), ...(options.service === undefined ? {} : { service: options.service }) },
      });
      if (options.json === true) return printJson(io.stdout, job);
      io.stdout.write(`Job ${job.name} scheduled (${job.schedule}); next run ${job.next_run_at ?? 'never'}.\n`);
    }),
  );

  withJson(jobs.command('rm').alias('remove').description('delete a job and its runs').argument('<app>', 'the app').argument('<job>', 'the job (name or id)')).action((ref: string, jobRef: string, options: JsonOption) =>
    run(async (client) => {
      const app = await appFor(client, io, ref);
      const job = await findJob(client, app.id, jobRef);
      await client.request<void>('DELETE', `${jobsPath(app.id)}/${job.id}`);
      if (options.json === true) return printJson(io.stdout, { removed: job.name });
      io.stdout.write(`Job ${job.name} deleted.\n`);
    }),
  );

  withJson(
    jobs
      .command('run')
      .description('run a job now')
      .argument('<app>', 'the app')
      .argument('<job>', 'the job (name or id)')
      .option('-f, --follow', 'print its output until it ends (the exit code is the run\'s: 1 unless it succeeded)'),
  ).action((ref: string, jobRef: string, options: JsonOption & { follow?: boolean }) =>
    run(async (client) => {
      const app = await appFor(client, io, ref);
      const job = await findJob(client, app.id, jobRef);
      const started = await client.request<Run>('POST', `${jobsPath(app.id)}/${job.id}/runs`);
      if (options.follow !== true) {
        if (options.json === true) return printJson(io.stdout, started);
        io.stdout.write(started.status === 'skipped' ? `Skipped: ${started.message ?? ''}\n` : `Run ${started.id.slice(0, 8)} of ${job.name} started (\`slipway jobs logs ${app.subdomain} ${commandWord(job.name)} --follow\`).\n`);
        return;
      }
      if (started.status === 'skipped') throw new CliError(`the run was skipped: ${started.message ?? ''}`);
      for await (const chunk of client.stream(`${jobsPath(app.id)}/${job.id}/runs/${started.id}/logs?follow=true`)) io.stdout.write(chunk);
      const runs = await client.request<Run[]>('GET', `${jobsPath(app.id)}/${job.id}/runs`);
      const ended = runs.find((r) => r.id === started.id);
      if (options.json === true) printJson(io.stdout, ended ?? started);
      if (ended?.status !== 'succeeded') throw new CliError(`the run ${ended?.status ?? 'ended'}${ended?.exit_code == null ? '' : ` with exit code ${ended.exit_code}`}`);
    }),
  );

  withJson(jobs.command('runs').description("a job's last runs, newest first").argument('<app>', 'the app').argument('<job>', 'the job (name or id)')).action((ref: string, jobRef: string, options: JsonOption) =>
    run(async (client) => {
      const app = await appFor(client, io, ref);
      const job = await findJob(client, app.id, jobRef);
      const runs = await client.request<Run[]>('GET', `${jobsPath(app.id)}/${job.id}/runs`);
      if (options.json === true) return printJson(io.stdout, runs);
      if (runs.length === 0) return void io.stdout.write(`${job.name} has not run yet.\n`);
      printTable(io.stdout, runs, [
        { header: 'run', value: (r) => r.id.slice(0, 8) },
        { header: 'status', value: (r) => r.status },
        { header: 'trigger', value: (r) => r.trigger },
        { header: 'exit', value: (r) => (r.exit_code === null ? '' : String(r.exit_code)) },
        { header: 'started', value: (r) => ago(r.started_at) },
        { header: 'note', value: (r) => r.message ?? '' },
      ]);
    }),
  );

  jobs
    .command('logs')
    .description("a run's output (default: the latest run)")
    .argument('<app>', 'the app')
    .argument('<job>', 'the job (name or id)')
    .argument('[run]', 'the run id (or its first characters)')
    .option('-f, --follow', 'keep printing until the run ends')
    .action((ref: string, jobRef: string, runRef: string | undefined, options: { follow?: boolean }) =>
      run(async (client) => {
        const app = await appFor(client, io, ref);
        const job = await findJob(client, app.id, jobRef);
        const runs = await client.request<Run[]>('GET', `${jobsPath(app.id)}/${job.id}/runs`);
        const chosen = runRef === undefined ? runs[0] : runs.find((r) => r.id.startsWith(runRef));
        if (chosen === undefined) throw new CliError(runRef === undefined ? `${job.name} has not run yet` : `no run ${runRef} of ${job.name}`);
        for await (const chunk of client.stream(`${jobsPath(app.id)}/${job.id}/runs/${chosen.id}/logs${options.follow === true ? '?follow=true' : ''}`)) io.stdout.write(chunk);
      }),
    );
}
