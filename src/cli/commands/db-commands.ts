// Commands on managed databases (decisions §19): db create, ls, info, credentials, link, unlink, stop, start, rm (and the backup commands of backup-commands.ts).
import { Option, type Command } from 'commander';
import type { ApiClient } from '../api-client.js';
import { CliError } from '../cli-error.js';
import type { CliIo } from '../cli-io.js';
import { connect, currentLogin, withInterrupt, withJson, type JsonOption } from '../command-context.js';
import { runDbConnect } from '../db-connect.js';
import { findDatabase, type ManagedDatabase } from '../find-database.js';
import { ago, humanBytes, printFields, printJson, printTable } from '../output.js';
import { createPrompter } from '../prompt.js';
import { resolveApp } from '../resolve-app.js';
import { findTeam } from './team-commands.js';
import { registerDbBackupCommands } from './backup-commands.js';

interface Credentials {
  username: string;
  password: string;
  database: string;
  host: string;
  port: number;
  url: string;
}
interface Link {
  database_id: string;
  deployment_id: string;
  env: string;
  database_name: string;
  engine: string;
  status: string;
  created_at: string;
}

const run = (io: CliIo, body: (client: ApiClient, signal: AbortSignal) => Promise<void>): Promise<void> =>
  withInterrupt(io, async (signal) => body(await connect(io, signal), signal));

/** Waits (printing nothing) until a new database leaves `creating`, at most `timeoutMs`. */
async function waitCreated(client: ApiClient, id: string, signal: AbortSignal, timeoutMs: number): Promise<ManagedDatabase> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const db = await client.request<ManagedDatabase>('GET', `/api/v1/databases/${id}`);
    if (db.status !== 'creating' || Date.now() > deadline) return db;
    await new Promise((resolve, reject) => {
      const timer = setTimeout(resolve, 1000);
      signal.addEventListener('abort', () => {
        clearTimeout(timer);
        reject(signal.reason);
      }, { once: true });
    });
  }
}

function printDatabase(io: CliIo, db: ManagedDatabase, links: readonly { name: string; env: string }[]): void {
  printFields(io.stdout, [
    ['name', db.name],
    ['id', db.id],
    ['engine', `${db.engine} (${db.image})`],
    ['status', db.status === 'failed' && db.error !== null ? `failed: ${db.error}` : db.status],
    ['size', humanBytes(db.size_bytes)],
    ['host', `${db.host}:${db.port} (reachable only from linked apps)`],
    ['limits', `${db.memory_mb === null ? 'default memory' : `${db.memory_mb} MB`}, ${db.cpus === null ? 'default CPUs' : `${db.cpus} CPUs`}`],
    ['team', db.team_id ?? '-'],
    ['linked to', links.length === 0 ? '-' : links.map((l) => `${l.name} (${l.env})`).join(', ')],
    ['created', ago(db.created_at)],
  ]);
}

/** Registers `db` and its subcommands on `program`. */
export function registerDbCommands(program: Command, io: CliIo): void {
  const db = program
    .command('db')
    .description('managed databases (PostgreSQL, MySQL/MariaDB, Redis) that your apps link to')
    .addHelpText(
      'after',
      `
A database is reachable only from the apps linked to it (never from the internet nor from other
apps); a link gives the app its URL as a secret variable (DATABASE_URL unless --env) from its next
deploy or restart.

Examples:
  slipway db create main --engine postgres
  slipway db link main --app hello
  slipway restart hello
  slipway db credentials main`,
    );

  withJson(
    db
      .command('create')
      .argument('<name>', 'a DNS label: the host name linked apps reach it by')
      .addOption(new Option('-e, --engine <engine>', 'the engine').choices(['postgres', 'mysql', 'redis']).default('postgres'))
      .option('--team <team>', "create it as a team's database (team id or name; you must be its owner)")
      .option('--no-wait', 'return at once instead of waiting until it runs')
      .description('create a database; waits until it accepts connections'),
  ).action((name: string, options: JsonOption & { engine: string; team?: string; wait: boolean }) =>
    run(io, async (client, signal) => {
      const teamId = options.team === undefined ? undefined : (await findTeam(client, options.team)).id;
      let created = await client.request<ManagedDatabase>('POST', '/api/v1/databases', { body: { name, engine: options.engine, ...(teamId === undefined ? {} : { team_id: teamId }) } });
      if (options.wait) {
        if (options.json !== true) io.stderr.write(`Creating ${created.name} (${created.engine})…\n`);
        created = await waitCreated(client, created.id, signal, 300_000);
      }
      if (options.json === true) return printJson(io.stdout, created);
      if (created.status === 'failed') throw new CliError(`database ${created.name} failed to start: ${created.error ?? 'no reason given'}`);
      io.stdout.write(`Database ${created.name} is ${created.status}. Link it to an app with \`slipway db link ${created.name} --app APP\`.\n`);
    }),
  );

  withJson(db.command('ls').alias('list').description('your databases and your teams\'')).action((options: JsonOption) =>
    run(io, async (client) => {
      const list = await client.list<ManagedDatabase>('/api/v1/databases');
      if (options.json === true) return printJson(io.stdout, list);
      if (list.length === 0) return void io.stdout.write('No databases: create one with `slipway db create NAME --engine postgres`.\n');
      printTable(io.stdout, list, [
        { header: 'name', value: (d) => d.name },
        { header: 'engine', value: (d) => d.engine },
        { header: 'status', value: (d) => d.status },
        { header: 'size', value: (d) => humanBytes(d.size_bytes) },
        { header: 'created', value: (d) => ago(d.created_at) },
        { header: 'id', value: (d) => d.id },
      ]);
    }),
  );

  withJson(db.command('info').argument('<database>', 'name or id').description('a database: status, size, host and the apps linked to it')).action(
    (ref: string, options: JsonOption) =>
      run(io, async (client) => {
        const found = await findDatabase(client, ref);
        const current = await client.request<ManagedDatabase>('GET', `/api/v1/databases/${found.id}`);
        const apps = await client.list<{ id: string; name: string }>('/api/v1/deployments');
        const links: Array<{ name: string; env: string }> = [];
        for (const app of apps) {
          const appLinks = await client.request<Link[]>('GET', `/api/v1/deployments/${app.id}/databases`);
          for (const l of appLinks) if (l.database_id === current.id) links.push({ name: app.name, env: l.env });
        }
        if (options.json === true) return printJson(io.stdout, { ...current, links });
        printDatabase(io, current, links);
      }),
  );

  withJson(
    db
      .command('credentials')
      .alias('creds')
      .argument('<database>', 'name or id')
      .option('--url', 'print the URL alone')
      .description('its user, password, database and URL (every read is in the audit log)'),
  ).action((ref: string, options: JsonOption & { url?: boolean }) =>
    run(io, async (client) => {
      const found = await findDatabase(client, ref);
      const creds = await client.request<Credentials>('GET', `/api/v1/databases/${found.id}/credentials`);
      if (options.json === true) return printJson(io.stdout, creds);
      if (options.url === true) return void io.stdout.write(`${creds.url}\n`);
      printFields(io.stdout, [
        ['username', creds.username],
        ['password', creds.password],
        ['database', creds.database],
        ['host', `${creds.host}:${creds.port} (from linked apps only)`],
        ['url', creds.url],
      ]);
    }),
  );

  withJson(
    db
      .command('link')
      .argument('<database>', 'name or id')
      .requiredOption('-a, --app <app>', 'the app (name, subdomain or id)')
      .option('--env <name>', 'the secret variable that holds its URL', 'DATABASE_URL')
      .description('give an app the database: its URL as a secret variable from the next deploy or restart'),
  ).action((ref: string, options: JsonOption & { app: string; env: string }) =>
    run(io, async (client) => {
      const found = await findDatabase(client, ref);
      const app = await resolveApp(client, options.app);
      const link = await client.request<Link>('POST', `/api/v1/deployments/${app.id}/databases`, { body: { database_id: found.id, env: options.env } });
      if (options.json === true) return printJson(io.stdout, link);
      io.stdout.write(`Linked ${found.name} to ${app.name} as ${link.env}: it applies from the next deploy or restart (\`slipway restart ${app.name}\`).\n`);
    }),
  );

  withJson(
    db
      .command('unlink')
      .argument('<database>', 'name or id')
      .requiredOption('-a, --app <app>', 'the app (name, subdomain or id)')
      .description("take the database from an app: its containers lose access now, the variable goes at the next release"),
  ).action((ref: string, options: JsonOption & { app: string }) =>
    run(io, async (client) => {
      const found = await findDatabase(client, ref);
      const app = await resolveApp(client, options.app);
      await client.request('DELETE', `/api/v1/deployments/${app.id}/databases/${found.id}`);
      if (options.json === true) return printJson(io.stdout, { unlinked: found.id, app: app.id });
      io.stdout.write(`Unlinked ${found.name} from ${app.name}.\n`);
    }),
  );

  for (const [verb, done] of [['stop', 'stopped (its data is kept)'], ['start', 'running']] as const) {
    withJson(db.command(verb).argument('<database>', 'name or id').description(verb === 'stop' ? 'stop a database (its data stays)' : 'start a stopped database and wait until it runs')).action(
      (ref: string, options: JsonOption) =>
        run(io, async (client) => {
          const found = await findDatabase(client, ref);
          const result = await client.request<ManagedDatabase>('POST', `/api/v1/databases/${found.id}/${verb}`, { timeoutMs: 300_000 });
          if (options.json === true) return printJson(io.stdout, result);
          if (result.status === 'failed') throw new CliError(`database ${result.name} failed to start: ${result.error ?? 'no reason given'}`);
          io.stdout.write(`Database ${result.name} is ${result.status === 'running' || result.status === 'stopped' ? done : result.status}.\n`);
        }),
    );
  }

  db.command('connect')
    .argument('<database>', 'name or id')
    .option('-p, --port <port>', "the local port (default: the engine's own, e.g. 5432)")
    .description('reach a database from this machine: a listener on 127.0.0.1 carried to it through the API (Ctrl-C ends it)')
    .action((ref: string, options: { port?: string }) =>
      withInterrupt(io, async (signal) => {
        const login = await currentLogin(io);
        const client = await connect(io, signal);
        const found = await findDatabase(client, ref);
        if (found.status !== 'running') throw new CliError(`database ${found.name} is ${found.status}: start it first with \`slipway db start ${found.name}\``);
        const port = options.port === undefined ? found.port : Number(options.port);
        if (!Number.isInteger(port) || port < 0 || port > 65535) throw new CliError('--port must be a port number (0 to 65535)');
        await runDbConnect({
          serverUrl: login.url,
          bearer: login.bearer ?? '',
          databaseId: found.id,
          port,
          signal,
          onListening: (held) => {
            io.stdout.write(`Listening on 127.0.0.1:${held} for database ${found.name} (${found.engine}); Ctrl-C to stop.\n`);
            io.stdout.write(`Connect with host 127.0.0.1, port ${held} and the credentials of \`slipway db credentials ${found.name}\`.\n`);
          },
          onProblem: (message) => io.stderr.write(`connection not carried: ${message}\n`),
        });
      }),
    );

  withJson(
    db
      .command('rm')
      .alias('delete')
      .argument('<database>', 'name or id')
      .option('-y, --yes', 'do not ask for confirmation')
      .option('--force', 'accepted for compatibility (a deletion always unlinks the database from its apps)')
      .option('--delete-backups', 'delete its backups too (by default they are kept)')
      .description('delete a database with its data'),
  ).action((ref: string, options: JsonOption & { yes?: boolean; force?: boolean; deleteBackups?: boolean }) =>
    run(io, async (client, signal) => {
      const found = await findDatabase(client, ref);
      if (options.yes !== true) {
        const prompter = createPrompter(io, signal);
        let answer: string;
        try {
          answer = await prompter.ask(`Delete database ${found.name} and ALL its data (apps linked to it lose it)? [y/N] `);
        } catch (err) {
          if (err instanceof CliError && err.exitCode !== 1) throw err;
          answer = '';
        } finally {
          prompter.close();
        }
        if (!/^y(es)?$/i.test(answer.trim())) throw new CliError('not deleted (answer "y" to confirm, or pass --yes)');
      }
      const query = new URLSearchParams(options.deleteBackups === true ? { delete_backups: 'true' } : {}).toString();
      await client.request('DELETE', `/api/v1/databases/${found.id}${query === '' ? '' : `?${query}`}`, { timeoutMs: 120_000 });
      if (options.json === true) return printJson(io.stdout, { deleted: found.id });
      io.stdout.write(`Deleted database ${found.name}.\n`);
    }),
  );

  registerDbBackupCommands(db, io);
}
