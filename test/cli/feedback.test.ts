// Issue 17: the CLI says what went wrong and what is going on, in the words a person reads:
// the app's own last line, the port it must listen on, one copy of each log, progress during stop,
// what Ctrl-C left running and how to cancel it, --version, create --git, the server's console.
// (`server reset-password` is in reset-password.test.ts.)
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { createDockerEngine } from '../../src/runtime/docker/docker-engine.js';
import { BUSYBOX_IMAGE, ensureBusyboxImage } from '../helpers/busybox-image.js';
import { cli, startCli, until, type CliResult } from '../helpers/cli.js';
import { startGitServer, type GitServer } from '../helpers/git-server.js';
import {
  ADMIN_EMAIL,
  ADMIN_PASSWORD,
  PROJECT_ROOT,
  removeEngineObjects,
  spawnServerProcess,
  startTestServer,
  testEnv,
  type ServerProcess,
  type TestServer,
} from '../helpers/server.js';

let server: TestServer;
let work: string;
let user: Awaited<ReturnType<TestServer['newUser']>>;
let home: string;

/** Writes a build context (Dockerfile lines, plus an index.html) into a new folder of `work`. */
async function appDir(name: string, dockerfile: string[]): Promise<string> {
  const dir = path.join(work, `${name}-${randomUUID().slice(0, 6)}`);
  await mkdir(dir);
  await writeFile(path.join(dir, 'Dockerfile'), [`FROM ${BUSYBOX_IMAGE}`, ...dockerfile, ''].join('\n'));
  await writeFile(path.join(dir, 'index.html'), 'hello\n');
  return dir;
}

const lines = (text: string): string[] => text.split('\n');
const count = (text: string, line: string): number => lines(text).filter((l) => l === line).length;
/** The 8-character build id in `build XXXXXXXX` of a CLI message. */
const buildIdIn = (text: string): string => /build ([0-9a-f]{8})/.exec(text)?.[1] ?? 'none';

function assertExit(res: CliResult, code: number): void {
  assert.equal(res.code, code, `exit ${res.code}\n--- stdout\n${res.stdout}\n--- stderr\n${res.stderr}`);
}

before(async () => {
  work = await mkdtemp(path.join(os.tmpdir(), 'slipway-feedback-'));
  await ensureBusyboxImage(createDockerEngine());
  // The wrong-port case waits out the start-up timeout: 10 s here (20 s in other tests' servers).
  server = await startTestServer({ SLIPWAY_STARTUP_TIMEOUT_SECONDS: '10' });
  user = await server.newUser('feedback');
  home = await mkdtemp(path.join(work, 'home-'));
  assertExit(await cli(['login', '--url', server.url, '--api-key', user.apiKey], { home }), 0);
});

after(async () => {
  const list = await server.request('GET', '/api/v1/deployments', { token: user.token }).catch(() => undefined);
  for (const d of (list?.json ?? []) as Array<{ id: string }>) {
    await server.request('DELETE', `/api/v1/deployments/${d.id}`, { token: user.token }).catch(() => undefined);
  }
  await server.close();
  await rm(work, { recursive: true, force: true });
});

describe('an app that fails to start', () => {
  test("crashing at start: the summary is the app's own last line, its output is shown once and in order, and logs shows it afterwards", async () => {
    const sub = `crash-${randomUUID().slice(0, 6)}`;
    const dir = await appDir('crash', [
      `CMD ["/bin/sh", "-c", "echo connecting to the database; sleep 0.3; echo 'Error: DATABASE_URL is not set' >&2; exit 1"]`,
    ]);
    const res = await cli(['deploy', dir, '--name', 'crash', '--subdomain', sub], { home });
    assertExit(res, 1);
    const id = buildIdIn(res.stderr);
    assert.equal(
      lines(res.stderr).at(-2),
      `error: build ${id} failed: the app exited with code 1 before answering on port 8080; its last line: Error: DATABASE_URL is not set`,
    );
    assert.ok(lines(res.stdout).includes('==> starting the app: it must answer HTTP on port 8080 (the PORT environment variable)'), res.stdout);
    // The output once, stdout and stderr in the order the app wrote them.
    assert.equal(count(res.stdout, 'connecting to the database'), 1, res.stdout);
    assert.equal(count(res.stdout, 'Error: DATABASE_URL is not set'), 1, res.stdout);
    const out = lines(res.stdout);
    assert.deepEqual(out.slice(out.indexOf('==> app output:'), out.indexOf('==> app output:') + 3), [
      '==> app output:',
      'connecting to the database',
      'Error: DATABASE_URL is not set',
    ]);

    const logs = await cli(['logs', sub], { home });
    assertExit(logs, 0);
    assert.equal(logs.stderr, `No container of crash is running: the app of build ${id} failed to start. Its output:\n`);
    assert.equal(logs.stdout, 'connecting to the database\nError: DATABASE_URL is not set\n');
  });

  test('listening on another port than PORT without saying which: progress while waiting, then the port it must listen on, with its output', async () => {
    const sub = `port-${randomUUID().slice(0, 6)}`;
    const dir = await appDir('wrongport', [
      'COPY index.html /www/index.html',
      'EXPOSE 8080',
      // An app that names the port it listens on fails sooner (test/cli/wrong-port.test.ts).
      'CMD ["/bin/sh", "-c", "echo starting the web server; exec httpd -f -p 9090 -h /www"]',
    ]);
    const res = await cli(['deploy', dir, '--name', 'wrongport', '--subdomain', sub], { home });
    assertExit(res, 1);
    const id = buildIdIn(res.stderr);
    // SLIPWAY_STARTUP_TIMEOUT_SECONDS is 10 on this file's server.
    assert.equal(
      lines(res.stderr).at(-2),
      `error: build ${id} failed: the app did not answer HTTP on port 8080 (its PORT) within 10 s: make it listen on the port in the PORT environment variable; its last line: starting the web server`,
    );
    assert.equal(count(res.stdout, 'starting the web server'), 1, res.stdout);
    assert.match(res.stdout, /^==> still waiting for the app to answer on port 8080 \(its PORT\): no HTTP answer on port 8080 after \d+ s of 10 s$/m);
  });

  test('a failed build prints its log once and a one-line reason', async () => {
    const dir = await appDir('badbuild', ['RUN echo about to fail && exit 3']);
    const res = await cli(['deploy', dir, '--name', 'badbuild', '--subdomain', `bad-${randomUUID().slice(0, 6)}`], { home });
    assertExit(res, 1);
    assert.equal(count(res.stdout, 'about to fail'), 1, res.stdout);
    const failed = lines(res.stdout).filter((l) => l.startsWith('==> failed: '));
    assert.equal(failed.length, 1);
    assert.match(failed[0] ?? '', /^==> failed: image build failed: .*returned a non-zero code: 3$/);
    assert.match(lines(res.stderr).at(-2) ?? '', /^error: build [0-9a-f]{8} failed: image build failed: .*returned a non-zero code: 3$/);
  });
});

describe('slow operations say what is going on', () => {
  test('stop shows progress while the app takes its time to exit', async () => {
    const sub = `stubborn-${randomUUID().slice(0, 6)}`;
    // The app ignores SIGTERM: the engine kills it after the 10 s grace period.
    const dir = await appDir('stubborn', [
      'COPY index.html /www/index.html',
      'EXPOSE 8080',
      `CMD ["/bin/sh", "-c", "trap '' TERM; exec httpd -f -p $PORT -h /www"]`,
    ]);
    assertExit(await cli(['deploy', dir, '--name', 'stubborn', '--subdomain', sub], { home }), 0);
    const res = await cli(['stop', sub], { home });
    assertExit(res, 0);
    assert.equal(res.stdout, 'deployment stubborn stopped\n');
    const err = lines(res.stderr);
    assert.equal(err[0], 'Stopping stubborn: the app gets up to 10 s to exit after SIGTERM, then it is killed…');
    assert.equal(err[1], '  still stopping (2 s)…');
  });

  test('Ctrl-C during deploy says the build goes on and how to cancel it; cancel stops it', async () => {
    const sub = `slow-${randomUUID().slice(0, 6)}`;
    const dir = await appDir('slowbuild', ['RUN echo build-step-started && sleep 120']);
    const run = startCli(['deploy', dir, '--name', 'slowbuild', '--subdomain', sub], { home });
    await until(() => run.stdout().includes('build-step-started'), 'the build step to start');
    run.child.kill('SIGINT');
    const res = await run.done;
    assertExit(res, 130);
    const id = buildIdIn(res.stderr);
    assert.equal(
      lines(res.stderr).at(-2),
      `error: interrupted: build ${id} of slowbuild is still running on the server. Cancel it with \`slipway cancel ${sub}\`, or follow it with \`slipway logs ${sub} --build ${id} -f\``,
    );
    const builds = JSON.parse((await cli(['builds', sub, '--json'], { home })).stdout) as Array<{ id: string; status: string }>;
    assert.equal(builds[0]?.status, 'building', 'what the message says is true: the build runs on');

    const cancelled = await cli(['cancel', sub], { home });
    assertExit(cancelled, 0);
    assert.equal(cancelled.stdout, `build ${id} of slowbuild cancelled\n`);
    const after = JSON.parse((await cli(['builds', sub, '--json'], { home })).stdout) as Array<{ status: string }>;
    assert.equal(after[0]?.status, 'cancelled');
    const status = JSON.parse((await cli(['status', sub, '--json'], { home })).stdout) as { status: string };
    assert.equal(status.status, 'stopped');

    const again = await cli(['cancel', sub], { home });
    assertExit(again, 1);
    assert.equal(again.stderr, 'error: no build of slowbuild is in progress\n');

    // Another user's app is not found, as everywhere in the API.
    const other = await server.newUser('other');
    const app = (await server.request('GET', '/api/v1/deployments', { token: user.token })).json.find((d: { subdomain: string }) => d.subdomain === sub);
    const foreign = await server.request('POST', `/api/v1/deployments/${app.id}/cancel`, { token: other.token });
    assert.equal(foreign.status, 404);
    assert.equal(foreign.json.error, 'not_found');
  });
});

describe('small things a new user looks for', () => {
  test('--version prints the version of package.json', async () => {
    const pkg = JSON.parse(await readFile(path.join(PROJECT_ROOT, 'package.json'), 'utf8')) as { version: string };
    const res = await cli(['--version'], { home });
    assertExit(res, 0);
    assert.equal(res.stdout, `slipway ${pkg.version}\n`);
  });

  test('create --git makes a git app and deploys it', async () => {
    let git: GitServer | undefined;
    try {
      git = await startGitServer();
      const dockerfile = [`FROM ${BUSYBOX_IMAGE}`, 'COPY web/index.html /www/index.html', 'EXPOSE 8080', 'CMD ["/bin/sh", "-c", "exec httpd -f -p $PORT -h /www"]', ''];
      const repo = await git.createRepo(`site-${randomUUID().slice(0, 6)}`, { 'deploy/Dockerfile': dockerfile.join('\n'), 'web/index.html': 'from git\n' }, { branch: 'release' });
      const sub = `git-${randomUUID().slice(0, 6)}`;
      const res = await cli(['create', '--git', repo.url, '--branch', 'release', '--subdomain', sub, '--name', 'gitsite', '--dockerfile', 'deploy/Dockerfile'], { home });
      assertExit(res, 0);
      assert.equal(lines(res.stderr)[0], `Created app gitsite at subdomain ${sub} from ${repo.url} (release)`);
      assert.equal(res.stdout.trimEnd().split('\n').at(-1), `http://${sub}.localhost:${server.port}/`);
      const status = JSON.parse((await cli(['status', sub, '--json'], { home })).stdout) as Record<string, unknown>;
      assert.equal(status['source_type'], 'git');
      assert.equal(status['branch'], 'release');
      assert.equal(status['dockerfile_path'], 'deploy/Dockerfile');
      assert.equal(status['status'], 'running');
    } finally {
      await git?.close();
    }
  });
});

describe('the server console', () => {
  let proc: ServerProcess | undefined;
  let dataDir: string;
  before(async () => {
    dataDir = await mkdtemp(path.join(os.tmpdir(), 'slipway-feedback-server-'));
  });
  after(async () => {
    await proc?.kill();
    await removeEngineObjects(dataDir);
    await rm(dataDir, { recursive: true, force: true });
  });

  test('the console has a start-up line and a line per deploy (start, outcome, duration), never a secret', async () => {
    proc = await spawnServerProcess(testEnv(dataDir));
    assert.match(proc.output(), /^Slipway is listening on http:\/\/127\.0\.0\.1:\d+ \(apps at http:\/\/<subdomain>\.localhost:\d+\/\)$/m);
    const ownHome = await mkdtemp(path.join(work, 'home-'));
    const login = await cli(['login', '--url', proc.url, '--email', ADMIN_EMAIL], { home: ownHome, input: `${ADMIN_PASSWORD}\n` });
    assertExit(login, 0);
    const key = await cli(['keys', 'create', 'console-test', '--json'], { home: ownHome });
    assertExit(key, 0);
    const secret = (JSON.parse(key.stdout) as { key: string }).key;

    const good = await appDir('good', ['COPY index.html /www/index.html', 'EXPOSE 8080', 'CMD ["/bin/sh", "-c", "exec httpd -f -p $PORT -h /www"]']);
    assertExit(await cli(['deploy', good, '--name', 'good', '--subdomain', 'good-app'], { home: ownHome }), 0);
    const bad = await appDir('bad', ['RUN echo about to fail && exit 3']);
    assertExit(await cli(['deploy', bad, '--name', 'bad', '--subdomain', 'bad-app'], { home: ownHome }), 1);

    const out = proc.output();
    assert.match(out, /^\[slipway\] info: deploy of good \(good-app, build [0-9a-f]{8}\) started$/m);
    assert.match(out, /^\[slipway\] info: deploy of good \(good-app, build [0-9a-f]{8}\) succeeded in \d+\.\d s$/m);
    assert.match(out, /^\[slipway\] info: deploy of bad \(bad-app, build [0-9a-f]{8}\) failed after \d+\.\d s: the image build failed$/m);
    assert.ok(!out.includes(secret) && !out.includes(secret.slice(0, 20)), 'no key in the console');
    assert.ok(!out.includes(ADMIN_PASSWORD), 'no password in the console');
  });
});
