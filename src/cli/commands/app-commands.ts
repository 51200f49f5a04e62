// Commands on deployed apps: apps, status, builds, logs, stop, restart, rollback, rm.
import { InvalidArgumentError, type Command } from 'commander';
import type { ApiClient } from '../api-client.js';
import type { Build, Deployment, MessageAnswer } from '../api-types.js';
import { CliError, usageError } from '../cli-error.js';
import type { CliIo } from '../cli-io.js';
import { connect, limitOption, withInterrupt, withJson, type JsonOption, type ListOptions } from '../command-context.js';
import { ago, copyStream, printFields, printJson, printTable, shortId } from '../output.js';
import { createPrompter } from '../prompt.js';
import { appFor, resolveApp, resolveBuild } from '../resolve-app.js';
import { APP_OUTPUT_MARKER } from '../../runtime/release.js';
import { healthSummary } from '../../domain/app-health.js';
import { pendingNote, statusCell } from '../app-state.js';

const APP_HELP = 'APP is the app\'s name, subdomain or id.';
/** For commands whose APP may be left out: the app of ./slipway.json, as `env` does. */
const LINKED_APP_HELP = "APP is the app's name, subdomain or id; left out, the app the folder's slipway.json links to.";

/** Parses a non-negative whole number option. */
function wholeNumber(raw: string): number {
  if (!/^\d+$/.test(raw)) throw new InvalidArgumentError('expected a whole number');
  return Number(raw);
}

/** Registers the app commands on `program`. */
export function registerAppCommands(program: Command, io: CliIo): void {
  const run = (body: (client: ApiClient, signal: AbortSignal) => Promise<void>): Promise<void> =>
    withInterrupt(io, async (signal) => body(await connect(io, signal), signal));

  withJson(program.command('apps').alias('ls').description('list your apps, newest first (all of them unless --limit)'))
    .option('--limit <n>', 'only the N newest apps', limitOption)
    .addHelpText('after', '\nExamples:\n  slipway apps\n  slipway apps --limit 20\n  slipway apps --json')
    .action((options: ListOptions) =>
      run(async (client) => {
        const apps = await client.list<Deployment>('/api/v1/deployments', options.limit === undefined ? {} : { max: options.limit });
        if (options.json === true) return printJson(io.stdout, apps);
        if (apps.length === 0) return void io.stdout.write('No apps yet: deploy a folder with `slipway deploy`.\n');
        printTable(io.stdout, apps, [
          { header: 'name', value: (d) => d.name },
          { header: 'subdomain', value: (d) => d.subdomain },
          { header: 'status', value: (d) => statusCell(d) },
          { header: 'url', value: (d) => d.url ?? '-' },
          { header: 'updated', value: (d) => ago(d.updated_at) },
        ]);
      }),
    );

  withJson(program.command('status').argument('[app]').description("show an app's state, URL and latest build"))
    .addHelpText('after', `\n${LINKED_APP_HELP}\n\nExamples:\n  slipway status hello\n  slipway status hello --json`)
    .action((ref: string | undefined, options: JsonOption) =>
      run(async (client) => {
        const app = await appFor(client, io, ref);
        const full = await client.request<Deployment>('GET', `/api/v1/deployments/${app.id}`);
        const [latest] = await client.request<Build[]>('GET', `/api/v1/deployments/${app.id}/builds?limit=1`);
        if (options.json === true) return printJson(io.stdout, full);
        printFields(io.stdout, [
          ['name', full.name],
          ['id', full.id],
          ['status', full.status],
          ...(healthSummary(full.health) === '' ? [] : [['health', healthSummary(full.health)] as [string, string]]),
          ...(full.config_pending === true ? [['pending', pendingNote(full)] as [string, string]] : []),
          ['url', full.url ?? '-'],
          ['source', full.source_type === 'git' ? `${full.repo_url ?? ''}${full.branch ? ` (${full.branch})` : ''}` : 'uploaded folder'],
          full.compose_path ? ['compose file', full.compose_path] : ['dockerfile', full.dockerfile_path ?? 'Dockerfile'],
          ...(full.source_type === 'git' ? [['deploy on push', full.auto_deploy === true ? 'on (slipway webhook)' : 'off'] as [string, string]] : []),
          ...(full.source_type === 'git' ? [['previews', full.previews === true ? 'on (slipway previews)' : 'off'] as [string, string]] : []),
          ['live build', shortId(full.live_build_id)],
          ['latest build', latest === undefined ? '-' : `${shortId(latest.id)} ${latest.status} ${ago(latest.started_at)}`],
          ['created', full.created_at],
          ['updated', full.updated_at],
        ]);
        if (latest?.status === 'failed' && latest.error) io.stdout.write(`\nlatest build failed: ${latest.error.trim().split('\n').pop() ?? ''}\n`);
      }),
    );

  withJson(program.command('builds').argument('<app>').description("list an app's builds, newest first (all of them unless --limit)"))
    .option('--limit <n>', 'only the N newest builds', limitOption)
    .addHelpText('after', `\n${APP_HELP} The live build is marked with *.\n\nExamples:\n  slipway builds hello\n  slipway builds hello --limit 5\n  slipway builds hello --json`)
    .action((ref: string, options: ListOptions) =>
      run(async (client) => {
        const app = await resolveApp(client, ref);
        const builds = await client.list<Build>(`/api/v1/deployments/${app.id}/builds`, options.limit === undefined ? {} : { max: options.limit });
        if (options.json === true) return printJson(io.stdout, builds);
        if (builds.length === 0) return void io.stdout.write(`${app.name} has no builds yet.\n`);
        printTable(io.stdout, builds, [
          { header: 'id', value: (b) => `${shortId(b.id)}${b.id === app.live_build_id ? '*' : ''}` },
          { header: 'status', value: (b) => b.status },
          { header: 'started', value: (b) => ago(b.started_at) },
          { header: 'duration', value: (b) => duration(b) },
          { header: 'error', value: (b) => truncate(b.error?.trim().split('\n').pop() ?? '', 60) },
        ]);
      }),
    );

  withJson(
    program
      .command('logs')
      .argument('[app]')
      .description("print an app's output (or a build's log with --build)")
      .option('-f, --follow', 'keep printing new output until Ctrl-C (or until the build ends)')
      .option('--build <id>', 'print the log of this build (id or a unique prefix) instead')
      .option('--tail <n>', 'only the last N lines of the app output', wholeNumber)
      .option('--service <name>', "a compose app: that service's lines only (each line is prefixed [service])"),
  )
    .addHelpText(
      'after',
      `\n${LINKED_APP_HELP} With --json, each line is printed as a JSON object {"line": "..."}.\n\nExamples:\n  slipway logs hello\n  slipway logs hello -f --tail 100\n  slipway logs hello --build 3f2a9c1e\n  slipway logs shop --service worker`,
    )
    .action((ref: string | undefined, options: JsonOption & { follow?: boolean; build?: string; tail?: number; service?: string }) =>
      run(async (client) => {
        const app = await appFor(client, io, ref);
        const query = new URLSearchParams();
        if (options.follow === true) query.set('follow', 'true');
        let path: string;
        if (options.build !== undefined) {
          if (options.tail !== undefined || options.service !== undefined) throw usageError(`${options.tail !== undefined ? '--tail' : '--service'} applies to the app output, not to --build logs`);
          const build = await resolveBuild(client, app, options.build);
          path = `/api/v1/deployments/${app.id}/builds/${build.id}/logs`;
        } else {
          if (options.tail !== undefined) query.set('tail', String(options.tail));
          if (options.service !== undefined) query.set('service', options.service);
          path = `/api/v1/deployments/${app.id}/logs`;
        }
        const qs = query.toString();
        try {
          await copyStream(io, client.stream(qs === '' ? path : `${path}?${qs}`), options.json === true);
        } catch (err) {
          // No container runs: when the latest build's container failed to start, its output is in
          // that build's log; show it rather than only "no container has run".
          if (options.build !== undefined || !(err instanceof CliError) || err.code !== 'invalid_state') throw err;
          const failed = await failedStartOutput(client, app);
          if (failed === undefined) throw err;
          io.stderr.write(`No container of ${app.name} is running: the app of build ${shortId(failed.build.id)} failed to start. Its output:\n`);
          await copyStream(io, (async function* () { yield failed.output; })(), options.json === true);
        }
      }),
    );

  for (const action of ['stop', 'restart'] as const) {
    withJson(
      program
        .command(action)
        .argument('<app>')
        .description(action === 'stop' ? 'stop an app (cancels a build in flight)' : "restart an app's live release"),
    )
      .addHelpText('after', `\n${APP_HELP}\n\nExample:\n  slipway ${action} hello`)
      .action((ref: string, options: JsonOption) =>
        run(async (client) => {
          const app = await resolveApp(client, ref);
          const answer = await withProgress(
            io,
            action === 'stop'
              ? `Stopping ${app.name}: the app gets up to 10 s to exit after SIGTERM, then it is killed…`
              : `Restarting ${app.name}: starting the live build again and waiting until it answers…`,
            action === 'stop' ? 'still stopping' : 'still restarting',
            () => client.request<MessageAnswer>('POST', `/api/v1/deployments/${app.id}/${action}`, { timeoutMs: 120_000 }),
          );
          if (options.json === true) return printJson(io.stdout, answer);
          io.stdout.write(`${answer.message}\n`);
        }),
      );
  }

  withJson(program.command('cancel').argument('<app>').description('cancel the build in flight (the live release keeps serving)'))
    .addHelpText(
      'after',
      `\n${APP_HELP} Ctrl-C during \`slipway deploy\` only stops following the log; this cancels the build on the server.\n\nExample:\n  slipway cancel hello`,
    )
    .action((ref: string, options: JsonOption) =>
      run(async (client) => {
        const app = await resolveApp(client, ref);
        const answer = await client.request<MessageAnswer>('POST', `/api/v1/deployments/${app.id}/cancel`, { timeoutMs: 120_000 });
        if (options.json === true) return printJson(io.stdout, answer);
        io.stdout.write(`${answer.message}\n`);
      }),
    );

  withJson(
    program
      .command('rollback')
      .argument('<app>')
      .argument('[build_id]', 'the build to serve again (default: the succeeded build before the live one)')
      .description('serve an earlier succeeded build again'),
  )
    .addHelpText('after', `\n${APP_HELP} BUILD_ID may be the id or a unique prefix (see \`slipway builds\`).\n\nExamples:\n  slipway rollback hello\n  slipway rollback hello 3f2a9c1e`)
    .action((ref: string, buildRef: string | undefined, options: JsonOption) =>
      run(async (client) => {
        const app = await resolveApp(client, ref);
        const build = buildRef === undefined ? await previousBuild(client, app) : await resolveBuild(client, app, buildRef);
        const answer = await client.request<MessageAnswer>('POST', `/api/v1/deployments/${app.id}/rollback`, {
          body: { build_id: build.id },
          timeoutMs: 120_000,
        });
        if (options.json === true) return printJson(io.stdout, answer);
        io.stdout.write(`${answer.message}\n`);
        if (app.url !== undefined) io.stdout.write(`${app.url}\n`);
      }),
    );

  withJson(
    program
      .command('rm')
      .alias('delete')
      .argument('<app>')
      .description('delete an app with its containers, images, sources and logs')
      .option('-y, --yes', 'do not ask for confirmation'),
  )
    .addHelpText('after', `\n${APP_HELP} Without --yes, asks for confirmation (reads a "y" line when stdin is not a terminal).\n\nExamples:\n  slipway rm hello\n  slipway rm hello --yes`)
    .action((ref: string, options: JsonOption & { yes?: boolean }) =>
      run(async (client, signal) => {
        const app = await resolveApp(client, ref);
        if (options.yes !== true) {
          const prompter = createPrompter(io, signal);
          let answer: string;
          try {
            answer = await prompter.ask(`Delete ${app.name} (${app.url ?? app.subdomain}) with its builds and logs? [y/N] `);
          } catch (err) {
            if (err instanceof CliError && err.exitCode !== 1) throw err;
            answer = '';
          } finally {
            prompter.close();
          }
          if (!/^y(es)?$/i.test(answer.trim())) throw new CliError('not deleted (answer "y" to confirm, or pass --yes)');
        }
        await client.request('DELETE', `/api/v1/deployments/${app.id}`, { timeoutMs: 120_000 });
        if (options.json === true) return printJson(io.stdout, { deleted: app.id });
        io.stdout.write(`Deleted ${app.name}.\n`);
      }),
    );
}

/**
 * Runs a slow request with a line on stderr first and `<still> (N s)…` every 2 s until it ends, so
 * a stop that waits for an app to exit is never silent.
 */
async function withProgress<T>(io: CliIo, first: string, still: string, body: () => Promise<T>): Promise<T> {
  io.stderr.write(`${first}\n`);
  const since = Date.now();
  const timer = setInterval(() => io.stderr.write(`  ${still} (${Math.round((Date.now() - since) / 1000)} s)…\n`), 2000);
  try {
    return await body();
  } finally {
    clearInterval(timer);
  }
}

/** The output of the latest build's app when that build failed while starting it (from its build log). */
async function failedStartOutput(client: ApiClient, app: Deployment): Promise<{ build: Build; output: string } | undefined> {
  const [latest] = await client.request<Build[]>('GET', `/api/v1/deployments/${app.id}/builds?limit=1`);
  if (latest === undefined || latest.status !== 'failed') return undefined;
  let log = '';
  for await (const chunk of client.stream(`/api/v1/deployments/${app.id}/builds/${latest.id}/logs`)) log += chunk;
  const lines = log.split('\n');
  const start = lines.lastIndexOf(APP_OUTPUT_MARKER);
  if (start === -1) return undefined;
  const rest = lines.slice(start + 1);
  const end = rest.findIndex((line) => line.startsWith('==> '));
  const output = (end === -1 ? rest : rest.slice(0, end)).join('\n');
  return { build: latest, output: output.endsWith('\n') || output === '' ? output : `${output}\n` };
}

/** The newest succeeded build older than the live one. */
async function previousBuild(client: ApiClient, app: Deployment): Promise<Build> {
  const builds = await client.list<Build>(`/api/v1/deployments/${app.id}/builds`);
  const live = builds.findIndex((b) => b.id === app.live_build_id);
  if (app.live_build_id === null || app.live_build_id === undefined || live === -1) {
    throw new CliError(`${app.name} has no live build to roll back from: name a build (see \`slipway builds ${app.subdomain}\`)`);
  }
  const earlier = builds.slice(live + 1).find((b) => b.status === 'succeeded');
  if (earlier === undefined) throw new CliError(`${app.name} has no succeeded build before the live one (${shortId(app.live_build_id)})`);
  return earlier;
}

function duration(build: Build): string {
  if (build.finished_at === null) return build.status === 'building' ? 'running' : '-';
  const ms = Date.parse(build.finished_at) - Date.parse(build.started_at);
  return Number.isNaN(ms) ? '-' : `${(ms / 1000).toFixed(1)}s`;
}

function truncate(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
}
