// End-to-end tests of `slipway env` (list, set, unset, import) against a real server; restart of a running app on the real engine.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { busyboxArchive, createArchiveApp, deployAndWait, testEngine } from '../helpers/apps.js';
import { ensureBusyboxImage, writeBusyboxApp } from '../helpers/busybox-image.js';
import { PROJECT_ROOT, startTestServer, type TestServer } from '../helpers/server.js';

const BIN = path.join(PROJECT_ROOT, 'bin', 'slipway.js');

interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

describe('slipway env', () => {
  let server: TestServer;
  let work: string;
  let user: Awaited<ReturnType<TestServer['newUser']>>;
  let pending: { id: string; subdomain: string };

  /** Runs `slipway ...args` logged in with the user's API key. */
  function cli(args: string[], options: { input?: string; cwd?: string } = {}): Promise<CliResult> {
    return new Promise((resolve, reject) => {
      const child = spawn(process.execPath, [BIN, ...args], {
        cwd: options.cwd ?? work,
        env: { HOME: work, XDG_CONFIG_HOME: work, PATH: process.env['PATH'] ?? '/usr/bin:/bin', SLIPWAY_URL: server.url, SLIPWAY_API_KEY: user.apiKey },
        stdio: ['pipe', 'pipe', 'pipe'],
      });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
      child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
      const timer = setTimeout(() => child.kill('SIGKILL'), 120_000);
      child.once('error', reject);
      child.once('close', (code) => {
        clearTimeout(timer);
        resolve({ code, stdout, stderr });
      });
      child.stdin.end(options.input ?? '');
    });
  }
  const envOf = async (id: string): Promise<Array<[string, string | null, boolean]>> =>
    (await server.request('GET', `/api/v1/deployments/${id}/env`, { token: user.token })).json.vars.map((v: { key: string; value: string | null; secret: boolean }) => [v.key, v.value, v.secret]);

  before(async () => {
    work = await mkdtemp(path.join(os.tmpdir(), 'slipway-env-cli-'));
    server = await startTestServer();
    user = await server.newUser('envcli');
    const created = await server.request('POST', '/api/v1/deployments', { token: user.token, body: { name: 'envapp', subdomain: `envapp-${process.pid}`, source_type: 'archive' } });
    pending = { id: created.json.id, subdomain: created.json.subdomain };
  });
  after(async () => {
    await server.close();
    await rm(work, { recursive: true, force: true });
  });

  test('env set, list (secrets masked), unset; an app that is not running is not restarted, and the CLI says so', async () => {
    const none = await cli(['env', pending.subdomain]);
    assert.equal(none.code, 0, none.stderr);
    assert.match(none.stdout, /has no environment variables/);

    const set = await cli(['env', 'set', '--app', pending.subdomain, 'LOG_LEVEL=debug', 'GREETING=hello world', 'EMPTY=', 'WITH_EQUALS=a=b']);
    assert.equal(set.code, 0, set.stderr);
    assert.match(set.stdout, /Set LOG_LEVEL, GREETING, EMPTY, WITH_EQUALS on envapp\./);
    assert.match(set.stdout, /envapp is pending, so it was not restarted: the change applies at its next deploy, restart or rollback\./);
    const secret = await cli(['env', 'set', '-a', pending.subdomain, '--secret', 'API_TOKEN=tok_never_printed']);
    assert.equal(secret.code, 0, secret.stderr);
    assert.match(secret.stdout, /Set API_TOKEN \(secret\) on envapp/);
    assert.ok(!secret.stdout.includes('tok_never_printed'));

    const list = await cli(['env', '--app', pending.subdomain]);
    assert.equal(list.code, 0, list.stderr);
    const lines = list.stdout.trim().split('\n');
    assert.match(lines[0] ?? '', /^KEY\s+VALUE\s+SECRET\s+UPDATED$/);
    const header = lines[0] ?? '';
    const [valueAt, secretAt] = [header.indexOf('VALUE'), header.indexOf('SECRET')];
    const cells = (l: string): string[] => [l.slice(0, valueAt).trim(), l.slice(valueAt, secretAt).trim(), l.slice(secretAt, header.indexOf('UPDATED')).trim()];
    assert.deepEqual(lines.slice(1).map(cells), [
      ['API_TOKEN', '********', 'yes'],
      ['EMPTY', '', ''],
      ['GREETING', 'hello world', ''],
      ['LOG_LEVEL', 'debug', ''],
      ['WITH_EQUALS', 'a=b', ''],
    ]);
    assert.ok(!list.stdout.includes('tok_never_printed'));
    const json = await cli(['env', pending.subdomain, '--json']);
    assert.deepEqual(JSON.parse(json.stdout).vars.find((v: { key: string }) => v.key === 'API_TOKEN').value, null);

    const unset = await cli(['env', 'unset', '--app', pending.subdomain, 'LOG_LEVEL', 'EMPTY', '--no-restart']);
    assert.equal(unset.code, 0, unset.stderr);
    assert.match(unset.stdout, /Removed LOG_LEVEL, EMPTY on envapp\.\nNot restarted: the change applies at the next deploy, restart or rollback \(`slipway restart envapp-\d+`\)\./);
    assert.deepEqual(await envOf(pending.id), [['API_TOKEN', null, true], ['GREETING', 'hello world', false], ['WITH_EQUALS', 'a=b', false]]);
  });

  test('bad input: the server message naming the key, or a usage error; nothing changes', async () => {
    const before = await envOf(pending.id);
    const reserved = await cli(['env', 'set', '--app', pending.subdomain, 'PORT=1']);
    assert.equal(reserved.code, 1);
    assert.match(reserved.stderr, /^error: variable "PORT" is reserved/m);
    const noEquals = await cli(['env', 'set', '--app', pending.subdomain, 'JUSTAKEY']);
    assert.equal(noEquals.code, 2);
    assert.match(noEquals.stderr, /expected KEY=VALUE, got "JUSTAKEY"/);
    const noName = await cli(['env', 'set', '--app', pending.subdomain, '=hunter2']);
    assert.equal(noName.code, 2);
    assert.match(noName.stderr, /a value without a name/);
    assert.ok(!noName.stderr.includes('hunter2'), 'the value is not echoed');
    const noApp = await cli(['env', 'set', 'A=1']);
    assert.equal(noApp.code, 2);
    assert.match(noApp.stderr, /name the app \(--app APP\)/);
    const unknown = await cli(['env', 'list-of-nothing']);
    assert.equal(unknown.code, 1);
    assert.match(unknown.stderr, /no app named "list-of-nothing"/);
    assert.deepEqual(await envOf(pending.id), before);
  });

  test('env import reads a dotenv file (quotes, escapes, comments, export) in one change; a bad line names its number', async () => {
    const file = path.join(work, '.env');
    await writeFile(
      file,
      ['# database', 'export DATABASE_URL="postgres://app:p%40ss@db:5432/app"', "QUOTED='single $literal'", 'MULTI="a\\nb"', 'INLINE=value # comment', ''].join('\n'),
    );
    const res = await cli(['env', 'import', '.env', '--app', pending.subdomain, '--no-restart']);
    assert.equal(res.code, 0, res.stderr);
    assert.match(res.stdout, /Imported 4 variables from \.env on envapp\./);
    const env = new Map((await envOf(pending.id)).map(([k, v]) => [k, v]));
    assert.equal(env.get('DATABASE_URL'), 'postgres://app:p%40ss@db:5432/app');
    assert.equal(env.get('QUOTED'), 'single $literal');
    assert.equal(env.get('MULTI'), 'a\nb');
    assert.equal(env.get('INLINE'), 'value');

    const secrets = await cli(['env', 'import', '-', '--app', pending.subdomain, '--secret', '--no-restart'], { input: 'STDIN_SECRET=from-stdin\n' });
    assert.equal(secrets.code, 0, secrets.stderr);
    assert.match(secrets.stdout, /Imported 1 variable from - as secrets/);
    assert.deepEqual((await envOf(pending.id)).find(([k]) => k === 'STDIN_SECRET'), ['STDIN_SECRET', null, true]);

    await writeFile(file, 'GOOD=1\nBAD LINE secret-ish\n');
    const bad = await cli(['env', 'import', file, '--app', pending.subdomain]);
    assert.equal(bad.code, 1);
    assert.match(bad.stderr, /^error: .*\.env: line 2: expected "=" after BAD$/m);
    assert.ok(!bad.stderr.includes('secret-ish'));
    assert.equal((await envOf(pending.id)).find(([k]) => k === 'GOOD'), undefined, 'nothing of a bad file is set');
    const missing = await cli(['env', 'import', 'nope.env', '--app', pending.subdomain]);
    assert.match(missing.stderr, /cannot read nope\.env: no such file/);
  });

  test('set --restart on a running app restarts it (and says so); --no-restart leaves it as it is', async () => {
    const { archive } = await busyboxArchive({ body: 'env app\n' });
    const app = await createArchiveApp(server, user.token, archive);
    assert.equal((await deployAndWait(server, user.token, app.id)).status, 200);
    const live = async (): Promise<string> => (await server.request('GET', `/api/v1/deployments/${app.id}`, { token: user.token })).json.live_build_id;
    const containerBefore = (await server.request('GET', `/api/v1/deployments/${app.id}/builds`, { token: user.token })).json[0].id;
    assert.equal(await live(), containerBefore);

    const res = await cli(['env', 'set', '--app', app.subdomain, 'FEATURE=on', '--restart']);
    assert.equal(res.code, 0, res.stderr);
    assert.match(res.stdout, new RegExp(`Set FEATURE on ${app.subdomain}\\. Restarting ${app.subdomain}…\\nRestarted: deployment ${app.subdomain} restarted \\(build ${containerBefore}\\)\\.`));
    const json = await cli(['env', 'set', '--app', app.subdomain, 'FEATURE=off', '--no-restart', '--json']);
    assert.equal(JSON.parse(json.stdout).restarted, false);
    assert.equal(JSON.parse(json.stdout).config_pending, true);
    assert.equal((await server.request('DELETE', `/api/v1/deployments/${app.id}`, { token: user.token })).status, 204);
  });

  test('slipway.json may list volumes: the first deploy creates the app with them, a changed list is applied before the next deploy', async () => {
    await ensureBusyboxImage(testEngine());
    const dir = path.join(work, 'with-volumes');
    await mkdir(dir);
    await writeBusyboxApp(dir, { body: 'volumes app\n' });
    await writeFile(path.join(dir, 'slipway.json'), JSON.stringify({ volumes: [{ name: 'data', mount_path: '/data' }] }));
    const subdomain = `vols-${process.pid}`;
    const first = await cli(['deploy', dir, '--subdomain', subdomain]);
    assert.equal(first.code, 0, first.stderr);
    assert.match(first.stderr, /Volumes from slipway\.json: data at \/data/);
    const file = JSON.parse(await readFile(path.join(dir, 'slipway.json'), 'utf8'));
    assert.deepEqual(file.volumes, [{ name: 'data', mount_path: '/data' }], 'writing the link keeps the volumes');
    assert.equal(file.server, server.url);
    const id = file.deployment_id as string;
    const get = async (): Promise<unknown> => (await server.request('GET', `/api/v1/deployments/${id}`, { token: user.token })).json.volumes;
    assert.deepEqual(await get(), [{ name: 'data', mount_path: '/data' }]);

    const again = await cli(['deploy', dir]);
    assert.equal(again.code, 0, again.stderr);
    assert.doesNotMatch(again.stderr, /Volumes of/, 'an unchanged list is not sent again');
    await writeFile(path.join(dir, 'slipway.json'), JSON.stringify({ ...file, volumes: [{ name: 'data', mount_path: '/data' }, { name: 'cache', mount_path: '/cache' }] }));
    const changed = await cli(['deploy', dir]);
    assert.equal(changed.code, 0, changed.stderr);
    assert.match(changed.stderr, /Volumes of with-volumes set from slipway\.json: data at \/data, cache at \/cache/);
    assert.deepEqual(await get(), [{ name: 'data', mount_path: '/data' }, { name: 'cache', mount_path: '/cache' }]);

    await writeFile(path.join(dir, 'slipway.json'), JSON.stringify({ ...file, volumes: [{ name: 'bad_name', mount_path: '/x' }] }));
    const bad = await cli(['deploy', dir]);
    assert.equal(bad.code, 1);
    assert.match(bad.stderr, /error: volumes\[0\]\.name "bad_name" must be a DNS label/);
    await writeFile(path.join(dir, 'slipway.json'), JSON.stringify({ ...file, volumes: 'data:/data' }));
    assert.match((await cli(['deploy', dir])).stderr, /"volumes" must be a list/);
    assert.equal((await server.request('DELETE', `/api/v1/deployments/${id}`, { token: user.token })).status, 204);
  });
});
