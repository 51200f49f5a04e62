// Command: create — a deployment built from a git repository, deployed at once (unless --no-deploy).
import { findTeam } from './team-commands.js';
import fs from 'node:fs';
import path from 'node:path';
import type { Command } from 'commander';
import type { Build, Deployment } from '../api-types.js';
import { CliError, usageError } from '../cli-error.js';
import type { CliIo } from '../cli-io.js';
import { connect, withInterrupt, withJson, type JsonOption } from '../command-context.js';
import { printJson } from '../output.js';
import { followBuild, slugify } from './deploy-command.js';

interface CreateOptions extends JsonOption {
  git?: string;
  branch?: string;
  name?: string;
  subdomain?: string;
  dockerfile?: string;
  compose?: string;
  team?: string;
  /** False with --no-deploy. */
  deploy: boolean;
}

/** Registers `create` on `program`. */
export function registerCreateCommand(program: Command, io: CliIo): void {
  withJson(
    program
      .command('create')
      .description('create an app built from a git repository, and deploy it')
      .requiredOption('--git <url>', 'the repository (https://, http://, git://, ssh:// or user@host:path)')
      .option('--branch <branch>', "the branch to build (default: the repository's default branch)")
      .option('--name <name>', 'app name (default: the repository name)')
      .option('--subdomain <label>', 'subdomain (default: a slug of the name)')
      .option('--dockerfile <path>', 'Dockerfile path inside the repository (default: Dockerfile)')
      .option('--compose <path>', 'build and run the services of this compose file instead of a Dockerfile (docs/compose.md)')
      .option('--team <team>', "create it as a team's app (team id or name; you must be its owner)")
      .option('--no-deploy', 'only create the app (deploy it later with `slipway deploy APP`, or from the dashboard)'),
  )
    .addHelpText(
      'after',
      `
The app is deployed at once and its build log followed, like \`slipway deploy\`; refer to it
later by its name or subdomain (nothing is written to the current folder). Deploy its branch's
latest commit again with \`slipway deploy APP\`.

Examples:
  slipway create --git https://github.com/example/hello.git
  slipway create --git https://git.example.com/team/api.git --branch main --subdomain api
  slipway create --git https://git.example.com/team/api.git --no-deploy --json
  slipway create --git https://git.example.com/team/shop.git --compose compose.yaml
  slipway deploy api`,
    )
    .action((options: CreateOptions) => withInterrupt(io, (signal) => create(io, options, signal)));
}

/** True when `url` is no URL (no scheme, not user@host:path) but a path that exists here: a repository on the user's own machine. */
function isLocalFolder(io: CliIo, url: string): boolean {
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(url) || /^[^\s/@]+@[^\s/:]+:/.test(url)) return false;
  return fs.existsSync(path.resolve(io.cwd, url));
}

/** `hello` from `https://host/team/hello.git`. */
function repositoryName(url: string): string {
  const last = url.replace(/[/\\]+$/, '').split(/[/:\\]/).at(-1) ?? '';
  return path.basename(last, '.git') || 'app';
}

async function create(io: CliIo, options: CreateOptions, signal: AbortSignal): Promise<void> {
  const url = options.git ?? '';
  if (url.trim() === '') throw usageError('--git needs the repository URL');
  if (options.compose !== undefined && options.dockerfile !== undefined) throw usageError('--compose and --dockerfile are exclusive: a compose app names its Dockerfiles in its compose file');
  if (isLocalFolder(io, url)) {
    throw usageError(
      `${url} is a folder on this machine, which the server cannot fetch: deploy its files with \`slipway deploy ${url}\` (uploaded as they are), ` +
        'or give a URL the server can reach (https://, http://, git://, ssh:// or user@host:path)',
    );
  }
  const client = await connect(io, signal);
  const name = options.name ?? repositoryName(url);
  const subdomain = options.subdomain ?? slugify(name);
  const teamId = options.team === undefined ? undefined : (await findTeam(client, options.team)).id;
  let created: Deployment;
  try {
    created = await client.request<Deployment>('POST', '/api/v1/deployments', {
      body: {
        name,
        subdomain,
        source_type: 'git',
        repo_url: url,
        ...(options.branch === undefined ? {} : { branch: options.branch }),
        ...(options.dockerfile === undefined ? {} : { dockerfile_path: options.dockerfile }),
        ...(options.compose === undefined ? {} : { compose_path: options.compose }),
        ...(teamId === undefined ? {} : { team_id: teamId }),
      },
    });
  } catch (err) {
    if (err instanceof CliError && err.code === 'subdomain_taken' && options.subdomain === undefined) {
      throw new CliError(`${err.message} (choose one with --subdomain)`, { code: err.code, ...(err.status === undefined ? {} : { status: err.status }) });
    }
    throw err;
  }
  const app = await client.request<Deployment>('GET', `/api/v1/deployments/${created.id}`);
  if (!options.deploy) {
    if (options.json === true) return printJson(io.stdout, app);
    io.stderr.write(`Created app ${app.name} at subdomain ${app.subdomain} (not deployed yet: deploy it with \`slipway deploy ${app.subdomain}\`).\n`);
    io.stdout.write(`${app.url ?? app.subdomain}\n`);
    return;
  }
  io.stderr.write(`Created app ${app.name} at subdomain ${app.subdomain} from ${url}${options.branch === undefined ? '' : ` (${options.branch})`}\n`);
  const started = await client.request<Build>('POST', `/api/v1/deployments/${app.id}/deploy`);
  await followBuild(io, client, app, started, { json: options.json === true }, signal);
}
