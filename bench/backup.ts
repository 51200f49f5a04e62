// Benchmark: a managed PostgreSQL's backup to s3rver against `pg_dump -Fc --no-sync -f /dev/null` in the same container, the server's peak RSS during it, verification time, and restores against a bare `pg_restore` of the same dump.
// Run: node dist/bench/backup.js [--scale 10] [--image slipway-stand-in/postgres:15]
//      (pgbench -i -s SCALE fills the database inside its container: about 15 MiB of table data per unit of scale; the goal is -s 70, ~1 GiB)
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import { parseArgs } from 'node:util';
import Dockerode from 'dockerode';
import { createDockerEngine } from '../src/runtime/docker/docker-engine.js';
import { LABEL_SERVICE } from '../src/runtime/service.js';
import { freePort } from '../test/helpers/net.js';
import { S3_ACCESS_KEY, S3_SECRET_KEY, startS3 } from '../test/helpers/s3.js';
import { ADMIN_EMAIL, ADMIN_PASSWORD, PROJECT_ROOT, loginAs, request, testEnv } from '../test/helpers/server.js';
import { processTree } from './proc.js';
import { waitForPort } from './throwaway-ssh.js';

const { values } = parseArgs({ options: { scale: { type: 'string', default: '10' }, image: { type: 'string', default: 'slipway-stand-in/postgres:15' }, 'server-log': { type: 'string' } } });
const docker = new Dockerode();
const engine = createDockerEngine();
const children: ChildProcess[] = [];

/** The RSS (KiB) of the server's Node processes (supervisor and worker). */
function serverRssKib(pid: number): number {
  let tree: Array<{ pid: number; name: string }>;
  try {
    tree = processTree(pid);
  } catch {
    return 0;
  }
  return tree
    .filter((p) => p.name.startsWith('node') || p.name.startsWith('slipway'))
    .reduce((sum, p) => {
      try {
        return sum + Number(/VmRSS:\s+(\d+)/.exec(fs.readFileSync(`/proc/${p.pid}/status`, 'utf8'))?.[1] ?? 0);
      } catch {
        return sum;
      }
    }, 0);
}

async function containerOf(databaseId: string): Promise<string> {
  const [found] = await docker.listContainers({ filters: { label: [`${LABEL_SERVICE}=${databaseId}`] } });
  if (found === undefined) throw new Error(`no container for database ${databaseId}`);
  return found.Id;
}

/** Runs argv in the container, failing on a non-zero exit; resolves with the seconds it took. */
async function timedExec(containerId: string, argv: string[], env: Record<string, string>, stdin?: string): Promise<number> {
  const started = performance.now();
  const exec = await engine.execStream!(containerId, argv, { env, signal: AbortSignal.timeout(3_600_000), ...(stdin === undefined ? {} : { stdin: fs.createReadStream(stdin) }) });
  exec.stdout.resume();
  const result = await exec.done;
  if (result.exitCode !== 0) throw new Error(`${argv[0]} exited with ${result.exitCode}: ${result.output.slice(-500)}`);
  return (performance.now() - started) / 1000;
}

/** Polls `get` every 100 ms until `done` holds; resolves with the value and the seconds since `since`. */
async function until<T>(get: () => Promise<T>, done: (x: T) => boolean, since: number, limitMs = 3_600_000): Promise<{ value: T; seconds: number }> {
  for (;;) {
    const value = await get();
    if (done(value)) return { value, seconds: (performance.now() - since) / 1000 };
    if (performance.now() - since > limitMs) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 100));
  }
}

const fmt = (x: number, digits = 1): string => x.toFixed(digits);

async function main(): Promise<void> {
  const scale = Number(values.scale);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'slipway-bench-backup-'));
  const s3 = await startS3();
  const port = await freePort();
  // --server-log FILE: the server's output and its log (level info) go there.
  const logFd = values['server-log'] === undefined ? undefined : fs.openSync(values['server-log'], 'a');
  const server = spawn(process.execPath, ['--max-semi-space-size=2', path.join(PROJECT_ROOT, 'bin', 'slipway.js'), 'server'], {
    env: {
      PATH: process.env['PATH'] ?? '/usr/bin:/bin',
      HOME: os.tmpdir(),
      ...testEnv(path.join(dir, 'data'), { SLIPWAY_PORT: String(port), SLIPWAY_DB_IMAGE_POSTGRES: values.image, SLIPWAY_ALLOW_PRIVATE_TARGETS: 'true', ...(logFd === undefined ? {} : { SLIPWAY_LOG_LEVEL: 'info' }) }),
    },
    stdio: ['ignore', logFd ?? 'ignore', logFd ?? 'inherit'],
  });
  const load = (): string => os.loadavg().map((x) => x.toFixed(1)).join(' ');
  console.log(`${new Date().toISOString()} load average ${load()}`);
  children.push(server);
  const base = `http://127.0.0.1:${port}`;
  await waitForPort(port, 60_000);
  const token = await loginAs(base, ADMIN_EMAIL, ADMIN_PASSWORD);
  const api = async (method: string, urlPath: string, body?: object) => {
    const res = await request(base, method, urlPath, { token, ...(body === undefined ? {} : { body }) });
    if (res.status >= 400) throw new Error(`${method} ${urlPath}: ${res.status} ${res.text}`);
    return res.json;
  };
  let dbId: string | undefined;
  try {
    const destination = await api('POST', '/api/v1/backup-destinations', { name: 's3', type: 's3', endpoint: s3.endpoint, region: 'us-east-1', bucket: s3.bucket, access_key_id: S3_ACCESS_KEY, secret_access_key: S3_SECRET_KEY, force_path_style: true });
    dbId = (await api('POST', '/api/v1/databases', { name: 'bench', engine: 'postgres' })).id as string;
    await until(() => api('GET', `/api/v1/databases/${dbId}`), (d) => d.status !== 'creating', performance.now(), 300_000);
    const creds = await api('GET', `/api/v1/databases/${dbId}/credentials`);
    const container = await containerOf(dbId);
    const env = { PGPASSWORD: creds.password as string };
    const conn = ['-h', '127.0.0.1', '-U', creds.username as string];
    const fill = await timedExec(container, ['pgbench', '-i', '-q', '-s', String(scale), ...conn, creds.database as string], env);
    const size = (await api('GET', `/api/v1/databases/${dbId}`)).size_bytes as number;
    console.log(`pgbench -i -s ${scale}: ${fmt(fill)} s, data directory ${fmt(size / 1048576, 0)} MiB`);

    // The dump alone, twice (the second with a warm cache, as the backup will have).
    await timedExec(container, ['pg_dump', '-Fc', '--no-sync', '-f', '/dev/null', ...conn, '-d', creds.database as string], env);
    const bareDump = await timedExec(container, ['pg_dump', '-Fc', '--no-sync', '-f', '/dev/null', ...conn, '-d', creds.database as string], env);

    const rssBefore = serverRssKib(server.pid ?? 0);
    let rssPeak = rssBefore;
    const sampler = setInterval(() => (rssPeak = Math.max(rssPeak, serverRssKib(server.pid ?? 0))), 100);
    const t0 = performance.now();
    const started = await api('POST', `/api/v1/databases/${dbId}/backups`, { destination_id: destination.id });
    const uploaded = await until(() => api('GET', `/api/v1/databases/${dbId}/backups/${started.id}`), (b) => b.status !== 'running', t0);
    const rssUpload = rssPeak;
    const verifiedAt = await until(() => api('GET', `/api/v1/databases/${dbId}/backups/${started.id}`), (b) => b.status !== 'succeeded', t0);
    clearInterval(sampler);
    if (verifiedAt.value.status !== 'verified') throw new Error(`the backup ended ${verifiedAt.value.status}: ${verifiedAt.value.error}`);
    console.log(`backup (dump → encrypt → s3rver): ${fmt(uploaded.seconds)} s against pg_dump -Fc --no-sync -f /dev/null ${fmt(bareDump)} s: ×${fmt(uploaded.seconds / bareDump, 2)} (goal ≤ 1.3); object ${fmt((uploaded.value.size_bytes as number) / 1048576)} MiB`);
    console.log(`server RSS: ${fmt(rssBefore / 1024)} MiB before, peak ${fmt(rssUpload / 1024)} MiB during the upload (+${fmt((rssUpload - rssBefore) / 1024)}), ${fmt(rssPeak / 1024)} MiB through verification (goal < +64 MiB)`);
    console.log(`verification (read back, restore into a throwaway, count rows): ${fmt(verifiedAt.seconds - uploaded.seconds)} s`);

    // Bare pg_restore of the same dump (downloaded decrypted) into an empty database of the same container.
    const dumpFile = path.join(dir, 'bench.dump');
    const res = await fetch(`${base}/api/v1/databases/${dbId}/backups/${started.id}/download`, { headers: { authorization: `Bearer ${token}` } });
    if (!res.ok || res.body === null) throw new Error(`download: ${res.status}`);
    await pipeline(res.body as unknown as NodeJS.ReadableStream, fs.createWriteStream(dumpFile));
    await timedExec(container, ['psql', ...conn, '-d', creds.database as string, '-c', 'create database bare_restore'], env);
    const bareRestore = await timedExec(container, ['pg_restore', '--no-owner', '--no-privileges', '--exit-on-error', '--single-transaction', ...conn, '-d', 'bare_restore'], env, dumpFile);
    // Dropped at once: its autovacuum (a pass over the 1 GiB just loaded) would run beside the restores measured next.
    await timedExec(container, ['psql', ...conn, '-d', creds.database as string, '-c', 'drop database bare_restore'], env);

    const t1 = performance.now();
    const into = await api('POST', `/api/v1/databases/${dbId}/restore`, { backup_id: started.id, into: 'bench-copy' });
    // When the new database first answers as running: what creating it took of the restore.
    let created: number | undefined;
    const intoDone = await until(
      async () => {
        const restore = await api('GET', `/api/v1/databases/${dbId}/restores/${into.id}`);
        if (created === undefined && ((await api('GET', `/api/v1/databases/${restore.target_database_id}`)).status === 'running' || restore.status !== 'running')) created = (performance.now() - t1) / 1000;
        return restore;
      },
      (r) => r.status !== 'running',
      t1,
    );
    if (intoDone.value.status !== 'succeeded') throw new Error(`restore into: ${intoDone.value.error}`);
    // Deleted before the next restore, for the same reason (its autovacuum).
    await api('DELETE', `/api/v1/databases/${intoDone.value.target_database_id}`);
    const t2 = performance.now();
    const inPlace = await api('POST', `/api/v1/databases/${dbId}/restore`, { backup_id: started.id });
    const inPlaceDone = await until(() => api('GET', `/api/v1/databases/${dbId}/restores/${inPlace.id}`), (r) => r.status !== 'running', t2);
    if (inPlaceDone.value.status !== 'succeeded') throw new Error(`restore in place: ${inPlaceDone.value.error}`);
    console.log(`bare pg_restore --single-transaction into an empty database: ${fmt(bareRestore)} s`);
    console.log(`restore into a new database (object checked whole, database created, pg_restore): ${fmt(intoDone.seconds)} s: ×${fmt(intoDone.seconds / bareRestore, 2)} (goal ≤ 1.2); the new database running after ${fmt(created ?? Number.NaN)} s`);
    console.log(`restore in place (object checked, safety backup, pg_restore --clean --single-transaction): ${fmt(inPlaceDone.seconds)} s: ×${fmt(inPlaceDone.seconds / bareRestore, 2)}`);
    console.log(`${new Date().toISOString()} load average ${load()}`);
  } finally {
    if (dbId !== undefined) await api('DELETE', `/api/v1/databases/${dbId}?force=true`).catch(() => undefined);
    for (const child of children) child.kill('SIGTERM');
    await new Promise((r) => setTimeout(r, 2000));
    await s3.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((err: unknown) => {
  console.error(err);
  for (const child of children) child.kill('SIGKILL');
  process.exitCode = 1;
});
