// The disaster (contract §25): two apps, a backup while serving, the host lost (data directory, containers and images gone), a restore into a new data directory, a start: everything is back.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import { appRequest, busyboxScriptArchive, eventually, upload } from '../helpers/apps.js';
import { cli } from '../helpers/cli.js';
import { ADMIN_EMAIL, ADMIN_PASSWORD, loginAs, removeEngineObjects, request, spawnServerProcess, testEnv, type ServerProcess } from '../helpers/server.js';

const root = fs.mkdtempSync(path.join(os.tmpdir(), 'slipway-disaster-'));
const lost = path.join(root, 'lost-host');
const fresh = path.join(root, 'new-host');
const running: ServerProcess[] = [];

after(async () => {
  for (const server of running) await server.kill();
  await removeEngineObjects(fresh);
  await removeEngineObjects(lost);
  fs.rmSync(root, { recursive: true, force: true });
});

/** A busybox app serving its NAME and SECRET variables, written into its page at start. */
async function envApp(): Promise<Buffer> {
  return busyboxScriptArchive('mkdir -p /www; printf "%s %s\\n" "$NAME" "$SECRET" > /www/index.html; exec httpd -f -p "${PORT:-8080}" -h /www');
}

const served = async (port: number, subdomain: string, body: string): Promise<void> => {
  await eventually(async () => {
    const res = await appRequest(port, subdomain).catch(() => undefined);
    return res?.status === 200 && res.body === body ? true : undefined;
  }, 120_000, `${subdomain} to serve ${JSON.stringify(body)}`);
};

test('a lost host comes back from its self-backup with two commands: apps serve with their configuration, passwords and API keys work', async () => {
  const home = path.join(root, 'home');
  fs.mkdirSync(home);
  const run = (dataDir: string, args: string[]) => cli(['server', ...args], { home, env: testEnv(dataDir) });

  // 1. The installation: a user with a password and an API key, two live apps with variables and a secret.
  const server = await spawnServerProcess(testEnv(lost));
  running.push(server);
  const admin = await loginAs(server.url, ADMIN_EMAIL, ADMIN_PASSWORD);
  const email = `disaster-${process.pid}@test.local`;
  const password = `pw-${crypto.randomBytes(6).toString('hex')}`;
  assert.equal((await request(server.url, 'POST', '/api/v1/users', { token: admin, body: { email, password } })).status, 201);
  const token = await loginAs(server.url, email, password);
  const apiKey = (await request(server.url, 'POST', '/api/v1/api-keys', { token, body: { name: 'disaster' } })).json.key as string;
  const archive = await envApp();
  const apps: Array<{ id: string; subdomain: string; body: string }> = [];
  for (const name of ['one', 'two']) {
    const subdomain = `disaster-${name}-${process.pid}`;
    const created = await request(server.url, 'POST', '/api/v1/deployments', { token: apiKey, body: { name: subdomain, subdomain, source_type: 'archive' } });
    assert.equal(created.status, 201, created.text);
    const id = created.json.id as string;
    const secret = `s-${crypto.randomBytes(8).toString('hex')}`;
    assert.equal((await request(server.url, 'PATCH', `/api/v1/deployments/${id}/env`, { token: apiKey, body: { vars: { NAME: name } } })).status, 200);
    assert.equal((await request(server.url, 'PATCH', `/api/v1/deployments/${id}/env`, { token: apiKey, body: { vars: { SECRET: secret }, secret: true } })).status, 200);
    assert.equal((await upload({ request: (m, p, o) => request(server.url, m, p, o) }, apiKey, id, archive)).status, 200);
    const deployed = await request(server.url, 'POST', `/api/v1/deployments/${id}/deploy?wait=true`, { token: apiKey });
    assert.equal(deployed.status, 200, deployed.text);
    apps.push({ id, subdomain, body: `${name} ${secret}\n` });
    await served(server.port, subdomain, `${name} ${secret}\n`);
  }

  // 2. A backup while it serves.
  const backup = path.join(root, 'slipway.backup');
  const backedUp = await run(lost, ['backup', '--file', backup]);
  assert.equal(backedUp.code, 0, backedUp.stderr);
  assert.equal(fs.statSync(backup).mode & 0o777, 0o600);
  const key = fs.readFileSync(path.join(lost, 'secret.key'));
  assert.equal(fs.readFileSync(backup).indexOf(key.toString().trim()), -1, 'the key is not in the backup');
  assert.match((await run(lost, ['backup', '--file', backup])).stderr, /exists; choose another name/);

  // 3. The host is lost: server, containers, images and data directory gone. The operator kept the key.
  await server.kill();
  await removeEngineObjects(lost);
  fs.rmSync(lost, { recursive: true, force: true });

  // Bad input first, each leaving the new data directory without an installation.
  const wrongKeyDir = path.join(root, 'wrong-key');
  fs.mkdirSync(wrongKeyDir, { mode: 0o700 });
  fs.writeFileSync(path.join(wrongKeyDir, 'secret.key'), `${crypto.randomBytes(32).toString('base64')}\n`, { mode: 0o600 });
  const wrongKey = await run(wrongKeyDir, ['restore', '--file', backup]);
  assert.equal(wrongKey.code, 1);
  assert.match(wrongKey.stderr, /another installation key.*Nothing was written/);
  assert.deepEqual(fs.readdirSync(wrongKeyDir), ['secret.key'], 'the data directory as it was: no lock, no staging');
  fs.mkdirSync(fresh, { mode: 0o700 });
  assert.match((await run(fresh, ['restore', '--file', backup])).stderr, /needs the installation key/);
  fs.writeFileSync(path.join(fresh, 'secret.key'), key, { mode: 0o600 });
  const truncated = path.join(root, 'truncated.backup');
  fs.writeFileSync(truncated, fs.readFileSync(backup).subarray(0, Math.floor(fs.statSync(backup).size * 0.7)));
  assert.match((await run(fresh, ['restore', '--file', truncated])).stderr, /truncated.*Nothing was written/);
  const tampered = path.join(root, 'tampered.backup');
  const bytes = fs.readFileSync(backup);
  bytes[bytes.length - 30] = (bytes[bytes.length - 30] ?? 0) ^ 0xff;
  fs.writeFileSync(tampered, bytes);
  assert.match((await run(fresh, ['restore', '--file', tampered])).stderr, /corrupt or was altered.*Nothing was written/);
  assert.deepEqual(fs.readdirSync(fresh), ['secret.key'], 'the data directory as it was: no lock, no staging');

  // 4. The restore, then a start.
  const restored = await run(fresh, ['restore', '--file', backup]);
  assert.equal(restored.code, 0, restored.stderr);
  assert.match(restored.stderr, /2 deployments that were live will be rebuilt/);
  const again = await run(fresh, ['restore', '--file', backup]);
  assert.match(again.stderr, /holds an installation.*--force/);
  const back = await spawnServerProcess(testEnv(fresh));
  running.push(back);
  for (const app of apps) await served(back.port, app.subdomain, app.body);
  const newToken = await loginAs(back.url, email, password);
  assert.equal((await request(back.url, 'GET', '/api/v1/users/me', { token: apiKey })).json.email, email);
  const env = await request(back.url, 'GET', `/api/v1/deployments/${apps[0]?.id ?? ''}/env`, { token: newToken });
  assert.deepEqual((env.json.vars as Array<{ key: string; value: string | null; secret: boolean }>).map((v) => [v.key, v.value, v.secret]), [['NAME', 'one', false], ['SECRET', null, true]]);
  assert.equal(fs.existsSync(path.join(fresh, 'restore-rebuild.json')), false, 'the rebuilds were queued once');
});
