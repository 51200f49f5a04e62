// Issue 26, the CLI a newcomer meets in the first hour: a base image that cannot be pulled is
// explained once; `deploy APP` redeploys a git app; `status`/`logs` use ./slipway.json; `env set
// APP KEY=V`; `login` says the server is down before asking for a password; refused git URLs name
// SLIPWAY_ALLOW_PRIVATE_GIT and the field once; a second tunnel on a name needs --force; `--help | head`.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { spawn } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { createDockerEngine } from '../../src/runtime/docker/docker-engine.js';
import { ensureBusyboxImage, writeBusyboxApp } from '../helpers/busybox-image.js';
import { BIN, cli, startCli, until, type CliResult } from '../helpers/cli.js';
import { startGitServer, type GitServer } from '../helpers/git-server.js';
import { freePort } from '../helpers/net.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

let server: TestServer;
let strict: TestServer;
let git: GitServer;
let work: string;
let home: string;
let user: Awaited<ReturnType<TestServer['newUser']>>;

function assertExit(res: CliResult, code: number): void {
  assert.equal(res.code, code, `exit ${res.code}\n--- stdout\n${res.stdout}\n--- stderr\n${res.stderr}`);
}
const occurrences = (text: string, needle: string): number => text.split(needle).length - 1;

before(async () => {
  work = await mkdtemp(path.join(os.tmpdir(), 'slipway-first-hour-'));
  await ensureBusyboxImage(createDockerEngine());
  [server, strict, git] = await Promise.all([startTestServer(), startTestServer({ SLIPWAY_ALLOW_PRIVATE_GIT: 'false' }), startGitServer()]);
  user = await server.newUser('first-hour');
  home = await mkdtemp(path.join(work, 'home-'));
  assertExit(await cli(['login', '--url', server.url, '--api-key', user.apiKey], { home }), 0);
});
after(async () => {
  const list = await server.request('GET', '/api/v1/deployments', { token: user.token }).catch(() => undefined);
  for (const d of (list?.json ?? []) as Array<{ id: string }>) await server.request('DELETE', `/api/v1/deployments/${d.id}`, { token: user.token }).catch(() => undefined);
  await Promise.all([server?.close(), strict?.close(), git?.close()]);
  await rm(work, { recursive: true, force: true });
});

test('a base image that cannot be pulled: one message naming the image, the unreachable registry and what to do', async () => {
  const dir = path.join(work, `nobase-${randomUUID().slice(0, 6)}`);
  await mkdir(dir);
  const image = `slipway-absent-${randomUUID().slice(0, 8)}:20-alpine`;
  await writeFile(path.join(dir, 'Dockerfile'), `FROM ${image}\nCMD ["true"]\n`);
  const res = await cli(['deploy', dir, '--subdomain', `nobase-${randomUUID().slice(0, 6)}`], { home });
  assertExit(res, 1);
  const all = res.stdout + res.stderr;
  assert.match(res.stderr, new RegExp(`error: .*the base image ${image} is not on this server's Docker engine and its registry, Docker Hub \\(registry-1\\.docker\\.io\\), could not be reached`));
  assert.match(res.stderr, /registry-mirrors/);
  assert.match(res.stderr, /docker load/);
  assert.ok(occurrences(all, 'could not be reached') <= 2, `said at most once in the log and once as the error:\n${all}`);
  assert.doesNotMatch(all, /Get "https:\/\/registry-1|dial tcp|no such host/, 'not the engine\'s raw error');
});

test('deploy APP deploys a git app again from the latest commit of its branch', async () => {
  const appDir = path.join(work, 'git-src');
  await mkdir(appDir, { recursive: true });
  await writeBusyboxApp(appDir, { body: 'v1\n' });
  const { readdir, readFile } = await import('node:fs/promises');
  const files = Object.fromEntries(await Promise.all((await readdir(appDir)).map(async (f) => [f, await readFile(path.join(appDir, f), 'utf8')] as const)));
  const name = `redeploy-${randomUUID().slice(0, 6)}`;
  const repo = await git.createRepo(name, files);
  const created = await server.request('POST', '/api/v1/deployments', { token: user.token, body: { name, subdomain: name, repo_url: repo.url } });
  assert.equal(created.status, 201, created.text);
  const newer = await git.commit(name, { 'index.html': 'v2\n' });
  const res = await cli(['deploy', name], { home });
  assertExit(res, 0);
  assert.match(res.stderr, new RegExp(`Deploying the latest commit of .*: ${newer.slice(0, 12)}`));
  assert.match(res.stdout, new RegExp(`${name}\\.`), 'ends with the URL');
  const builds = (await server.request('GET', `/api/v1/deployments/${created.json.id}/builds`, { token: user.token })).json;
  assert.equal(builds[0].commit_sha, newer);
  assert.equal(builds[0].status, 'succeeded');
  // A name that is neither a folder nor an app says both.
  const missing = await cli(['deploy', 'no-such-app-here'], { home });
  assertExit(missing, 2);
  assert.match(missing.stderr, /is not a folder, and you have no app named "no-such-app-here"/);
});

test('status and logs use ./slipway.json as env does; env set takes the app first', async () => {
  const dir = path.join(work, `linked-${randomUUID().slice(0, 6)}`);
  await mkdir(dir);
  await writeBusyboxApp(dir, { body: 'linked\n' });
  const sub = `linked-${randomUUID().slice(0, 6)}`;
  assertExit(await cli(['deploy', '.', '--subdomain', sub], { home, cwd: dir }), 0);
  const status = await cli(['status'], { home, cwd: dir });
  assertExit(status, 0);
  assert.match(status.stdout, new RegExp(`url:\\s+http://${sub}\\.`));
  const logs = await cli(['logs', '--tail', '5'], { home, cwd: dir });
  assertExit(logs, 0);
  assert.match(logs.stdout, /listening on/);
  // Outside a linked folder, the message says how to name the app.
  const unlinked = await cli(['status'], { home });
  assertExit(unlinked, 2);
  assert.match(unlinked.stderr, /name the app/);

  const set = await cli(['env', 'set', sub, 'GREETING=hi', '--no-restart'], { home });
  assertExit(set, 0);
  const env = await cli(['env', sub, '--json'], { home });
  assert.deepEqual(JSON.parse(env.stdout).vars.map((v: { key: string; value: string }) => [v.key, v.value]), [['GREETING', 'hi']]);
  const alone = await cli(['env', 'set', sub], { home });
  assertExit(alone, 2);
  assert.match(alone.stderr, new RegExp(`expected KEY=VALUE, got "${sub}" \\(to name the app, use \`slipway env set ${sub} KEY=VALUE\` or --app ${sub}\\)`));
});

test('login to a server that is not there says so before asking for the password', async () => {
  const port = await freePort();
  const own = await mkdtemp(path.join(work, 'home-login-'));
  const res = await cli(['login', '--url', `http://127.0.0.1:${port}`], { home: own, input: 'me@example.com\nsecret-password\n' });
  assertExit(res, 1);
  assert.match(res.stderr, new RegExp(`cannot reach Slipway at http://127\\.0\\.0\\.1:${port}`));
  assert.doesNotMatch(res.stdout + res.stderr, /Password/, 'no password was asked for');
});

test('refused repository URLs name SLIPWAY_ALLOW_PRIVATE_GIT, and the field only once', async () => {
  const strictHome = await mkdtemp(path.join(work, 'home-strict-'));
  const strictUser = await strict.newUser('strict');
  assertExit(await cli(['login', '--url', strict.url, '--api-key', strictUser.apiKey], { home: strictHome }), 0);
  const loopback = await cli(['create', '--git', 'http://127.0.0.1:9/repo.git', '--no-deploy'], { home: strictHome });
  assertExit(loopback, 1);
  assert.match(loopback.stderr, /loopback, private or reserved network .*SLIPWAY_ALLOW_PRIVATE_GIT=true/);
  const ftp = await cli(['create', '--git', 'ftp://example.com/repo.git', '--no-deploy'], { home: strictHome });
  assertExit(ftp, 1);
  assert.match(ftp.stderr, /error: repo_url must start with https:\/\//);
  assert.doesNotMatch(ftp.stderr, /repo_url: repo_url/);
});

test('a second tunnel on a name of yours is refused, naming --force; with --force it takes over', async () => {
  const http = await import('node:http');
  const local = http.createServer((_req, res) => res.end('local app\n'));
  await new Promise<void>((resolve) => local.listen(0, '127.0.0.1', resolve));
  const port = (local.address() as { port: number }).port;
  const name = `tn-${randomUUID().slice(0, 6)}`;
  const first = startCli(['tunnel', String(port), '--subdomain', name], { home });
  try {
    await until(() => first.stdout().includes('Forwarding'), 'the first tunnel');
    const second = await cli(['tunnel', String(port), '--subdomain', name], { home });
    assertExit(second, 1);
    assert.match(second.stderr, new RegExp(`already have a live tunnel on "${name}".*--force`));
    const forced = startCli(['tunnel', String(port), '--subdomain', name, '--force'], { home });
    await until(() => forced.stdout().includes('Forwarding'), 'the forced tunnel');
    const firstEnd = await first.done;
    assert.equal(firstEnd.code, 1);
    assert.match(firstEnd.stderr, /took over/);
    forced.child.kill('SIGINT');
    await forced.done;
  } finally {
    first.child.kill('SIGINT');
    await first.done;
    await new Promise((resolve) => local.close(resolve));
  }
});

test('slipway --help into a pipe closed early ends quietly', async () => {
  for (let i = 0; i < 3; i += 1) {
    const child = spawn(process.execPath, [BIN, '--help'], { stdio: ['ignore', 'pipe', 'pipe'], env: { PATH: process.env['PATH'] ?? '/usr/bin:/bin', HOME: home, XDG_CONFIG_HOME: home } });
    // The reader goes away before the program has written anything (as `| head` does after its lines).
    child.stdout.destroy();
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const code = await new Promise<number | null>((resolve) => child.once('close', resolve));
    assert.equal(stderr, '', 'no EPIPE trace');
    assert.equal(code, 0);
  }
});

