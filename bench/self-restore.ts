// Benchmark: seconds from `slipway server restore` to every app serving again on a new host (data directory, containers and images gone), against deploying the same apps from scratch through the API.
// Run: node dist/bench/self-restore.js [--apps 50] [--builds 4] [--log DIR] (--log: each server's log, lines stamped with seconds since the bench started)
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { busyboxArchive } from '../test/helpers/apps.js';
import { ADMIN_EMAIL, ADMIN_PASSWORD, PROJECT_ROOT, loginAs, removeEngineObjects, request, testEnv } from '../test/helpers/server.js';

const { values } = parseArgs({ options: { apps: { type: 'string', default: '50' }, builds: { type: 'string', default: '4' }, log: { type: 'string' } } });
const count = Number(values.apps);
const root = fs.mkdtempSync(path.join(os.tmpdir(), 'slipway-bench-self-restore-'));
const BIN = path.join(PROJECT_ROOT, 'bin', 'slipway.js');
const benchStart = performance.now();
if (values.log !== undefined) fs.mkdirSync(values.log, { recursive: true });

async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const port = (server.address() as net.AddressInfo).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** The body an app answers with, or undefined when it does not answer 200. */
function body(port: number, host: string, urlPath = '/'): Promise<string | undefined> {
  return new Promise((resolve) => {
    const req = http.get({ host: '127.0.0.1', port, path: urlPath, headers: { host }, agent: false, timeout: 2000 }, (res) => {
      let text = '';
      res.on('data', (c: Buffer) => (text += c.toString()));
      res.on('end', () => resolve(res.statusCode === 200 ? text : undefined));
      res.on('error', () => resolve(undefined));
    });
    req.on('timeout', () => req.destroy());
    req.on('error', () => resolve(undefined));
  });
}

interface Host {
  readonly dataDir: string;
  readonly port: number;
  readonly env: Record<string, string>;
  child?: ChildProcess;
}

function host(name: string, port: number): Host {
  const dataDir = path.join(root, name);
  fs.mkdirSync(dataDir, { mode: 0o700 });
  return { dataDir, port, env: { ...testEnv(dataDir, { SLIPWAY_PORT: String(port), SLIPWAY_MAX_CONCURRENT_BUILDS: values.builds, SLIPWAY_STARTUP_TIMEOUT_SECONDS: '120' }), SLIPWAY_LOG_LEVEL: values.log === undefined ? 'silent' : 'info' } };
}

function run(h: Host, args: string[]): Promise<number | null> {
  const child = spawn(process.execPath, [BIN, ...args], { env: { PATH: process.env['PATH'] ?? '/usr/bin:/bin', HOME: root, ...h.env }, stdio: ['ignore', 'ignore', 'inherit'] });
  return new Promise((resolve) => child.once('exit', (code) => resolve(code)));
}

async function start(h: Host): Promise<void> {
  h.child = spawn(process.execPath, ['--max-semi-space-size=2', BIN, 'server'], { env: { PATH: process.env['PATH'] ?? '/usr/bin:/bin', HOME: root, ...h.env }, stdio: ['ignore', 'ignore', values.log === undefined ? 'ignore' : 'pipe'] });
  if (values.log !== undefined && h.child.stderr !== null) {
    const out = fs.createWriteStream(path.join(values.log, `${path.basename(h.dataDir)}.log`), { flags: 'a' });
    let rest = '';
    h.child.stderr.on('data', (chunk: Buffer) => {
      const lines = (rest + chunk.toString()).split('\n');
      rest = lines.pop() ?? '';
      for (const line of lines) out.write(`${((performance.now() - benchStart) / 1000).toFixed(1)} ${line}\n`);
    });
    out.write(`${((performance.now() - benchStart) / 1000).toFixed(1)} (bench) server started\n`);
  }
  while ((await body(h.port, `127.0.0.1:${h.port}`, '/healthz')) === undefined) await new Promise((resolve) => setTimeout(resolve, 20));
}

async function stop(h: Host): Promise<void> {
  const child = h.child;
  if (child === undefined || child.exitCode !== null || child.signalCode !== null) return;
  await new Promise<void>((resolve) => {
    child.once('exit', () => resolve());
    child.kill('SIGTERM');
  });
}

/** Seconds from `since` until every app answers 200 with its own body (each looked at every 100 ms). */
async function allServing(h: Host, apps: Map<string, string>, since: number): Promise<number> {
  const pending = new Map(apps);
  while (pending.size > 0) {
    await Promise.all([...pending].map(async ([s, expected]) => ((await body(h.port, `${s}.localhost:${h.port}`)) === expected ? pending.delete(s) : undefined)));
    if (performance.now() - since > 600_000) throw new Error(`${pending.size} apps never served`);
    if (pending.size > 0) await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return (performance.now() - since) / 1000;
}

/** Creates, uploads and deploys every app through the API (8 at a time); seconds until all serve. */
async function deployAll(h: Host, archives: Map<string, Buffer>, apps: Map<string, string>): Promise<number> {
  const url = `http://127.0.0.1:${h.port}`;
  const token = await loginAs(url, ADMIN_EMAIL, ADMIN_PASSWORD);
  const since = performance.now();
  const queue = [...archives.keys()];
  await Promise.all(
    Array.from({ length: 8 }, async () => {
      for (let s = queue.shift(); s !== undefined; s = queue.shift()) {
        const created = await request(url, 'POST', '/api/v1/deployments', { token, body: { name: s, subdomain: s, source_type: 'archive' } });
        const id = created.json.id as string;
        const form = new FormData();
        form.append('archive', new Blob([archives.get(s)!]), 'a.tar.gz');
        await request(url, 'POST', `/api/v1/deployments/${id}/upload`, { token, raw: form });
        const deployed = await request(url, 'POST', `/api/v1/deployments/${id}/deploy?wait=true`, { token });
        if (deployed.status !== 200) throw new Error(`deploy of ${s} failed: ${deployed.text}`);
      }
    }),
  );
  return allServing(h, apps, since);
}

const hosts: Host[] = [];
try {
  const archives = new Map<string, Buffer>();
  const apps = new Map<string, string>();
  for (let i = 0; i < count; i++) {
    const s = `sr${i}-${process.pid}`;
    const app = await busyboxArchive({ body: `${s}\n` });
    archives.set(s, app.archive);
    apps.set(s, app.body);
  }
  // 1. From scratch through the API (cold: the apps' layers were never built here).
  const old = host('old-host', await freePort());
  hosts.push(old);
  await start(old);
  const cold = await deployAll(old, archives, apps);
  console.log(`deploy ${count} apps from scratch through the API (cold): ${cold.toFixed(1)} s`);

  // 2. A self-backup while serving; the host is lost.
  const file = path.join(root, 'slipway.backup');
  let since = performance.now();
  if ((await run(old, ['server', 'backup', '--file', file])) !== 0) throw new Error('backup failed');
  console.log(`self-backup while serving: ${((performance.now() - since) / 1000).toFixed(2)} s, ${fs.statSync(file).size} bytes`);
  await stop(old);
  await removeEngineObjects(old.dataDir);
  const key = fs.readFileSync(path.join(old.dataDir, 'secret.key'));
  fs.rmSync(old.dataDir, { recursive: true, force: true });

  // 3. The new host: restore, start, every app serving again.
  const fresh = host('new-host', old.port);
  hosts.push(fresh);
  fs.writeFileSync(path.join(fresh.dataDir, 'secret.key'), key, { mode: 0o600 });
  since = performance.now();
  console.log(`[${((since - benchStart) / 1000).toFixed(1)}] restore starts`);
  if ((await run(fresh, ['server', 'restore', '--file', file])) !== 0) throw new Error('restore failed');
  const restored = (performance.now() - since) / 1000;
  await start(fresh);
  const restore = await allServing(fresh, apps, since);
  console.log(`[${((performance.now() - benchStart) / 1000).toFixed(1)}] restore: ${restored.toFixed(2)} s; from \`slipway server restore\` to all ${count} apps serving: ${restore.toFixed(1)} s`);
  await stop(fresh);
  await removeEngineObjects(fresh.dataDir);

  // 4. From scratch again, as warm as the restore's builds were (the engine's build cache kept the layers).
  const again = host('scratch-again', await freePort());
  hosts.push(again);
  await start(again);
  const warm = await deployAll(again, archives, apps);
  console.log(`deploy ${count} apps from scratch through the API (warm): ${warm.toFixed(1)} s`);
  console.log(`restore / deploy: ×${(restore / warm).toFixed(2)} against the warm deploy, ×${(restore / cold).toFixed(2)} against the cold one (goal ≤ 1.2); load ${os.loadavg()[0]?.toFixed(1)}`);
} finally {
  for (const h of hosts) {
    await stop(h);
    await removeEngineObjects(h.dataDir).catch(() => undefined);
  }
  fs.rmSync(root, { recursive: true, force: true });
}
