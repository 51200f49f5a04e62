// Commands: notify ls, add, rm, test, deliveries — notification channels (decisions §23).
import type { Command } from 'commander';
import type { ApiClient } from '../api-client.js';
import { CliError } from '../cli-error.js';
import type { CliIo } from '../cli-io.js';
import { connect, withInterrupt, withJson, type JsonOption } from '../command-context.js';
import { ago, printJson, printTable } from '../output.js';
import { findTeam } from './team-commands.js';

interface Channel {
  id: string;
  name: string;
  type: string;
  url: string | null;
  email: string | null;
  events: string[];
  team_id: string | null;
  created_at: string;
  secret?: string;
}
interface Delivery {
  id: string;
  event: string;
  at: string;
  outcome: string;
  attempts: number;
  status_code: number | null;
  error: string | null;
}

const EVENTS = ['deploy.succeeded', 'deploy.failed', 'app.crashed', 'backup.failed', 'backup.verified', 'job.failed', 'certificate.failed', 'node.down'];

/** A channel by id or (unique) name among those the caller sees. */
async function findChannel(client: ApiClient, ref: string): Promise<Channel> {
  const channels = await client.request<Channel[]>('GET', '/api/v1/notification-channels');
  const byId = channels.find((c) => c.id === ref.toLowerCase());
  const byName = channels.filter((c) => c.name === ref);
  const channel = byId ?? (byName.length === 1 ? byName[0] : undefined);
  if (channel === undefined) throw new CliError(byName.length > 1 ? `several channels are named "${ref}": use the id (see \`slipway notify ls\`)` : `no notification channel "${ref}" (see \`slipway notify ls\`)`);
  return channel;
}

const run = (io: CliIo, body: (client: ApiClient) => Promise<void>): Promise<void> => withInterrupt(io, async (signal) => body(await connect(io, signal)));

/** Registers `notify` on `program`. */
export function registerNotifyCommands(program: Command, io: CliIo): void {
  const notify = program
    .command('notify')
    .description('notification channels: Slack, Discord, a signed webhook or e-mail, told of deploys, crash loops, backups, jobs, certificates and nodes')
    .addHelpText(
      'after',
      `\nEvents: ${EVENTS.join(', ')}\n\nExamples:\n  slipway notify add ops --type slack --url https://hooks.slack.com/services/… --events deploy.failed,app.crashed\n  slipway notify add hooks --type webhook --url https://example.com/slipway --events all\n  slipway notify add oncall --type email --email oncall@example.com --events backup.failed --team acme\n  slipway notify test ops\n  slipway notify deliveries ops`,
    );

  withJson(notify.command('ls').alias('list').description('your channels and your teams\'')).action((options: JsonOption) =>
    run(io, async (client) => {
      const list = await client.request<Channel[]>('GET', '/api/v1/notification-channels');
      if (options.json === true) return printJson(io.stdout, list);
      if (list.length === 0) return void io.stdout.write('No notification channels: add one with `slipway notify add NAME --type slack --url URL --events …`.\n');
      printTable(io.stdout, list, [
        { header: 'id', value: (c) => c.id },
        { header: 'name', value: (c) => c.name },
        { header: 'type', value: (c) => c.type },
        { header: 'to', value: (c) => c.url ?? c.email ?? '' },
        { header: 'events', value: (c) => c.events.join(',') },
        { header: 'team', value: (c) => (c.team_id === null ? '' : c.team_id.slice(0, 8)) },
      ]);
    }),
  );

  withJson(
    notify
      .command('add')
      .argument('<name>', 'a name for the channel')
      .requiredOption('--type <type>', 'slack, discord, webhook or email')
      .option('--url <url>', "the incoming-webhook URL (slack, discord) or your endpoint (webhook)")
      .option('--email <address>', 'the recipient (email)')
      .requiredOption('--events <list>', `comma-separated events, or "all"`)
      .option('--team <team>', "a team's channel (its events), by team id or name")
      .description('add a channel (a webhook channel prints its signing secret once)'),
  ).action((name: string, options: JsonOption & { type: string; url?: string; email?: string; events: string; team?: string }) =>
    run(io, async (client) => {
      const events = options.events === 'all' ? EVENTS : options.events.split(',').map((e) => e.trim()).filter((e) => e !== '');
      const teamId = options.team === undefined ? undefined : (await findTeam(client, options.team)).id;
      const body = { name, type: options.type, events, ...(options.url === undefined ? {} : { url: options.url }), ...(options.email === undefined ? {} : { email: options.email }), ...(teamId === undefined ? {} : { team_id: teamId }) };
      const channel = await client.request<Channel>('POST', '/api/v1/notification-channels', { body });
      if (options.json === true) return printJson(io.stdout, channel);
      io.stdout.write(`Added ${channel.type} channel ${channel.name} (${channel.id}) for ${channel.events.join(', ')}.\n`);
      if (channel.secret !== undefined) io.stdout.write(`Signing secret (shown once; deliveries carry X-Slipway-Signature-256: sha256=HMAC of the body):\n  ${channel.secret}\n`);
    }),
  );

  withJson(notify.command('rm').argument('<channel>', 'channel id or name').description('delete a channel and its delivery log')).action((ref: string, options: JsonOption) =>
    run(io, async (client) => {
      const channel = await findChannel(client, ref);
      await client.request('DELETE', `/api/v1/notification-channels/${channel.id}`);
      if (options.json === true) return printJson(io.stdout, { deleted: channel.id });
      io.stdout.write(`Deleted channel ${channel.name}.\n`);
    }),
  );

  withJson(notify.command('test').argument('<channel>', 'channel id or name').description('send a test message now and say how it went')).action((ref: string, options: JsonOption) =>
    run(io, async (client) => {
      const channel = await findChannel(client, ref);
      const result = await client.request<{ ok: boolean; status_code?: number; error?: string }>('POST', `/api/v1/notification-channels/${channel.id}/test`);
      if (options.json === true) printJson(io.stdout, result);
      else if (result.ok) io.stdout.write(`Sent to ${channel.name}${result.status_code === undefined ? '' : ` (answered ${result.status_code})`}.\n`);
      if (!result.ok) throw new CliError(`the test message to ${channel.name} failed: ${result.error ?? `status ${result.status_code ?? '?'}`}`);
    }),
  );

  withJson(notify.command('deliveries').argument('<channel>', 'channel id or name').description('its last messages, newest first')).action((ref: string, options: JsonOption) =>
    run(io, async (client) => {
      const channel = await findChannel(client, ref);
      const list = await client.request<Delivery[]>('GET', `/api/v1/notification-channels/${channel.id}/deliveries`);
      if (options.json === true) return printJson(io.stdout, list);
      if (list.length === 0) return void io.stdout.write(`No messages to ${channel.name} yet (\`slipway notify test ${channel.name}\` sends one without recording it).\n`);
      printTable(io.stdout, list, [
        { header: 'when', value: (d) => ago(d.at) },
        { header: 'event', value: (d) => d.event },
        { header: 'outcome', value: (d) => d.outcome },
        { header: 'attempts', value: (d) => String(d.attempts) },
        { header: 'status', value: (d) => (d.status_code === null ? '' : String(d.status_code)) },
        { header: 'error', value: (d) => d.error ?? '' },
      ]);
    }),
  );
}
