// Stopping the server cleanly, and `slipway server cleanup`: no network or firewall chain of the installation is left behind.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import Database from 'better-sqlite3';
import Dockerode from 'dockerode';
import { busyboxArchive, upload } from '../helpers/apps.js';
import { cli } from '../helpers/cli.js';
import { ADMIN_EMAIL, ADMIN_PASSWORD, loginAs, removeEngineObjects, request, spawnServerProcess, testEnv, type ServerProcess, type TestServer } from '../helpers/server.js';

const docker = new Dockerode();

/** The installation's networks on the engine, with the firewall chains of each one's bridge. */
async function networksOf(instance: string): Promise<{ name: string; chain: string }[]> {
  const list = await docker.listNetworks({ filters: { label: [`dev.slipway.instance=${instance}`] } });
  return list.map((n) => {
    const bridge = n.Options?.['com.docker.network.bridge.name'] ?? `br-${n.Id.slice(0, 12)}`;
    return { name: n.Name, chain: `SLIPWAY-APP-${crypto.createHash('sha256').update(bridge).digest('hex').slice(0, 10)}` };
  });
}

const chains = (): string => execFileSync('iptables', ['-w', '5', '-S'], { encoding: 'utf8' });

/** Runs `slipway` against a server process: the admin's token, and a deployment deployed (waited for). */
async function deployApp(server: ServerProcess, label: string): Promise<{ token: string; id: string }> {
  const token = await loginAs(server.url, ADMIN_EMAIL, ADMIN_PASSWORD);
  const subdomain = `${label}-${process.pid}`;
  const created = await request(server.url, 'POST', '/api/v1/deployments', { token, body: { name: subdomain, subdomain, source_type: 'archive' } });
  assert.equal(created.status, 201, created.text);
  const id = created.json.id as string;
  const { archive } = await busyboxArchive();
  const ts = { request: (method: string, p: string, o?: object) => request(server.url, method, p, o) } as unknown as TestServer;
  assert.equal((await upload(ts, token, id, archive)).status, 200);
  const deployed = await request(server.url, 'POST', `/api/v1/deployments/${id}/deploy?wait=true`, { token });
  assert.equal(deployed.status, 200, deployed.text);
  return { token, id };
}

test('the attack: Ctrl-C leaves no unused network or chain behind, and `slipway server cleanup` removes what a running app kept', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'slipway-cleanup-'));
  const env = testEnv(dir);
  const home = fs.mkdtempSync(path.join(os.tmpdir(), 'slipway-cleanup-home-'));
  let server: ServerProcess | undefined;
  try {
    // 1. A deploy creates the build and app networks (and the app bridge's chains); the app is then deleted.
    server = await spawnServerProcess(env);
    const first = await deployApp(server, 'cleanup-a');
    const sqlite = new Database(path.join(dir, 'slipway.db'), { readonly: true });
    const instance = (sqlite.prepare('select id from instance').get() as { id: string }).id;
    sqlite.close();
    const before = await networksOf(instance);
    assert.equal(before.length, 2, JSON.stringify(before));
    const appNetwork = before.find((n) => n.name.endsWith('-apps'));
    assert.ok(appNetwork !== undefined && chains().includes(`-N ${appNetwork.chain}`), 'the app bridge has its chains');
    assert.equal((await request(server.url, 'DELETE', `/api/v1/deployments/${first.id}`, { token: first.token })).status, 204);
    await server.kill('SIGINT');
    assert.deepEqual(await networksOf(instance), [], 'a clean stop removes both networks');
    assert.ok(!chains().includes(`-N ${appNetwork.chain}`), "a clean stop removes the app bridge's chains");

    // 2. With an app running, a clean stop keeps its network (the app stays confined).
    server = await spawnServerProcess(env);
    await deployApp(server, 'cleanup-b');
    await server.kill('SIGINT');
    const kept = await networksOf(instance);
    assert.deepEqual(kept.map((n) => n.name), [`slipway-${instance}-apps`]);

    // 3. `slipway server cleanup` says what it keeps and why; with --remove-containers it removes it.
    const refused = await cli(['server', 'cleanup'], { home, env });
    assert.equal(refused.code, 1, refused.stderr);
    assert.match(refused.stderr, new RegExp(`Kept network slipway-${instance}-apps: 1 container\\(s\\) of this installation use it`));
    const done = await cli(['server', 'cleanup', '--remove-containers'], { home, env });
    assert.equal(done.code, 0, done.stderr);
    assert.match(done.stdout, /Removed 1 container\(s\)/);
    assert.match(done.stdout, new RegExp(`Removed network slipway-${instance}-apps and its firewall rules`));
    assert.deepEqual(await networksOf(instance), []);
    assert.ok(!chains().includes(`-N ${kept[0]?.chain ?? '?'}`), 'its chains are gone');
    const again = await cli(['server', 'cleanup'], { home, env });
    assert.equal(again.code, 0, again.stderr);
  } finally {
    await server?.kill('SIGKILL');
    await removeEngineObjects(dir);
    fs.rmSync(dir, { recursive: true, force: true });
    fs.rmSync(home, { recursive: true, force: true });
  }
});
