// Commands on an app's environment: env (list), env set, env unset, env import.
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { Option, type Command } from 'commander';
import type { ApiClient } from '../api-client.js';
import type { EnvAnswer, MessageAnswer } from '../api-types.js';
import { CliError, usageError } from '../cli-error.js';
import type { CliIo } from '../cli-io.js';
import { connect, withInterrupt, withJson, type JsonOption } from '../command-context.js';
import { DotenvError, parseDotenv } from '../dotenv.js';
import { ago, printJson, printTable } from '../output.js';
import { LINK_FILE } from '../pack.js';
import { appFor } from '../resolve-app.js';
import { createPrompter } from '../prompt.js';
import { pendingNote } from '../app-state.js';

/** Kept here too: other commands import it from this module. */
export { appFor };

interface AppOption extends JsonOption {
  app?: string;
}

interface ChangeOptions extends AppOption {
  secret?: boolean;
  /** True with --restart, false with --no-restart; unset: ask on a terminal. */
  restart?: boolean;
}

const APP_OPTION = (): Option => new Option('-a, --app <app>', `the app (name, subdomain or id); default: the app of ./${LINK_FILE}`);
const MASK = '********';

/** Registers `env` and its subcommands on `program`. */
export function registerEnvCommands(program: Command, io: CliIo): void {
  const run = (body: (client: ApiClient, signal: AbortSignal) => Promise<void>): Promise<void> =>
    withInterrupt(io, async (signal) => body(await connect(io, signal), signal));

  const env = withJson(
    program
      .command('env')
      .argument('[app]', 'the app (name, subdomain or id)')
      .addOption(APP_OPTION())
      .description("list an app's environment variables (secrets masked)"),
  )
    .addHelpText(
      'after',
      `
Variables reach the app's containers (beside PORT, which Slipway sets) at the next deploy, restart
or rollback. Non-secret variables are also build arguments for the ARGs the Dockerfile declares;
secrets never reach a build and the server never shows their values again.

Examples:
  slipway env hello
  slipway env set --app hello DATABASE_URL=postgres://db/app LOG_LEVEL=info
  slipway env set --app hello --secret API_TOKEN=abc123
  slipway env unset --app hello LOG_LEVEL
  slipway env import .env --app hello --secret`,
    )
    .action((ref: string | undefined, options: AppOption) =>
      run(async (client) => {
        const app = await appFor(client, io, ref ?? options.app);
        const answer = await client.request<EnvAnswer>('GET', `/api/v1/deployments/${app.id}/env`);
        if (options.json === true) return printJson(io.stdout, { ...answer, config_pending: app.config_pending === true, config_pending_keys: app.config_pending_keys ?? [] });
        const pending = app.config_pending === true ? `Pending: ${pendingNote(app)}.\n` : '';
        if (answer.vars.length === 0) return void io.stdout.write(`${app.name} has no environment variables (set some with \`slipway env set\`).\n${pending}`);
        printTable(io.stdout, answer.vars, [
          { header: 'key', value: (v) => v.key },
          { header: 'value', value: (v) => (v.secret ? MASK : (v.value ?? '')) },
          { header: 'secret', value: (v) => (v.secret ? 'yes' : '') },
          { header: 'updated', value: (v) => ago(v.updated_at) },
        ]);
        io.stdout.write(pending);
      }),
    );

  // `--app` and `--json` may come before or after the subcommand's name: actions read optsWithGlobals().
  const changeCommand = (name: string, description: string): Command =>
    withJson(
      env
        .command(name)
        .description(description)
        .addOption(APP_OPTION())
        .option('--restart', 'restart a running app to apply the change, without asking')
        .option('--no-restart', 'do not restart the app: the change applies at its next deploy, restart or rollback'),
    );

  changeCommand('set', 'set variables (KEY=VALUE …); a running app is restarted if you say so')
    .argument('<assignments...>', '[APP] then KEY=VALUE pairs (quote a value with spaces for your shell)')
    .option('--secret', 'store them as secrets: write-only, never shown again, never passed to a build')
    .addHelpText('after', '\nExamples:\n  slipway env set hello LOG_LEVEL=debug\n  slipway env set --app hello LOG_LEVEL=debug FEATURE_X=on\n  slipway env set --app hello --secret STRIPE_KEY=sk_live_123 --no-restart')
    .action((assignments: string[], _options: ChangeOptions, command: Command) =>
      run(async (client) => {
        const options = command.optsWithGlobals<ChangeOptions>();
        // `env set hello KEY=VALUE`: a first word without "=" names the app, as `slipway env hello` does.
        if (options.app === undefined && assignments.length > 1 && !assignments[0]!.includes('=')) {
          options.app = assignments[0]!;
          assignments = assignments.slice(1);
        }
        const pairs = assignments.map((assignment) => {
          const eq = assignment.indexOf('=');
          // Never echo what follows "=": it may be a secret.
          if (eq === 0) throw usageError('expected KEY=VALUE, got a value without a name ("=…")');
          if (eq < 0) {
            const hint = options.app === undefined && /^[a-z0-9-]{1,63}$/.test(assignment) ? ` (to name the app, use \`slipway env set ${assignment} KEY=VALUE\` or --app ${assignment})` : '';
            throw usageError(`expected KEY=VALUE, got "${assignment.slice(0, 60)}"${hint}`);
          }
          return [assignment.slice(0, eq), assignment.slice(eq + 1)] as const;
        });
        // fromEntries: every name becomes a key of the body, even one like "__proto__" (the server then refuses it).
        const vars: Record<string, string> = Object.fromEntries(pairs);
        await change(client, io, options, vars, `Set ${Object.keys(vars).join(', ')}${options.secret === true ? ' (secret)' : ''}`);
      }),
    );

  changeCommand('unset', 'remove variables; a running app is restarted if you say so')
    .argument('<keys...>', 'the variables to remove')
    .addHelpText('after', '\nExample:\n  slipway env unset --app hello LOG_LEVEL FEATURE_X')
    .action((keys: string[], _options: ChangeOptions, command: Command) =>
      run(async (client) => {
        const options = command.optsWithGlobals<ChangeOptions>();
        const vars: Record<string, null> = Object.fromEntries(keys.map((key) => [key, null]));
        await change(client, io, options, vars, `Removed ${keys.join(', ')}`);
      }),
    );

  changeCommand('import', 'set every variable of a .env file; a running app is restarted if you say so')
    .argument('<file>', 'a dotenv file ("-" reads standard input)')
    .option('--secret', 'store them all as secrets')
    .addHelpText(
      'after',
      `
The file holds KEY=VALUE lines; blank lines and # comments are skipped, an "export " prefix is
allowed, values may be 'single-quoted' (literal) or "double-quoted" (escapes \\n \\t \\" \\\\) and
span lines. \${VAR} references are not expanded. All variables are set in one change.

Examples:
  slipway env import .env --app hello
  slipway env import .env.production --app hello --secret`,
    )
    .action((file: string, _options: ChangeOptions, command: Command) =>
      run(async (client) => {
        const options = command.optsWithGlobals<ChangeOptions>();
        const text = file === '-' ? await readStdin(io) : await readFile(path.resolve(io.cwd, file), 'utf8').catch((err: NodeJS.ErrnoException) => {
          throw new CliError(`cannot read ${file}: ${err.code === 'ENOENT' ? 'no such file' : err.message}`);
        });
        let entries: Map<string, string>;
        try {
          entries = parseDotenv(text);
        } catch (err) {
          if (err instanceof DotenvError) throw new CliError(`${file}: ${err.message}`);
          throw err;
        }
        if (entries.size === 0) throw new CliError(`${file} holds no variables`);
        await change(client, io, options, Object.fromEntries(entries), `Imported ${entries.size} variable${entries.size === 1 ? '' : 's'} from ${file}${options.secret === true ? ' as secrets' : ''}`);
      }),
    );
}

/**
 * PATCHes the variables; the server then records them as pending until the app's next release.
 * A running app is restarted when asked to (`--restart`, or "yes" to the question asked on a
 * terminal), as the dashboard's "Restart to apply" does (docs/configuration-changes.md).
 */
async function change(client: ApiClient, io: CliIo, options: ChangeOptions, vars: Record<string, string | null>, done: string): Promise<void> {
  const app = await appFor(client, io, options.app);
  const body = options.secret === true ? { vars, secret: true } : { vars };
  const answer = await client.request<EnvAnswer>('PATCH', `/api/v1/deployments/${app.id}/env`, { body });
  let restart: MessageAnswer | undefined;
  let note: string;
  if (options.restart === false) {
    note = `Not restarted: the change applies at the next deploy, restart or rollback (\`slipway restart ${app.subdomain}\`).`;
  } else if (app.status !== 'running') {
    note = `${app.name} is ${app.status}, so it was not restarted: the change applies at its next deploy, restart or rollback.`;
  } else if (options.restart === true || options.json === true || (await askToRestart(io, app.name, done))) {
    if (options.json !== true) io.stdout.write(`${done} on ${app.name}. Restarting ${app.name}…\n`);
    restart = await client.request<MessageAnswer>('POST', `/api/v1/deployments/${app.id}/restart`, { timeoutMs: 120_000 });
    note = `Restarted: ${restart.message}.`;
  } else {
    note = `Pending: ${app.name} runs the old values until it restarts (\`slipway restart ${app.subdomain}\`, or --restart with the change).`;
  }
  if (options.json === true) return printJson(io.stdout, { ...answer, restarted: restart !== undefined, config_pending: restart === undefined && app.live_build_id != null });
  if (restart === undefined) io.stdout.write(`${done} on ${app.name}.\n`);
  io.stdout.write(`${note}\n`);
}

/**
 * On a terminal, asks whether to restart now (Enter says yes), as the dashboard asks. Elsewhere (a
 * script, a pipe) nobody can answer: it restarts, the CLI's documented default since Part two, so
 * scripts written for it keep working (`--no-restart` leaves the change pending).
 */
async function askToRestart(io: CliIo, name: string, done: string): Promise<boolean> {
  if (io.stdin.isTTY !== true) return true;
  const prompter = createPrompter(io, AbortSignal.timeout(10 * 60_000));
  try {
    const answer = await prompter.ask(`${done} on ${name}. Restart ${name} now to apply it? [Y/n] `);
    return /^(y|yes)?$/i.test(answer.trim());
  } finally {
    prompter.close();
  }
}

async function readStdin(io: CliIo): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of io.stdin) chunks.push(typeof chunk === 'string' ? Buffer.from(chunk) : (chunk as Buffer));
  return Buffer.concat(chunks).toString('utf8');
}
