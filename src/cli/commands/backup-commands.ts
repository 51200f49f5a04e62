// Commands on backups (decisions §20): db backups, backup, restore, backup-schedule, and destinations ls/add/test/rm.
import { InvalidArgumentError, Option, type Command } from 'commander';
import type { ApiClient } from '../api-client.js';
import { CliError } from '../cli-error.js';
import type { CliIo } from '../cli-io.js';
import { connect, withInterrupt, withJson, type JsonOption } from '../command-context.js';
import { confirmOrRefuse } from '../confirm.js';
import { ago, commandWord, humanBytes, printFields, printJson, printTable, shortId } from '../output.js';
import { createPrompter } from '../prompt.js';
import { findDatabase } from '../find-database.js';
import { findTeam } from './team-commands.js';

interface Backup {
  id: string;
  database_id: string;
  destination_id: string;
  status: 'running' | 'succeeded' | 'verified' | 'failed';
  trigger: string;
  size_bytes: number | null;
  sha256: string | null;
  location: string;
  started_at: string;
  finished_at: string | null;
  verified_at: string | null;
  error: string | null;
}
interface Restore {
  id: string;
  database_id: string;
  backup_id: string;
  target_database_id: string;
  safety_backup_id: string | null;
  status: 'running' | 'succeeded' | 'failed';
  error: string | null;
}
interface Destination {
  id: string;
  name: string;
  type: string;
  team_id: string | null;
  endpoint?: string;
  bucket?: string;
  prefix?: string;
  created_at: string;
}

const run = (io: CliIo, body: (client: ApiClient, signal: AbortSignal) => Promise<void>): Promise<void> =>
  withInterrupt(io, async (signal) => body(await connect(io, signal), signal));

/** Waiting options: how long at most (seconds), 0 = do not wait. */
function timeoutOption(raw: string): number {
  const value = Number(raw);
  if (!/^\d{1,7}$/.test(raw)) throw new InvalidArgumentError('expected a whole number of seconds (0: do not wait)');
  return value;
}

const pause = (ms: number, signal: AbortSignal): Promise<void> =>
  new Promise((resolve, reject) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener('abort', () => {
      clearTimeout(timer);
      reject(signal.reason);
    }, { once: true });
  });

/** Polls `path` until `done` holds or `timeoutSeconds` pass, telling each change of `phase` on stderr; resolves with the last answer and whether it ended. */
async function follow<T>(client: ApiClient, io: CliIo, path: string, options: { done: (x: T) => boolean; phase: (x: T) => string; timeoutSeconds: number; quiet: boolean; signal: AbortSignal }): Promise<{ value: T; ended: boolean }> {
  const deadline = Date.now() + options.timeoutSeconds * 1000;
  let told = '';
  for (;;) {
    const value = await client.request<T>('GET', path);
    const phase = options.phase(value);
    if (!options.quiet && phase !== told) io.stderr.write(`${phase}…\n`);
    told = phase;
    if (options.done(value)) return { value, ended: true };
    if (Date.now() >= deadline) return { value, ended: false };
    await pause(1000, options.signal);
  }
}

/** A destination by id or (unique) name among those the caller sees. */
async function findDestination(client: ApiClient, ref: string): Promise<Destination> {
  const all = await client.list<Destination>('/api/v1/backup-destinations');
  const byId = all.find((d) => d.id === ref.toLowerCase());
  const byName = all.filter((d) => d.name === ref.trim());
  const found = byId ?? (byName.length === 1 ? byName[0] : undefined);
  if (found === undefined) throw new CliError(byName.length > 1 ? `several destinations are named "${ref}": use the id (see \`slipway destinations ls\`)` : `no backup destination "${ref}" (see \`slipway destinations ls\`)`);
  return found;
}

/** A backup of `databaseId` by id or by a unique prefix of its id (as `slipway db backups` shows it). */
async function findBackup(client: ApiClient, databaseId: string, ref: string, databaseName: string): Promise<Backup> {
  const all = await client.list<Backup>(`/api/v1/databases/${databaseId}/backups`);
  const matches = all.filter((b) => b.id === ref.toLowerCase() || b.id.startsWith(ref.toLowerCase()));
  if (matches.length === 1) return matches[0]!;
  throw new CliError(matches.length > 1 ? `several backups of ${databaseName} start with "${ref}": give more of the id` : `no backup "${ref}" of database ${databaseName} (see \`slipway db backups ${databaseName}\`)`);
}

const describeStatus = (b: Backup): string => (b.status === 'failed' ? `failed: ${b.error ?? 'no reason given'}` : b.status);

/** Registers `db backups`, `db backup`, `db restore` and `db backup-schedule` on the `db` command. */
export function registerDbBackupCommands(db: Command, io: CliIo): void {
  withJson(db.command('backups').argument('<database>', 'name or id').description('its backups, newest first: verified means seen to restore')).action((ref: string, options: JsonOption) =>
    run(io, async (client) => {
      const found = await findDatabase(client, ref);
      const list = await client.list<Backup>(`/api/v1/databases/${found.id}/backups`);
      if (options.json === true) return printJson(io.stdout, list);
      if (list.length === 0) return void io.stdout.write(`No backups of ${found.name}: take one with \`slipway db backup ${found.name}\`.\n`);
      printTable(io.stdout, list, [
        { header: 'id', value: (b) => shortId(b.id) },
        { header: 'status', value: (b) => b.status },
        { header: 'trigger', value: (b) => b.trigger },
        { header: 'size', value: (b) => (b.size_bytes === null ? '-' : humanBytes(b.size_bytes)) },
        { header: 'started', value: (b) => ago(b.started_at) },
        { header: 'error', value: (b) => b.error ?? '' },
      ]);
    }),
  );

  withJson(
    db
      .command('backup')
      .argument('<database>', 'name or id')
      .option('-d, --destination <destination>', "the destination (name or id; default: the schedule's)")
      .option('--timeout <seconds>', 'wait at most this long for it to be verified (0: do not wait)', timeoutOption, 1800)
      .description('take a backup now and wait until it is verified by a restore (or failed)'),
  ).action((ref: string, options: JsonOption & { destination?: string; timeout: number }) =>
    run(io, async (client, signal) => {
      const found = await findDatabase(client, ref);
      const destinationId = options.destination === undefined ? undefined : (await findDestination(client, options.destination)).id;
      const started = await client.request<Backup>('POST', `/api/v1/databases/${found.id}/backups`, { body: destinationId === undefined ? {} : { destination_id: destinationId } });
      const quiet = options.json === true;
      if (!quiet) io.stderr.write(`Backup ${shortId(started.id)} of ${found.name} started.\n`);
      const phases: Record<Backup['status'], string> = { running: 'Dumping and uploading', succeeded: 'Uploaded; verifying by a restore into a throwaway container', verified: 'Verified', failed: 'Failed' };
      const { value, ended } =
        options.timeout === 0
          ? { value: started, ended: false }
          : await follow<Backup>(client, io, `/api/v1/databases/${found.id}/backups/${started.id}`, { done: (b) => b.status === 'verified' || b.status === 'failed', phase: (b) => phases[b.status], timeoutSeconds: options.timeout, quiet, signal });
      if (options.json === true) {
        printJson(io.stdout, value);
      } else if (ended && value.status === 'verified') {
        io.stdout.write(`Backup ${shortId(value.id)} of ${found.name} is verified (${humanBytes(value.size_bytes ?? 0)}, restored and checked).\n`);
      } else if (!ended) {
        io.stdout.write(`Backup ${shortId(value.id)} of ${found.name} is ${value.status}; follow it with \`slipway db backups ${found.name}\`.\n`);
      }
      if (value.status === 'failed') throw new CliError(`backup ${shortId(value.id)} of ${found.name} ${describeStatus(value)}`);
      if (!ended && options.timeout > 0) throw new CliError(`backup ${shortId(value.id)} did not end within ${options.timeout} s (it goes on on the server)`);
    }),
  );

  withJson(
    db
      .command('restore')
      .argument('<database>', 'name or id')
      .option('-b, --backup <id>', 'the backup (its id, or the start of it as `slipway db backups` shows it)')
      .option('--at <time>', 'PostgreSQL with point-in-time recovery: the moment to recover to (ISO 8601, e.g. 2026-11-28T21:05:00Z); needs --into')
      .option('--into <name>', 'restore into a new database of this name instead of replacing the data')
      .option('-y, --yes', 'do not ask for confirmation')
      .option('--timeout <seconds>', 'wait at most this long for it to end (0: do not wait)', timeoutOption, 3600)
      .description("restore a backup: in place (a safety backup first; the data is replaced; linked apps restart) or --into a new database; or --at a moment --into a new database"),
  ).action((ref: string, options: JsonOption & { backup?: string; at?: string; into?: string; yes?: boolean; timeout: number }) =>
    run(io, async (client, signal) => {
      if ((options.backup === undefined) === (options.at === undefined)) throw new CliError('name what to restore: --backup ID, or --at TIME --into NEW (point in time)');
      if (options.at !== undefined && options.into === undefined) throw new CliError('a point-in-time restore goes into a new database: add --into NAME');
      const found = await findDatabase(client, ref);
      // `what`: what the messages name; `replaced`: the in-place question's words for it.
      let what: string;
      let replaced = '';
      let body: Record<string, string>;
      if (options.at !== undefined) {
        what = `${found.name} as it was at ${options.at}`;
        body = { at: options.at, into: options.into as string };
      } else {
        const backup = await findBackup(client, found.id, options.backup as string, found.name);
        if (backup.status !== 'verified' && backup.status !== 'succeeded') throw new CliError(`backup ${shortId(backup.id)} is ${describeStatus(backup)}: it cannot be restored`);
        const taken = new Date(backup.started_at).toISOString().replace('T', ' ').replace(/\.\d+Z$/, ' UTC');
        what = `backup ${shortId(backup.id)}`;
        replaced = `backup ${shortId(backup.id)} taken ${taken}`;
        if (options.into !== undefined) what = `backup ${shortId(backup.id)} of ${found.name} taken ${taken}`;
        body = { backup_id: backup.id, ...(options.into === undefined ? {} : { into: options.into }) };
      }
      if (options.yes !== true) {
        const question =
          options.into === undefined
            ? `Replace ALL the data of database ${found.name} with ${replaced}? A safety backup of the current data is taken first; apps linked to it restart. [y/N] `
            : `Restore ${what} into a new database ${options.into}? [y/N] `;
        await confirmOrRefuse(io, signal, question, 'not restored (answer "y" to confirm, or pass --yes)');
      }
      const started = await client.request<Restore>('POST', `/api/v1/databases/${found.id}/restore`, { body });
      const quiet = options.json === true;
      const { value, ended } =
        options.timeout === 0
          ? { value: started, ended: false }
          : await follow<Restore>(client, io, `/api/v1/databases/${found.id}/restores/${started.id}`, {
              done: (r) => r.status !== 'running',
              phase: (r) => (r.status === 'running' ? (r.safety_backup_id === null && options.into === undefined ? 'Checking the backup' : 'Restoring') : r.status === 'succeeded' ? 'Restored' : 'Failed'),
              timeoutSeconds: options.timeout,
              quiet,
              signal,
            });
      if (options.json === true) printJson(io.stdout, value);
      if (value.status === 'failed') throw new CliError(`restore of ${what} failed: ${value.error ?? 'no reason given'}`);
      if (!ended) {
        if (!quiet) io.stdout.write(`Restore ${shortId(value.id)} is ${value.status}.\n`);
        if (options.timeout > 0) throw new CliError(`the restore did not end within ${options.timeout} s (it goes on on the server)`);
        return;
      }
      if (quiet) return;
      io.stdout.write(
        options.into === undefined
          ? `Restored ${what} into ${found.name}${value.safety_backup_id === null ? '' : ` (the data before it is in backup ${shortId(value.safety_backup_id)})`}.\n`
          : `Restored ${what} into the new database ${options.into}.\n`,
      );
    }),
  );

  withJson(
    db
      .command('backup-schedule')
      .argument('<database>', 'name or id')
      .option('-s, --schedule <cron>', 'a cron expression in UTC, e.g. "0 3 * * *" (every day at 03:00)')
      .option('-d, --destination <destination>', 'where the backups go (name or id)')
      .option('-k, --keep <n>', 'verified backups kept, 1 to 365 (default 7); older ones are deleted from the destination')
      .option('--off', 'remove the schedule (its backups stay)')
      .option('--pitr', 'PostgreSQL: stream the write-ahead log too, for point-in-time recovery (db restore --at)')
      .option('--no-pitr', 'stop streaming the write-ahead log')
      .description('show, set or remove its backup schedule'),
  ).action((ref: string, options: JsonOption & { schedule?: string; destination?: string; keep?: string; off?: boolean; pitr?: boolean }) =>
    run(io, async (client) => {
      const found = await findDatabase(client, ref);
      type WithBackup = { backup?: { schedule: string; destination_id: string; keep: number; pitr: boolean } | null };
      let current: WithBackup;
      if (options.off === true) {
        current = await client.request<WithBackup>('PATCH', `/api/v1/databases/${found.id}`, { body: { backup: null } });
      } else if (options.schedule !== undefined || options.destination !== undefined || options.keep !== undefined || options.pitr !== undefined) {
        if (options.schedule === undefined || options.destination === undefined) throw new CliError('set a schedule with both --schedule CRON and --destination DEST (and --keep N)');
        const keep = options.keep === undefined ? undefined : Number(options.keep);
        const destination = await findDestination(client, options.destination);
        current = await client.request<WithBackup>('PATCH', `/api/v1/databases/${found.id}`, {
          body: { backup: { schedule: options.schedule, destination_id: destination.id, ...(keep === undefined ? {} : { keep }), ...(options.pitr === undefined ? {} : { pitr: options.pitr }) } },
        });
      } else {
        current = await client.request<WithBackup>('GET', `/api/v1/databases/${found.id}`);
      }
      const schedule = current.backup ?? null;
      if (options.json === true) return printJson(io.stdout, schedule);
      if (schedule === null) return void io.stdout.write(`${found.name} has no backup schedule${options.off === true ? ' now' : ''}: set one with \`slipway db backup-schedule ${found.name} --schedule "0 3 * * *" --destination DEST\`.\n`);
      const destination = (await client.list<Destination>('/api/v1/backup-destinations')).find((d) => d.id === schedule.destination_id);
      printFields(io.stdout, [
        ['schedule', `${schedule.schedule} (UTC)`],
        ['destination', destination === undefined ? schedule.destination_id : destination.name],
        ['keep', `${schedule.keep} verified backups`],
        ['point in time', schedule.pitr ? 'on (slipway db restore --at TIME --into NEW)' : 'off'],
      ]);
    }),
  );
}

/** Registers `destinations` (ls, add, test, rm) on `program`. */
export function registerDestinationCommands(program: Command, io: CliIo): void {
  const destinations = program
    .command('destinations')
    .alias('destination')
    .description('backup destinations: an S3-compatible bucket, or a directory of this server (local)')
    .addHelpText(
      'after',
      `
The secret access key is read from stdin (or asked for), never from the command line.

Examples:
  slipway destinations add offsite --type s3 --endpoint https://s3.eu-west-1.amazonaws.com --region eu-west-1 --bucket my-backups --access-key-id AKIA…
  slipway destinations add here --type local
  slipway destinations test offsite
  slipway db backup-schedule main --schedule "0 3 * * *" --destination offsite --keep 14`,
    );

  withJson(destinations.command('ls').alias('list').description("your destinations and your teams'")).action((options: JsonOption) =>
    run(io, async (client) => {
      const list = await client.list<Destination>('/api/v1/backup-destinations');
      if (options.json === true) return printJson(io.stdout, list);
      if (list.length === 0) return void io.stdout.write('No backup destinations: add one with `slipway destinations add NAME --type s3 …` (or --type local).\n');
      printTable(io.stdout, list, [
        { header: 'name', value: (d) => d.name },
        { header: 'type', value: (d) => d.type },
        { header: 'where', value: (d) => (d.type === 's3' ? `${d.endpoint ?? ''}/${d.bucket ?? ''}/${d.prefix ?? ''}` : 'this server') },
        { header: 'created', value: (d) => ago(d.created_at) },
        { header: 'id', value: (d) => d.id },
      ]);
    }),
  );

  withJson(
    destinations
      .command('add')
      .argument('<name>', 'its name')
      .addOption(new Option('-t, --type <type>', 'the kind').choices(['s3', 'local']).default('s3'))
      .option('--endpoint <url>', 'S3: the endpoint URL')
      .option('--region <region>', 'S3: the region', 'us-east-1')
      .option('--bucket <bucket>', 'S3: the bucket')
      .option('--prefix <prefix>', 'S3: a prefix for every object')
      .option('--access-key-id <id>', 'S3: the access key id')
      .option('--path-style', 'S3: path-style addressing (most self-hosted servers)')
      .option('--team <team>', "a team's destination (team id or name; you must be its owner)")
      .description('add a destination (S3: the secret access key is read from stdin)'),
  ).action((name: string, options: JsonOption & { type: string; endpoint?: string; region: string; bucket?: string; prefix?: string; accessKeyId?: string; pathStyle?: boolean; team?: string }) =>
    run(io, async (client, signal) => {
      const teamId = options.team === undefined ? undefined : (await findTeam(client, options.team)).id;
      const body: Record<string, unknown> = { name, type: options.type, ...(teamId === undefined ? {} : { team_id: teamId }) };
      if (options.type === 's3') {
        if (options.endpoint === undefined || options.bucket === undefined || options.accessKeyId === undefined) throw new CliError('an s3 destination needs --endpoint, --bucket and --access-key-id');
        const prompter = createPrompter(io, signal);
        let secret: string;
        try {
          secret = (await prompter.ask('Secret access key: ', { secret: true })).trim();
        } finally {
          prompter.close();
        }
        if (secret === '') throw new CliError('no secret access key given (type it, or pipe it on stdin)');
        Object.assign(body, { endpoint: options.endpoint, region: options.region, bucket: options.bucket, access_key_id: options.accessKeyId, secret_access_key: secret, force_path_style: options.pathStyle === true, ...(options.prefix === undefined ? {} : { prefix: options.prefix }) });
      }
      const created = await client.request<Destination>('POST', '/api/v1/backup-destinations', { body });
      if (options.json === true) return printJson(io.stdout, created);
      io.stdout.write(`Added destination ${created.name} (${created.type}). Check it with \`slipway destinations test ${commandWord(created.name)}\`.\n`);
    }),
  );

  withJson(destinations.command('test').argument('<destination>', 'name or id').description('write, read back and delete a probe object: names the step that fails')).action((ref: string, options: JsonOption) =>
    run(io, async (client) => {
      const found = await findDestination(client, ref);
      const result = await client.request<{ ok: boolean; step?: string; message?: string }>('POST', `/api/v1/backup-destinations/${found.id}/test`, { timeoutMs: 60_000 });
      if (options.json === true) printJson(io.stdout, result);
      if (!result.ok) throw new CliError(`destination ${found.name} failed at ${result.step ?? 'an unknown step'}: ${result.message ?? ''}`);
      if (options.json !== true) io.stdout.write(`Destination ${found.name} works: a probe object was written, read back and deleted.\n`);
    }),
  );

  withJson(destinations.command('rm').alias('remove').argument('<destination>', 'name or id').option('-y, --yes', 'do not ask for confirmation').description('remove a destination (the objects in it stay)')).action(
    (ref: string, options: JsonOption & { yes?: boolean }) =>
      run(io, async (client, signal) => {
        const found = await findDestination(client, ref);
        if (options.yes !== true) await confirmOrRefuse(io, signal, `Remove destination ${found.name}? Its objects stay where they are. [y/N] `, 'not removed (answer "y" to confirm, or pass --yes)');
        await client.request('DELETE', `/api/v1/backup-destinations/${found.id}`);
        if (options.json === true) return printJson(io.stdout, { removed: found.id });
        io.stdout.write(`Removed destination ${found.name}.\n`);
      }),
  );
}
