// Issue 33 item 5, as a person with a repository on their own machine: `create --help` and the server
// agree on git://, a `git daemon` and a dumb-HTTP server on 127.0.0.1 both deploy, and an app whose
// source could not be fetched says so on its page.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdir, mkdtemp, readFile, rm } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { createDockerEngine } from '../../src/runtime/docker/docker-engine.js';
import { appRequest, eventually } from '../helpers/apps.js';
import { ensureBusyboxImage, writeBusyboxApp } from '../helpers/busybox-image.js';
import { cli, type CliResult } from '../helpers/cli.js';
import { TEST_PATH } from '../helpers/git-server.js';
import { freePort } from '../helpers/net.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

const run = promisify(execFile);
let server: TestServer;
let work: string;
let home: string;
let repos: string;
let body: string;
let daemon: ChildProcess;
let daemonPort: number;
let dumb: http.Server;
let dumbPort: number;
let token: string;

function assertExit(res: CliResult, code: number): void {
  assert.equal(res.code, code, `exit ${res.code}\n--- stdout\n${res.stdout}\n--- stderr\n${res.stderr}`);
}

const gitEnv = (): Record<string, string> => ({ PATH: TEST_PATH, HOME: work, GIT_CONFIG_NOSYSTEM: '1', GIT_CONFIG_GLOBAL: '/dev/null' });

before(async () => {
  work = await mkdtemp(path.join(os.tmpdir(), 'slipway-local-git-'));
  await ensureBusyboxImage(createDockerEngine());
  server = await startTestServer();
  const user = await server.newUser('local-git');
  token = user.token;
  home = await mkdtemp(path.join(work, 'home-'));
  assertExit(await cli(['login', '--url', server.url, '--api-key', user.apiKey], { home }), 0);

  // A repository with two commits, cloned bare, with the files a dumb-HTTP client reads.
  const source = path.join(work, 'source');
  await mkdir(source);
  body = await writeBusyboxApp(source);
  const git = (cwd: string, ...args: string[]) => run('git', args, { cwd, env: gitEnv() });
  await git(source, 'init', '-q', '-b', 'main');
  await git(source, 'add', '.');
  await git(source, '-c', 'user.name=t', '-c', 'user.email=t@t', 'commit', '-qm', 'app');
  repos = path.join(work, 'repos');
  await mkdir(repos);
  await git(work, 'clone', '-q', '--bare', source, path.join(repos, 'app.git'));
  await git(path.join(repos, 'app.git'), 'update-server-info');

  // Dumb HTTP: a static file server over the bare repositories, nothing more.
  dumb = http.createServer((req, res) => {
    const file = path.join(repos, path.normalize(decodeURIComponent(new URL(req.url ?? '/', 'http://x').pathname)));
    if (!file.startsWith(repos + path.sep)) return void res.writeHead(403).end();
    readFile(file).then(
      (data) => res.end(data),
      () => res.writeHead(404).end(),
    );
  });
  await new Promise<void>((resolve) => dumb.listen(0, '127.0.0.1', resolve));
  dumbPort = (dumb.address() as AddressInfo).port;

  daemonPort = await freePort();
  daemon = spawn('git', ['daemon', '--reuseaddr', '--export-all', `--base-path=${repos}`, '--listen=127.0.0.1', `--port=${daemonPort}`, '--', repos], {
    env: gitEnv(),
    stdio: 'ignore',
  });
  // Ready once ls-remote answers.
  await eventually(async () => (await run('git', ['ls-remote', `git://127.0.0.1:${daemonPort}/app.git`], { env: gitEnv() }).then(() => true, () => undefined)), 10_000, 'git daemon');
});
after(async () => {
  const list = await server.request('GET', '/api/v1/deployments', { token }).catch(() => undefined);
  for (const d of (list?.json ?? []) as Array<{ id: string }>) await server.request('DELETE', `/api/v1/deployments/${d.id}`, { token }).catch(() => undefined);
  daemon?.kill();
  dumb?.close();
  await server?.close();
  await rm(work, { recursive: true, force: true });
});

test('create --help names the schemes the server accepts, git:// among them; a git daemon on 127.0.0.1 deploys', async () => {
  const help = await cli(['create', '--help'], { home });
  assertExit(help, 0);
  assert.match(help.stdout.replace(/\s+/g, ' '), /--git <url> the repository \(https:\/\/, http:\/\/, git:\/\/, ssh:\/\/ or user@host:path\)/);

  const subdomain = `daemon-${randomUUID().slice(0, 6)}`;
  const res = await cli(['create', '--git', `git://127.0.0.1:${daemonPort}/app.git`, '--subdomain', subdomain], { home });
  assertExit(res, 0);
  assert.match(res.stderr, new RegExp(`^Created app app at subdomain ${subdomain} from git://127\\.0\\.0\\.1:${daemonPort}/app\\.git\n`));
  assert.match(res.stderr, /^Deployed app \(build [0-9a-f]{8}\)\.$/m);
  assert.equal((await appRequest(server.port, subdomain)).body, body);
});

test('a repository given as a folder of this machine: told to deploy the folder instead, before anything is created', async () => {
  const before = (await server.request('GET', '/api/v1/deployments', { token })).json.length;
  const res = await cli(['create', '--git', repos], { home });
  assertExit(res, 2);
  assert.equal(
    res.stderr,
    `error: ${repos} is a folder on this machine, which the server cannot fetch: deploy its files with \`slipway deploy ${repos}\` (uploaded as they are), ` +
      'or give a URL the server can reach (https://, http://, git://, ssh:// or user@host:path)\n',
  );
  assert.equal((await server.request('GET', '/api/v1/deployments', { token })).json.length, before, 'no app was created');
});

test('a dumb-HTTP repository: the fetch is made again in full, the log says why, and the app deploys', async () => {
  const subdomain = `dumb-${randomUUID().slice(0, 6)}`;
  const res = await cli(['create', '--git', `http://127.0.0.1:${dumbPort}/app.git`, '--subdomain', subdomain], { home });
  assertExit(res, 0);
  assert.match(res.stdout, /^The server does not support shallow fetches \(a dumb HTTP server\): fetching the whole history instead\.$/m);
  assert.doesNotMatch(res.stderr, /error:/);
  assert.equal((await appRequest(server.port, subdomain)).body, body);
});

test("a source that cannot be fetched: the app's page says so, not that the app failed to start", async () => {
  const subdomain = `gone-${randomUUID().slice(0, 6)}`;
  const closed = await freePort();
  const res = await cli(['create', '--git', `git://127.0.0.1:${closed}/app.git`, '--subdomain', subdomain], { home });
  assertExit(res, 1);
  assert.match(res.stderr, /^error: build [0-9a-f]{8} failed: cannot read the repository: git ls-remote failed: .*Connection refused/m);
  const page = await appRequest(server.port, subdomain);
  assert.equal(page.status, 503);
  assert.match(page.body, new RegExp(`<p>${subdomain}\\.localhost is not available: its last deploy could not fetch the app&#39;s source, so nothing was built \\(the build log says why\\)\\.</p>`));
  assert.doesNotMatch(page.body, /failed to start/);
});

test('create --help and --no-deploy send people to `slipway deploy APP`, not to the API', async () => {
  const help = await cli(['create', '--help'], { home });
  assertExit(help, 0);
  const text = help.stdout.replace(/\s+/g, ' ');
  assert.match(text, /--no-deploy only create the app \(deploy it later with `slipway deploy APP`, or from the dashboard\)/);
  assert.match(text, /Deploy its branch's latest commit again with `slipway deploy APP`\./);
  assert.doesNotMatch(help.stdout, /\/api\/v1/);

  const subdomain = `later-${randomUUID().slice(0, 6)}`;
  const res = await cli(['create', '--git', `git://127.0.0.1:${daemonPort}/app.git`, '--subdomain', subdomain, '--no-deploy'], { home });
  assertExit(res, 0);
  assert.equal(res.stderr, `Created app app at subdomain ${subdomain} (not deployed yet: deploy it with \`slipway deploy ${subdomain}\`).\n`);
  const deployed = await cli(['deploy', subdomain], { home });
  assertExit(deployed, 0);
  assert.equal((await appRequest(server.port, subdomain)).body, body);
});
