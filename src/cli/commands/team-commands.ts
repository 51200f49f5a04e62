// Commands: teams (create, ls, rm, members ls/add/rm/role), audit, 2fa (status, setup, off) — decisions §18.
import type { Command } from 'commander';
import type { ApiClient } from '../api-client.js';
import { CliError } from '../cli-error.js';
import type { CliIo } from '../cli-io.js';
import { connect, limitOption, withInterrupt, withJson, type JsonOption, type ListOptions } from '../command-context.js';
import { ago, printJson, printTable } from '../output.js';
import { createPrompter } from '../prompt.js';

interface Team {
  id: string;
  name: string;
  created_at: string;
  role: string;
}
interface Member {
  user_id: string;
  email: string;
  role: string;
  created_at: string;
}
interface AuditEntry {
  at: string;
  actor_email: string | null;
  via: string;
  action: string;
  target_type: string;
  target_id: string | null;
  ip: string | null;
  outcome: string;
}

/** A team by id or (unique) name among the caller's teams. */
export async function findTeam(client: ApiClient, ref: string): Promise<Team> {
  const teams = await client.request<Team[]>('GET', '/api/v1/teams');
  const byId = teams.find((t) => t.id === ref.toLowerCase());
  const byName = teams.filter((t) => t.name === ref);
  const team = byId ?? (byName.length === 1 ? byName[0] : undefined);
  if (team === undefined) throw new CliError(byName.length > 1 ? `several of your teams are named "${ref}": use the id (see \`slipway teams ls\`)` : `no team "${ref}" among yours (see \`slipway teams ls\`)`);
  return team;
}

/** A member by e-mail or user id. */
async function findMember(client: ApiClient, team: Team, ref: string): Promise<Member> {
  const members = await client.request<Member[]>('GET', `/api/v1/teams/${team.id}/members`);
  const member = members.find((m) => m.user_id === ref.toLowerCase() || m.email === ref.toLowerCase());
  if (member === undefined) throw new CliError(`${ref} is not a member of ${team.name} (see \`slipway teams members ls ${team.name}\`)`);
  return member;
}

const run = (io: CliIo, body: (client: ApiClient, signal: AbortSignal) => Promise<void>): Promise<void> =>
  withInterrupt(io, async (signal) => body(await connect(io, signal), signal));

/** Registers `teams`, `audit` and `2fa` on `program`. */
export function registerTeamCommands(program: Command, io: CliIo): void {
  const teams = program
    .command('teams')
    .description('teams: share deployments with members as viewer, developer or owner')
    .addHelpText('after', '\nExamples:\n  slipway teams create acme\n  slipway teams members add acme dev@example.com --role developer\n  slipway create --team acme …\n  slipway teams ls');

  withJson(teams.command('ls').alias('list').description('the teams you belong to, with your role')).action((options: JsonOption) =>
    run(io, async (client) => {
      const list = await client.request<Team[]>('GET', '/api/v1/teams');
      if (options.json === true) return printJson(io.stdout, list);
      if (list.length === 0) return void io.stdout.write('No teams: create one with `slipway teams create NAME`.\n');
      printTable(io.stdout, list, [
        { header: 'id', value: (t) => t.id },
        { header: 'name', value: (t) => t.name },
        { header: 'your role', value: (t) => t.role },
        { header: 'created', value: (t) => ago(t.created_at) },
      ]);
    }),
  );

  withJson(teams.command('create').argument('<name>', 'the team name').description('create a team (you are its owner)')).action((name: string, options: JsonOption) =>
    run(io, async (client) => {
      const team = await client.request<Team>('POST', '/api/v1/teams', { body: { name } });
      if (options.json === true) return printJson(io.stdout, team);
      io.stdout.write(`Created team ${team.name} (${team.id}); you are its owner.\n`);
    }),
  );

  withJson(teams.command('rm').argument('<team>', 'team id or name').description('delete a team (owners; only when it holds no deployment)')).action((ref: string, options: JsonOption) =>
    run(io, async (client) => {
      const team = await findTeam(client, ref);
      await client.request('DELETE', `/api/v1/teams/${team.id}`);
      if (options.json === true) return printJson(io.stdout, { deleted: team.id });
      io.stdout.write(`Deleted team ${team.name}.\n`);
    }),
  );

  const members = teams.command('members').description("a team's members and their roles");
  withJson(members.command('ls').alias('list').argument('<team>', 'team id or name').description('list the members')).action((ref: string, options: JsonOption) =>
    run(io, async (client) => {
      const team = await findTeam(client, ref);
      const list = await client.request<Member[]>('GET', `/api/v1/teams/${team.id}/members`);
      if (options.json === true) return printJson(io.stdout, list);
      printTable(io.stdout, list, [
        { header: 'email', value: (m) => m.email },
        { header: 'role', value: (m) => m.role },
        { header: 'since', value: (m) => ago(m.created_at) },
      ]);
    }),
  );
  withJson(
    members
      .command('add')
      .argument('<team>', 'team id or name')
      .argument('<email>', "the user's e-mail (an administrator creates users)")
      .option('--role <role>', 'viewer, developer or owner', 'viewer')
      .description('add a user to the team (owners)'),
  ).action((ref: string, email: string, options: JsonOption & { role: string }) =>
    run(io, async (client) => {
      const team = await findTeam(client, ref);
      const member = await client.request<Member>('POST', `/api/v1/teams/${team.id}/members`, { body: { email, role: options.role } });
      if (options.json === true) return printJson(io.stdout, member);
      io.stdout.write(`Added ${member.email} to ${team.name} as ${member.role}.\n`);
    }),
  );
  withJson(members.command('rm').argument('<team>', 'team id or name').argument('<member>', 'e-mail or user id').description('remove a member (owners; anyone may leave)')).action(
    (ref: string, who: string, options: JsonOption) =>
      run(io, async (client) => {
        const team = await findTeam(client, ref);
        const member = await findMember(client, team, who);
        await client.request('DELETE', `/api/v1/teams/${team.id}/members/${member.user_id}`);
        if (options.json === true) return printJson(io.stdout, { removed: member.user_id });
        io.stdout.write(`Removed ${member.email} from ${team.name}.\n`);
      }),
  );
  withJson(
    members.command('role').argument('<team>', 'team id or name').argument('<member>', 'e-mail or user id').argument('<role>', 'viewer, developer or owner').description("change a member's role (owners)"),
  ).action((ref: string, who: string, role: string, options: JsonOption) =>
    run(io, async (client) => {
      const team = await findTeam(client, ref);
      const member = await findMember(client, team, who);
      const changed = await client.request<Member>('PATCH', `/api/v1/teams/${team.id}/members/${member.user_id}`, { body: { role } });
      if (options.json === true) return printJson(io.stdout, changed);
      io.stdout.write(`${changed.email} is now ${changed.role} in ${team.name}.\n`);
    }),
  );

  withJson(
    program
      .command('audit')
      .description('the audit log: your actions, and those in teams you own (an administrator: all), newest first')
      .option('--team <team>', 'only entries of this team (id or name)')
      .option('--target <id>', 'only entries about this object (a deployment, build, key, user … id)')
      .option('--limit <n>', 'at most N entries (default 50)', limitOption),
  )
    .addHelpText('after', '\nExamples:\n  slipway audit\n  slipway audit --team acme --limit 200\n  slipway audit --target 0b6f6f0e-… --json')
    .action((options: ListOptions & { team?: string; target?: string }) =>
      run(io, async (client) => {
        const query = new URLSearchParams();
        if (options.team !== undefined) query.set('team_id', (await findTeam(client, options.team)).id);
        if (options.target !== undefined) query.set('target_id', options.target);
        const list = await client.list<AuditEntry>(`/api/v1/audit${query.size > 0 ? `?${query.toString()}` : ''}`, { max: options.limit ?? 50 });
        if (options.json === true) return printJson(io.stdout, list);
        printTable(io.stdout, list, [
          { header: 'when', value: (e) => ago(e.at) },
          { header: 'who', value: (e) => e.actor_email ?? '-' },
          { header: 'via', value: (e) => e.via },
          { header: 'action', value: (e) => (e.outcome === 'success' ? e.action : `${e.action} (${e.outcome})`) },
          { header: 'target', value: (e) => `${e.target_type} ${e.target_id ?? ''}`.trim() },
          { header: 'from', value: (e) => e.ip ?? '-' },
        ]);
      }),
    );

  const twoFactor = program.command('2fa').description('two-factor login (TOTP: an authenticator app such as Aegis, Google Authenticator or 1Password)');
  withJson(twoFactor.command('status').description('whether two-factor login is on')).action((options: JsonOption) =>
    run(io, async (client) => {
      const state = await client.request<{ enabled: boolean }>('GET', '/api/v1/users/me/2fa');
      if (options.json === true) return printJson(io.stdout, state);
      io.stdout.write(`Two-factor login is ${state.enabled ? 'on' : 'off'}.\n`);
    }),
  );
  twoFactor
    .command('setup')
    .description('turn two-factor login on: add the secret to your app, then enter a code it shows')
    .addHelpText('after', '\nThe dashboard shows the same secret as a QR code (Account page).\n\nExample:\n  slipway 2fa setup')
    .action(() =>
      run(io, async (client, signal) => {
        const setup = await client.request<{ secret: string; otpauth_url: string }>('POST', '/api/v1/users/me/2fa');
        io.stdout.write(`Secret: ${setup.secret}\nURL:    ${setup.otpauth_url}\n`);
        const prompter = createPrompter(io, signal);
        try {
          const code = (await prompter.ask('Code from your app: ')).trim();
          await client.request('POST', '/api/v1/users/me/2fa/confirm', { body: { code } });
        } finally {
          prompter.close();
        }
        io.stdout.write('Two-factor login is on: `slipway login` will ask for a code.\n');
      }),
    );
  twoFactor
    .command('off')
    .description('turn two-factor login off (asks for a current code)')
    .action(() =>
      run(io, async (client, signal) => {
        const prompter = createPrompter(io, signal);
        try {
          const code = (await prompter.ask('Code from your app: ')).trim();
          await client.request('DELETE', '/api/v1/users/me/2fa', { body: { code } });
        } finally {
          prompter.close();
        }
        io.stdout.write('Two-factor login is off.\n');
      }),
    );
}
