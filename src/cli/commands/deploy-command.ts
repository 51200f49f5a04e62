// Command: deploy — pack a folder, upload it, build and release it, following the build log.
import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Command } from 'commander';
import type { ApiClient } from '../api-client.js';
import type { Build, Deployment, UploadAnswer } from '../api-types.js';
import { CliError, EXIT_INTERRUPTED, usageError } from '../cli-error.js';
import type { CliIo } from '../cli-io.js';
import { connect, withInterrupt, withJson, type JsonOption } from '../command-context.js';
import { copyStream, printJson, shortId } from '../output.js';
import { LINK_FILE, PackTooLarge, packFolder } from '../pack.js';
import { checkSourceSize, fetchUploadLimits, measureSource, packedTooLarge, type SourceSize } from '../upload-size.js';
import { Progress, formatBytes } from '../progress.js';
import { readProjectFile, sameVolumes, writeProjectLink } from '../project-link.js';
import { resolveApp } from '../resolve-app.js';

interface DeployOptions extends JsonOption {
  name?: string;
  subdomain?: string;
  dockerfile?: string;
  compose?: string;
  /** False with --no-follow. */
  follow: boolean;
}

/** Registers `deploy` on `program`. */
export function registerDeployCommand(program: Command, io: CliIo): void {
  withJson(
    program
      .command('deploy')
      .argument('[dir]', 'the folder to deploy, or the name of a git app to deploy again', '.')
      .description("deploy a folder (upload it, build its Dockerfile and serve it), or a git app's latest commit")
      .option('--name <name>', 'app name when creating it (default: the folder name)')
      .option('--subdomain <label>', 'subdomain when creating it (default: a slug of the name)')
      .option('--dockerfile <path>', 'Dockerfile path inside the folder (default: Dockerfile)')
      .option('--compose <path>', 'when creating the app: build and run the services of this compose file instead of a Dockerfile (docs/compose.md)')
      .option('--no-follow', 'return once the build has started, printing its id'),
  )
    .addHelpText(
      'after',
      `
The first deploy of a folder creates the app and remembers it in DIR/${LINK_FILE} (commit
that file to deploy to the same app from elsewhere); later deploys reuse it.

${LINK_FILE} may also list the app's volumes, e.g. {"volumes": [{"name": "data", "mount_path": "/data"}]}:
the first deploy creates the app with them, and a later deploy whose list changed updates the app
before it deploys.

What is uploaded: the folder as tar.gz, minus what .dockerignore excludes (or .gitignore when
there is no .dockerignore), minus .git and ${LINK_FILE}. Symbolic links are uploaded as links
only when they stay inside the folder; links pointing outside are skipped with a warning and
never followed.

When DIR is not a folder but the name, subdomain or id of a git app, that app is deployed again
from the latest commit of its branch (as the dashboard's "Deploy latest commit" does).

Examples:
  slipway deploy
  slipway deploy ./my-app --subdomain my-app
  slipway deploy my-git-app
  slipway deploy . --dockerfile docker/Dockerfile.prod
  slipway deploy ./shop --compose compose.yaml
  slipway deploy --no-follow --json`,
    )
    .action((dir: string, options: DeployOptions) => withInterrupt(io, (signal) => deploy(io, dir, options, signal)));
}

/** A DNS label from a name: `My App!` → `my-app`. */
export function slugify(name: string): string {
  const slug = name
    .toLowerCase()
    .normalize('NFKD')
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, 63)
    .replace(/-+$/, '');
  return slug === '' ? 'app' : slug;
}

function relativeDockerfile(raw: string): string {
  const posix = raw.replace(/\\/g, '/').replace(/^(\.\/)+/, '');
  if (posix === '' || posix.startsWith('/') || posix.split('/').includes('..')) {
    throw usageError(`--dockerfile must be a path inside the folder, got "${raw}"`);
  }
  return posix;
}

async function deploy(io: CliIo, dirArg: string, options: DeployOptions, signal: AbortSignal): Promise<void> {
  const dir = path.resolve(io.cwd, dirArg);
  if (!(await stat(dir).then((s) => s.isDirectory(), () => false))) return redeployByName(io, dirArg, dir, options, signal);
  const dockerfileOption = options.dockerfile === undefined ? undefined : relativeDockerfile(options.dockerfile);
  const composeOption = await composeFileOption(dir, options);
  const client = await connect(io, signal);
  const note = (text: string): void => void io.stderr.write(`${text}\n`);

  // Everything is read, measured and packed before the app is created or changed: a source the
  // server would refuse leaves nothing behind, and is never sent.
  const limits = await fetchUploadLimits(client);
  const tmp = await mkdtemp(path.join(os.tmpdir(), 'slipway-upload-'));
  let upload: UploadAnswer;
  let app: Deployment;
  try {
    const archive = path.join(tmp, 'source.tar.gz');
    let packed = { bytes: 0, dockerfileText: '', override: false };
    app = await findOrCreateApp(client, dir, options, dockerfileOption, composeOption, note, async (linked) => {
      const dockerfile = dockerfileOption ?? linked?.dockerfile_path ?? 'Dockerfile';
      const compose = linked === undefined ? composeOption : (linked.compose_path ?? undefined);
      if (linked !== undefined && composeOption !== undefined && composeOption !== linked.compose_path) {
        note(`note: --compose applies only when creating an app; ${linked.name} ${linked.compose_path ? `builds ${linked.compose_path}` : 'builds a Dockerfile'} (change it in the dashboard or with PATCH compose_path)`);
      }
      // A different --dockerfile on an existing app is sent as the upload's `dockerfile` part.
      const override = linked !== undefined && dockerfileOption !== undefined && dockerfileOption !== (linked.dockerfile_path ?? 'Dockerfile');
      const dockerfileText = compose !== undefined ? '' : await readFile(path.join(dir, dockerfile), 'utf8').catch(async () => {
        if (dockerfileOption !== undefined) throw new CliError(`no ${dockerfile} in ${dir}: add one, or name it with --dockerfile PATH`);
        // Decisions §24: the server detects the stack and generates one.
        note(`No ${dockerfile} in ${dir}: Slipway generates one from the stack it detects (\`slipway dockerfile\` shows it)`);
        const found = await composeFileIn(dir);
        if (found !== undefined && linked === undefined) note(`note: ${dir} has ${found}: to run its services instead, deploy with --compose ${found} (a new app)`);
        return '';
      });
      let size: SourceSize | undefined;
      // Packed again when a linked app vanished meanwhile and a new one is created instead.
      await rm(archive, { force: true });
      const packing = new Progress(io.stderr, 'packed');
      const result = await packFolder(dir, archive, {
        dockerfile,
        signal,
        onWarning: (text) => note(`warning: ${text}`),
        onProgress: (bytes) => packing.update(bytes),
        beforePack: async (listing) => {
          if (limits === undefined) return;
          size = await measureSource(listing);
          checkSourceSize(dir, size, limits);
        },
        ...(limits === undefined ? {} : { maxBytes: limits.max_upload_bytes }),
      }).catch((err: unknown) => {
        packing.finish(false);
        if (err instanceof PackTooLarge && limits !== undefined && size !== undefined) throw packedTooLarge(dir, size, limits);
        throw err;
      });
      packing.finish(false);
      note(`Packed ${result.entries} entries of ${dir} into ${formatBytes(result.bytes)}${result.ignoreFile === undefined ? '' : ` (honouring ${result.ignoreFile})`}`);
      packed = { bytes: result.bytes, dockerfileText, override };
    });
    const uploading = new Progress(io.stderr, 'uploaded', packed.bytes);
    upload = await client.upload<UploadAnswer>(`/api/v1/deployments/${app.id}/upload`, {
      file: archive,
      size: packed.bytes,
      ...(packed.override ? { dockerfile: packed.dockerfileText } : {}),
      onProgress: (sent) => uploading.update(sent),
    });
    uploading.finish();
  } finally {
    await rm(tmp, { recursive: true, force: true });
  }

  const started = await client.request<Build>('POST', `/api/v1/deployments/${app.id}/deploy`);
  if (!options.follow) {
    if (options.json === true) return printJson(io.stdout, { deployment: app, upload, build: started });
    io.stdout.write(`${started.id}\n`);
    note(`Build ${shortId(started.id)} started: follow it with \`slipway logs ${app.subdomain} --build ${shortId(started.id)} -f\``);
    return;
  }
  await followBuild(io, client, app, started, { json: options.json === true, upload }, signal);
}

/**
 * `slipway deploy APP`: DIR is no folder, so it may name a git app: deploy its branch's latest
 * commit (the server resolves it) and follow the build. An uploaded app needs its folder.
 */
async function redeployByName(io: CliIo, ref: string, dir: string, options: DeployOptions, signal: AbortSignal): Promise<void> {
  // Only something that could be an app's name: a path-looking argument is a missing folder.
  if (ref.includes('/') || ref.includes(path.sep) || ref.startsWith('.')) throw usageError(`${dir} is not a folder`);
  const client = await connect(io, signal);
  const app = await resolveApp(client, ref).catch((err: unknown) => {
    if (err instanceof CliError && err.message.startsWith('no app named')) throw usageError(`${dir} is not a folder, and you have no app named "${ref}" (see \`slipway apps\`)`);
    throw err;
  });
  if (app.source_type !== 'git') {
    throw usageError(`${app.name} is deployed from uploads: run \`slipway deploy DIR\` in its folder (the one with ${LINK_FILE}) to upload and deploy it`);
  }
  const started = await client.request<Build>('POST', `/api/v1/deployments/${app.id}/deploy`);
  io.stderr.write(`Deploying the latest commit of ${app.repo_url ?? 'the repository'}${app.branch ? ` (${app.branch})` : ''}: ${started.commit_sha.slice(0, 12)}\n`);
  if (!options.follow) {
    if (options.json === true) return printJson(io.stdout, { deployment: app, build: started });
    io.stdout.write(`${started.id}\n`);
    return;
  }
  await followBuild(io, client, app, started, { json: options.json === true }, signal);
}

/**
 * Follows a started build's log to its end and prints the outcome: the URL on success, else
 * `error: build ID failed: <why>` (the app's own last line when it failed to start). Ctrl-C stops
 * following only: the message says the build goes on, and how to cancel it.
 */
export async function followBuild(
  io: CliIo,
  client: ApiClient,
  app: Deployment,
  started: Build,
  options: { json: boolean; upload?: UploadAnswer },
  signal: AbortSignal,
): Promise<void> {
  const note = (text: string): void => void io.stderr.write(`${text}\n`);
  note(`Building ${app.name} (build ${shortId(started.id)})…`);
  const logOut = { stdout: options.json ? io.stderr : io.stdout };
  let build: Build;
  try {
    await copyStream(logOut, client.stream(`/api/v1/deployments/${app.id}/builds/${started.id}/logs?follow=true`), false);
    build = await waitForBuild(client, app.id, started.id, signal);
  } catch (err) {
    if (!signal.aborted) throw err;
    throw new CliError(
      `interrupted: build ${shortId(started.id)} of ${app.name} is still running on the server` +
        `${app.live_build_id ? ' (the live release keeps serving meanwhile)' : ''}. ` +
        `Cancel it with \`slipway cancel ${app.subdomain}\`, or follow it with \`slipway logs ${app.subdomain} --build ${shortId(started.id)} -f\``,
      { exitCode: EXIT_INTERRUPTED },
    );
  }
  const deployment = await client.request<Deployment>('GET', `/api/v1/deployments/${app.id}`);
  if (options.json) printJson(io.stdout, { deployment, ...(options.upload === undefined ? {} : { upload: options.upload }), build });
  if (build.status !== 'succeeded') {
    // The log above already showed the whole output, once; the error's last line says what broke.
    const lines = (build.error ?? '').split('\n').map((line) => line.trim()).filter((line) => line !== '');
    const why = lines.at(-1) ?? '';
    const more = lines.length > 1 ? ` (full log: slipway logs ${deployment.subdomain} --build ${shortId(build.id)})` : '';
    throw new CliError(`build ${shortId(build.id)} ${build.status}${why === '' ? '' : `: ${why}`}${more}`);
  }
  if (!options.json) {
    note(`Deployed ${deployment.name} (build ${shortId(build.id)}).`);
    io.stdout.write(`${deployment.url ?? deployment.subdomain}\n`);
  }
}

/**
 * The deployment DIR/slipway.json names on this server, or a new archive deployment (then linked).
 * `prepare` runs first with the linked app (if any), before anything is created or changed: its
 * refusal (a source too large) leaves the server as it was.
 */
async function findOrCreateApp(
  client: ApiClient,
  dir: string,
  options: DeployOptions,
  dockerfile: string | undefined,
  compose: string | undefined,
  note: (text: string) => void,
  prepare: (linked: Deployment | undefined) => Promise<void>,
): Promise<Deployment> {
  const project = await readProjectFile(dir);
  const link = project?.link;
  const volumes = project?.volumes;
  if (link !== undefined && link.server === client.url) {
    try {
      let app = await client.request<Deployment>('GET', `/api/v1/deployments/${link.deployment_id}`);
      if ((options.name !== undefined && options.name !== app.name) || (options.subdomain !== undefined && options.subdomain !== app.subdomain)) {
        note(`note: --name and --subdomain apply only when creating an app; ${LINK_FILE} links this folder to ${app.name} (${app.subdomain})`);
      }
      await prepare(app);
      // slipway.json's volumes are the app's: a changed list is sent before the deploy that mounts it.
      if (volumes !== undefined && !sameVolumes(volumes, app.volumes)) {
        app = await client.request<Deployment>('PATCH', `/api/v1/deployments/${app.id}`, { body: { volumes } });
        note(`Volumes of ${app.name} set from ${LINK_FILE}: ${describeVolumes(volumes)}`);
      }
      return app;
    } catch (err) {
      if (!(err instanceof CliError) || err.status !== 404) throw err;
      note(`note: the app in ${LINK_FILE} (${link.deployment_id}) no longer exists; creating a new one`);
    }
  } else if (link !== undefined) {
    note(`note: ${LINK_FILE} links this folder to an app on ${link.server}; creating one on ${client.url}`);
  }
  const effectiveDockerfile = dockerfile ?? 'Dockerfile';
  if (dockerfile !== undefined && !(await stat(path.join(dir, effectiveDockerfile)).then((s) => s.isFile(), () => false))) {
    throw new CliError(`no ${effectiveDockerfile} in ${dir}: add one, or name it with --dockerfile PATH`);
  }
  await prepare(undefined);
  const name = options.name ?? path.basename(dir);
  const subdomain = options.subdomain ?? slugify(name);
  let created: Deployment;
  try {
    created = await client.request<Deployment>('POST', '/api/v1/deployments', {
      body: { name, subdomain, source_type: 'archive', ...(compose === undefined ? { dockerfile_path: effectiveDockerfile } : { compose_path: compose }), ...(volumes === undefined ? {} : { volumes }) },
    });
  } catch (err) {
    if (err instanceof CliError && (err.code === 'subdomain_taken' || err.code === 'validation_error') && options.subdomain === undefined) {
      throw new CliError(`${err.message} (choose one with --subdomain)`, { code: err.code, ...(err.status === undefined ? {} : { status: err.status }) });
    }
    throw err;
  }
  await writeProjectLink(dir, { deployment_id: created.id, server: client.url });
  note(`Created app ${created.name} at subdomain ${created.subdomain}; linked in ${path.join(dir, LINK_FILE)}`);
  if (volumes !== undefined && volumes.length > 0) note(`Volumes from ${LINK_FILE}: ${describeVolumes(volumes)}`);
  // The creation answer is the short archive form; the full view carries the URL.
  return client.request<Deployment>('GET', `/api/v1/deployments/${created.id}`);
}

/** The compose file names `docker compose` looks for, in its order. */
const COMPOSE_FILES = ['compose.yaml', 'compose.yml', 'docker-compose.yaml', 'docker-compose.yml'];

/** The first of the usual compose files in `dir`, if any. */
async function composeFileIn(dir: string): Promise<string | undefined> {
  for (const name of COMPOSE_FILES) if (await stat(path.join(dir, name)).then((s) => s.isFile(), () => false)) return name;
  return undefined;
}

/** `--compose PATH` checked: inside the folder, present, and not with --dockerfile. */
async function composeFileOption(dir: string, options: DeployOptions): Promise<string | undefined> {
  if (options.compose === undefined) return undefined;
  if (options.dockerfile !== undefined) throw usageError('--compose and --dockerfile are exclusive: a compose app names its Dockerfiles in its compose file');
  const posix = options.compose.replace(/\\/g, '/').replace(/^(\.\/)+/, '');
  if (posix === '' || posix.startsWith('/') || posix.split('/').includes('..')) throw usageError(`--compose must be a path inside the folder, got "${options.compose}"`);
  if (!(await stat(path.join(dir, posix)).then((s) => s.isFile(), () => false))) throw new CliError(`no ${posix} in ${dir}: --compose names the compose file inside the folder`);
  return posix;
}

function describeVolumes(volumes: ReadonlyArray<{ name: string; mount_path: string }>): string {
  return volumes.length === 0 ? 'none' : volumes.map((v) => `${v.name} at ${v.mount_path}`).join(', ');
}

/** Polls a build until it is no longer `building` (the followed log normally ends exactly then). */
async function waitForBuild(client: ApiClient, appId: string, buildId: string, signal: AbortSignal): Promise<Build> {
  for (;;) {
    const build = await client.request<Build>('GET', `/api/v1/deployments/${appId}/builds/${buildId}`);
    if (build.status !== 'building') return build;
    await sleep(500, undefined, { signal });
  }
}
