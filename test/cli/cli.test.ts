// End-to-end tests of the `slipway` CLI client: the built bin/slipway.js as a subprocess against a real server and engine.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { mkdir, mkdtemp, readFile, rm, stat, symlink, writeFile } from 'node:fs/promises';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { createDockerEngine } from '../../src/runtime/docker/docker-engine.js';
import { BUSYBOX_IMAGE, ensureBusyboxImage, writeBusyboxApp } from '../helpers/busybox-image.js';
import { cli } from '../helpers/cli.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

const MiB = 1024 * 1024;

/** GET / of an app through the server's router (Host: <subdomain>.localhost). */
function getApp(port: number, subdomain: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.get({ host: '127.0.0.1', port, path: '/', headers: { host: `${subdomain}.localhost:${port}` }, timeout: 10_000 }, (res) => {
      let body = '';
      res.on('data', (chunk: Buffer) => (body += chunk.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.once('timeout', () => req.destroy(new Error('timeout')));
    req.once('error', reject);
  });
}

let server: TestServer;
let work: string;
let user: Awaited<ReturnType<TestServer['newUser']>>;
/** A home whose saved login is `user`'s (email/password login, in `before`). */
let home: string;

async function newHome(): Promise<string> {
  return mkdtemp(path.join(work, 'home-'));
}

before(async () => {
  work = await mkdtemp(path.join(os.tmpdir(), 'slipway-cli-test-'));
  server = await startTestServer();
  user = await server.newUser('cli');
  home = await newHome();
  const login = await cli(['login', '--url', server.url], { home, input: `${user.email}\n${user.password}\n` });
  assert.equal(login.code, 0, login.stderr);
});

after(async () => {
  // Remove what the tests deployed (containers and images) before closing the server.
  const list = await server.request('GET', '/api/v1/deployments', { token: user.token }).catch(() => undefined);
  for (const d of (list?.json ?? []) as Array<{ id: string }>) {
    await server.request('DELETE', `/api/v1/deployments/${d.id}`, { token: user.token }).catch(() => undefined);
  }
  await server.close();
  await rm(work, { recursive: true, force: true });
});

// The three groups share the server alone (each its own users, apps and homes): they run at once,
// the cases of each in order (a group would inherit `concurrency: true`; 1 keeps its cases in order).
describe('the slipway CLI', { concurrency: true }, () => {
  describe('login and credentials', { concurrency: 1 }, loginAndCredentials);
  describe('lists over several pages', { concurrency: 1 }, listsOverSeveralPages);
  describe('deploy and manage an app', { concurrency: 1 }, deployAndManageAnApp);
});

function loginAndCredentials(): void {
  test('login with e-mail and password on stdin; whoami; the config file is private', async () => {
    // A home of its own (`home` is logged in by `before`: the groups run at once).
    const home = await newHome();
    const login = await cli(['login', '--url', server.url], { home, input: `${user.email}\n${user.password}\n` });
    assert.equal(login.code, 0, login.stderr);
    assert.match(login.stdout, new RegExp(`Logged in to .* as ${user.email}`));
    assert.ok(!login.stdout.includes(user.password) && !login.stderr.includes(user.password), 'the password is never echoed');

    const whoami = await cli(['whoami'], { home });
    assert.equal(whoami.code, 0, whoami.stderr);
    assert.match(whoami.stdout, new RegExp(user.email));

    const file = path.join(home, 'slipway', 'config.json');
    assert.equal((await stat(file)).mode & 0o777, 0o600);
    assert.equal((await stat(path.dirname(file))).mode & 0o777, 0o700);
    const saved = JSON.parse(await readFile(file, 'utf8')) as Record<string, unknown>;
    assert.equal(saved['url'], server.url);
    assert.equal(typeof saved['token'], 'string');
  });

  test('a wrong password is refused with the server message', async () => {
    const other = await newHome();
    const res = await cli(['login', '--url', server.url, '--email', user.email], { home: other, input: 'wrong-password\n' });
    assert.equal(res.code, 1);
    assert.match(res.stderr, /^error: .+$/m);
  });

  test('login with --api-key, then logout forgets it', async () => {
    const other = await newHome();
    const login = await cli(['login', '--url', server.url, '--api-key', user.apiKey], { home: other });
    assert.equal(login.code, 0, login.stderr);
    const whoami = await cli(['whoami', '--json'], { home: other });
    assert.equal(JSON.parse(whoami.stdout).email, user.email);
    const logout = await cli(['logout'], { home: other });
    assert.equal(logout.code, 0, logout.stderr);
    const after = await cli(['whoami'], { home: other });
    assert.equal(after.code, 1);
    assert.match(after.stderr, /not logged in/);
  });

  test('logout ends the session on the server', async () => {
    const other = await newHome();
    await cli(['login', '--url', server.url], { home: other, input: `${user.email}\n${user.password}\n` });
    const saved = JSON.parse(await readFile(path.join(other, 'slipway', 'config.json'), 'utf8')) as { token: string };
    const logout = await cli(['logout'], { home: other });
    assert.equal(logout.code, 0, logout.stderr);
    const me = await server.request('GET', '/api/v1/users/me', { token: saved.token });
    assert.equal(me.status, 401);
  });

  test('SLIPWAY_URL and SLIPWAY_API_KEY override the saved login', async () => {
    const empty = await newHome();
    const res = await cli(['whoami'], { home: empty, env: { SLIPWAY_URL: server.url, SLIPWAY_API_KEY: user.apiKey } });
    assert.equal(res.code, 0, res.stderr);
    assert.match(res.stdout, new RegExp(user.email));
  });

  test('an unreachable server is one line saying what to do', async () => {
    const res = await cli(['apps'], { home, env: { SLIPWAY_URL: 'http://127.0.0.1:1', SLIPWAY_API_KEY: 'slw_k1_x' } });
    assert.equal(res.code, 1);
    assert.equal(res.stderr, 'error: cannot reach Slipway at http://127.0.0.1:1: is the server running? (npm start)\n');
  });

  test('a wrong key gives the login hint', async () => {
    const res = await cli(['apps'], { home, env: { SLIPWAY_URL: server.url, SLIPWAY_API_KEY: 'slw_k1_notavalidkeynotavalidkeynotavalid' } });
    assert.equal(res.code, 1);
    assert.match(res.stderr, /^error: your login has expired or the key was revoked: run `slipway login`\n$/);
  });

  test('usage errors exit with 2; --help shows examples', async () => {
    const missing = await cli(['logs'], { home });
    assert.equal(missing.code, 2);
    const help = await cli(['deploy', '--help'], { home });
    assert.equal(help.code, 0);
    assert.match(help.stdout, /Examples:/);
  });

  test('keys create, ls and rm', async () => {
    const created = await cli(['keys', 'create', 'cli-test-key'], { home });
    assert.equal(created.code, 0, created.stderr);
    assert.match(created.stdout, /^slw_k1_\w+\n$/);
    const list = await cli(['keys', 'ls'], { home });
    assert.match(list.stdout, /cli-test-key/);
    // Revoking asks first, as `slipway rm` does; "n" (or no answer) keeps the key, --yes skips the question.
    const kept = await cli(['keys', 'rm', 'cli-test-key'], { home, input: 'n\n' });
    assert.equal(kept.code, 1);
    assert.match(kept.stderr, /^Revoke API key "cli-test-key" \([0-9a-f-]{36}\)\? Whatever uses it loses access at once\. \[y\/N\] \nerror: not revoked \(answer "y" to confirm, or pass --yes\)\n$/);
    const stillWorks = await cli(['whoami'], { home, env: { SLIPWAY_URL: server.url, SLIPWAY_API_KEY: created.stdout.trim() } });
    assert.equal(stillWorks.code, 0, stillWorks.stderr);
    const removed = await cli(['keys', 'rm', 'cli-test-key', '--yes'], { home });
    assert.equal(removed.code, 0, removed.stderr);
    assert.match(removed.stdout, /^Revoked API key "cli-test-key" \([0-9a-f-]{36}\)\.\n$/);
    const whoami = await cli(['whoami'], { home, env: { SLIPWAY_URL: server.url, SLIPWAY_API_KEY: created.stdout.trim() } });
    assert.equal(whoami.code, 1);
  });

  test('password: piped current and new passwords', async () => {
    const other = await server.newUser('pw');
    const otherHome = await newHome();
    await cli(['login', '--url', server.url], { home: otherHome, input: `${other.email}\n${other.password}\n` });
    const mismatch = await cli(['password'], { home: otherHome, input: `${other.password}\nnew-password-1\nnew-password-2\n` });
    assert.equal(mismatch.code, 1);
    const changed = await cli(['password'], { home: otherHome, input: `${other.password}\nnew-password-1\nnew-password-1\n` });
    assert.equal(changed.code, 0, changed.stderr);
    const login = await cli(['login', '--url', server.url, '--email', other.email], { home: await newHome(), input: 'new-password-1\n' });
    assert.equal(login.code, 0, login.stderr);
  });
}

function listsOverSeveralPages(): void {
  test('apps shows every app, following the next links; --limit cuts; an app on a later page resolves by name', async () => {
    const owner = await server.newUser('clipages');
    const env = { SLIPWAY_URL: server.url, SLIPWAY_API_KEY: owner.apiKey };
    const ids: string[] = [];
    for (let i = 0; i < 120; i += 1) {
      const subdomain = `cp-${process.pid}-${i}`;
      const res = await server.request('POST', '/api/v1/deployments', { token: owner.token, body: { name: `page-app-${String(i).padStart(3, '0')}`, subdomain, source_type: 'archive' } });
      assert.equal(res.status, 201, res.text);
      ids.push(res.json.id);
    }
    const newestFirst = [...ids].reverse();

    const all = await cli(['apps', '--json'], { home, env });
    assert.equal(all.code, 0, all.stderr);
    assert.deepEqual(
      (JSON.parse(all.stdout) as Array<{ id: string }>).map((d) => d.id),
      newestFirst,
      'all 120 apps (two pages of the server), newest first, none twice',
    );

    const cut = await cli(['apps', '--limit', '110', '--json'], { home, env });
    assert.equal(cut.code, 0, cut.stderr);
    assert.deepEqual(
      (JSON.parse(cut.stdout) as Array<{ id: string }>).map((d) => d.id),
      newestFirst.slice(0, 110),
    );

    const table = await cli(['apps', '--limit', '3'], { home, env });
    assert.equal(table.code, 0, table.stderr);
    const lines = table.stdout.trim().split('\n');
    assert.equal(lines.length, 4, `a header and three apps:\n${table.stdout}`);
    assert.match(lines[1] ?? '', /page-app-119/);

    // The oldest app is only on the second page: naming it still works.
    const status = await cli(['status', 'page-app-000', '--json'], { home, env });
    assert.equal(status.code, 0, status.stderr);
    assert.equal(JSON.parse(status.stdout).id, ids[0]);

    for (const bad of ['0', '-1', 'x', '1.5']) {
      assert.equal((await cli(['apps', '--limit', bad], { home, env })).code, 2, `--limit ${bad}`);
    }

    for (let i = 0; i < 2; i += 1) await server.request('POST', '/api/v1/api-keys', { token: owner.token, body: { name: `more-${i}` } });
    const keys = await cli(['keys', 'ls', '--limit', '2', '--json'], { home, env });
    assert.equal(keys.code, 0, keys.stderr);
    const newestKeys = (await server.request('GET', '/api/v1/api-keys', { token: owner.token })).json.slice(0, 2).map((k: { id: string }) => k.id);
    assert.deepEqual(
      (JSON.parse(keys.stdout) as Array<{ id: string }>).map((k) => k.id),
      newestKeys,
    );
  });
}

function deployAndManageAnApp(): void {
  const secret = `SECRET-${randomUUID()}`;
  /** Uploaded, and found by the same grep that must not find the secret: the check can fail. */
  const canary = `CANARY-${randomUUID()}`;
  const subdomain = `cli-${randomUUID().slice(0, 8)}`;
  let appDir = '';
  let firstBody = '';

  before(async () => {
    await ensureBusyboxImage(createDockerEngine());
    appDir = path.join(work, 'my-app');
    await mkdir(appDir);
    firstBody = await writeBusyboxApp(appDir, { body: `first ${randomUUID()}\n` });
    // The build proves what reached the server: no secret, no big file, no escaping link.
    const dockerfile = await readFile(path.join(appDir, 'Dockerfile'), 'utf8');
    await writeFile(
      path.join(appDir, 'Dockerfile'),
      dockerfile.replace(
        /^(FROM .*\n)/,
        `$1COPY . /src\nRUN half=SECRET- && ! grep -r -e "\${half}${secret.slice('SECRET-'.length)}" /src && test ! -e /src/big.bin && test ! -e /src/leak && test -L /src/inside-link && test ! -e /src/slipway.json && c=CANARY- && grep -q -r -e "\${c}${canary.slice('CANARY-'.length)}" /src && echo source-checked\n`,
      ),
    );
    await writeFile(path.join(appDir, 'big.bin'), Buffer.alloc(20 * MiB, 7));
    await writeFile(path.join(appDir, '.dockerignore'), 'big.bin\n');
    await writeFile(path.join(appDir, 'canary.txt'), `${canary}\n`);
    const outside = await mkdtemp(path.join(os.tmpdir(), 'slipway-secret-'));
    await writeFile(path.join(outside, 'secret.txt'), `${secret}\n`);
    await symlink(path.join(outside, 'secret.txt'), path.join(appDir, 'leak'));
    await symlink('index.html', path.join(appDir, 'inside-link'));
  });

  test('first deploy: creates and links the app, streams the build log, prints a URL that serves it', async () => {
    const res = await cli(['deploy', appDir, '--subdomain', subdomain], { home });
    assert.equal(res.code, 0, `${res.stdout}\n${res.stderr}`);
    assert.match(res.stderr, /warning: skipped leak -> .*secret\.txt/);
    const lines = res.stdout.trimEnd().split('\n');
    const url = lines.at(-1) ?? '';
    assert.match(url, new RegExp(`^http://${subdomain}\\.localhost:\\d+/$`));
    const stepLine = lines.findIndex((line) => line.includes('source-checked') || /FROM|Step/.test(line));
    assert.ok(stepLine !== -1 && stepLine < lines.length - 1, `build log before the URL:\n${res.stdout}`);
    const link = JSON.parse(await readFile(path.join(appDir, 'slipway.json'), 'utf8')) as { deployment_id: string };
    assert.match(link.deployment_id, /^[0-9a-f-]{36}$/);
    const served = await getApp(server.port, subdomain);
    assert.deepEqual(served, { status: 200, body: firstBody });
  });

  test('second deploy reuses slipway.json; the upload is small; --json gives the answers', async () => {
    const secondBody = `second ${randomUUID()}\n`;
    await writeFile(path.join(appDir, 'index.html'), secondBody);
    const res = await cli(['deploy', '--json'], { home, cwd: appDir });
    assert.equal(res.code, 0, res.stderr);
    const out = JSON.parse(res.stdout) as { deployment: { id: string; subdomain: string }; upload: { size: number }; build: { status: string } };
    const link = JSON.parse(await readFile(path.join(appDir, 'slipway.json'), 'utf8')) as { deployment_id: string };
    assert.equal(out.deployment.id, link.deployment_id);
    assert.equal(out.build.status, 'succeeded');
    assert.ok(out.upload.size > 0 && out.upload.size < MiB, `upload size ${out.upload.size}`);
    assert.deepEqual(await getApp(server.port, subdomain), { status: 200, body: secondBody });

    const apps = await cli(['apps'], { home });
    assert.equal(apps.code, 0, apps.stderr);
    assert.match(apps.stdout, /NAME\s+SUBDOMAIN\s+STATUS\s+URL\s+UPDATED/);
    assert.match(apps.stdout, new RegExp(`my-app\\s+${subdomain}\\s+running\\s+http://${subdomain}`));
    const appsJson = JSON.parse((await cli(['apps', '--json'], { home })).stdout) as unknown[];
    assert.equal(appsJson.length, 1);
    const builds = await cli(['builds', subdomain], { home });
    assert.equal(builds.stdout.trim().split('\n').length, 3, builds.stdout);
  });

  test('rollback serves the earlier content again', async () => {
    const res = await cli(['rollback', 'my-app'], { home });
    assert.equal(res.code, 0, res.stderr);
    assert.deepEqual(await getApp(server.port, subdomain), { status: 200, body: firstBody });
    const status = await cli(['status', subdomain, '--json'], { home });
    assert.equal(JSON.parse(status.stdout).status, 'running');
  });

  test('logs of a build', async () => {
    const builds = JSON.parse((await cli(['builds', subdomain, '--json'], { home })).stdout) as Array<{ id: string }>;
    const oldest = builds.at(-1)?.id ?? '';
    const res = await cli(['logs', subdomain, '--build', oldest.slice(0, 8)], { home });
    assert.equal(res.code, 0, res.stderr);
    assert.match(res.stdout, /source-checked/);
  });

  test('a failing build exits non-zero with the error on stderr', async () => {
    const dir = path.join(work, 'broken');
    await mkdir(dir);
    await writeFile(path.join(dir, 'Dockerfile'), `FROM ${BUSYBOX_IMAGE}\nRUN echo about to fail && exit 3\n`);
    const res = await cli(['deploy', dir, '--subdomain', `broken-${randomUUID().slice(0, 8)}`], { home });
    assert.equal(res.code, 1, res.stdout);
    assert.match(res.stdout, /about to fail/);
    assert.match(res.stderr, /^error: build \w+ failed: .+/m);
    const rmed = await cli(['rm', 'broken', '--yes'], { home });
    assert.equal(rmed.code, 0, rmed.stderr);
  });

  test('rm asks for confirmation, then --yes removes the app', async () => {
    const refused = await cli(['rm', subdomain], { home, input: 'n\n' });
    assert.equal(refused.code, 1);
    assert.match(refused.stderr, /not deleted/);
    const removed = await cli(['rm', subdomain, '--yes'], { home });
    assert.equal(removed.code, 0, removed.stderr);
    const apps = JSON.parse((await cli(['apps', '--json'], { home })).stdout) as unknown[];
    assert.equal(apps.length, 0);
    assert.equal((await getApp(server.port, subdomain)).status, 404);
  });
}
