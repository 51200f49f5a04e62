// Benchmark: `slipway db connect` (the CLI in its own process) against `ssh -L` to the same kind of database (pgbench -S tps at 8 clients, MiB/s of a COPY TO STDOUT), the server's RSS with 50 connections, and create-to-accepting against `docker run`.
// Run: node dist/bench/db-connect.js [--seconds 15] [--rounds 3] [--copy-mib 100] [--create-runs 3] [--image slipway-stand-in/postgres:15]
//      (needs Debian's postgresql-client for psql and pgbench, and openssh-server for the ssh -L baseline)
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs, promisify } from 'node:util';
import Dockerode from 'dockerode';
import { freePort } from '../test/helpers/net.js';
import { ADMIN_EMAIL, ADMIN_PASSWORD, PROJECT_ROOT, loginAs, request, testEnv } from '../test/helpers/server.js';
import { cpuMicros, processTree } from './proc.js';
import { startSshForward, waitForPort } from './throwaway-ssh.js';

const { values } = parseArgs({
  options: {
    seconds: { type: 'string', default: '15' },
    rounds: { type: 'string', default: '3' },
    'copy-mib': { type: 'string', default: '100' },
    'create-runs': { type: 'string', default: '3' },
    image: { type: 'string', default: 'slipway-stand-in/postgres:15' },
  },
});
const run = promisify(execFile);
const docker = new Dockerode();
const children: ChildProcess[] = [];
const containers: string[] = [];
const PASSWORD = 'bench-password-1234';

interface Target {
  readonly name: string;
  readonly port: number;
  readonly user: string;
  readonly password: string;
  readonly database: string;
}

function pgEnv(target: Target): NodeJS.ProcessEnv {
  return { ...process.env, PGPASSWORD: target.password, PGCONNECT_TIMEOUT: '20' };
}

/** pgbench -S at `clients` clients for `seconds`: transactions per second (excluding connection set-up). */
async function pgbenchTps(target: Target, clients: number, seconds: number): Promise<number> {
  const { stdout } = await run('pgbench', ['-h', '127.0.0.1', '-p', String(target.port), '-U', target.user, '-n', '-S', '-c', String(clients), '-j', '2', '-T', String(seconds), '--', target.database], { env: pgEnv(target), maxBuffer: 16 * 1024 * 1024 });
  const match = /tps = ([\d.]+) \(without initial connection time\)/.exec(stdout) ?? /tps = ([\d.]+)/.exec(stdout);
  if (match === null) throw new Error(`pgbench said: ${stdout}`);
  return Number(match[1]);
}

/** MiB/s of a `COPY … TO STDOUT` of `mib` MiB read by psql (its output counted, not kept). */
async function copyMibPerSecond(target: Target, mib: number): Promise<number> {
  const sql = `COPY (SELECT repeat('x', 1023) FROM generate_series(1, ${mib * 1024})) TO STDOUT`;
  const started = performance.now();
  const bytes = await new Promise<number>((resolve, reject) => {
    const child = spawn('psql', ['-h', '127.0.0.1', '-p', String(target.port), '-U', target.user, '-d', target.database, '-Atc', sql], { env: pgEnv(target), stdio: ['ignore', 'pipe', 'pipe'] });
    let count = 0;
    let err = '';
    child.stdout.on('data', (chunk: Buffer) => (count += chunk.length));
    child.stderr.on('data', (chunk: Buffer) => (err += chunk.toString()));
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve(count) : reject(new Error(`psql exited with ${code}: ${err}`))));
  });
  if (bytes !== mib * 1024 * 1024) throw new Error(`COPY gave ${bytes} bytes, not ${mib} MiB`);
  return mib / ((performance.now() - started) / 1000);
}

async function psqlOk(target: Target): Promise<boolean> {
  try {
    await run('psql', ['-h', '127.0.0.1', '-p', String(target.port), '-U', target.user, '-d', target.database, '-Atc', 'select 1'], { env: { ...pgEnv(target), PGCONNECT_TIMEOUT: '2' } });
    return true;
  } catch {
    return false;
  }
}

async function until(check: () => Promise<boolean>, limitMs: number, what: string): Promise<void> {
  const deadline = Date.now() + limitMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/**
 * `docker run` of the image by hand, published on loopback, with a managed database's default size
 * (SLIPWAY_DEFAULT_CPUS 1, SLIPWAY_DEFAULT_MEMORY_MB 512), so that `ssh -L` reaches the same
 * database as `db connect` does: seconds until psql is accepted.
 */
async function dockerRunByHand(): Promise<{ port: number; id: string; seconds: number }> {
  const port = await freePort();
  const started = performance.now();
  const { stdout } = await run('docker', ['run', '-d', '--rm', '--cpus', '1', '--memory', '512m', '-e', 'POSTGRES_USER=app', '-e', `POSTGRES_PASSWORD=${PASSWORD}`, '-e', 'POSTGRES_DB=bench', '-p', `127.0.0.1:${port}:5432`, '--', values.image]);
  const id = stdout.trim();
  containers.push(id);
  await until(() => psqlOk({ name: 'direct', port, user: 'app', password: PASSWORD, database: 'bench' }), 180_000, 'the hand-run database');
  return { port, id, seconds: (performance.now() - started) / 1000 };
}

/** The RSS (KiB) of the server's processes that are Node (the supervisor and its worker). */
function serverRssKib(pid: number): number {
  let tree: Array<{ pid: number; name: string }>;
  try {
    tree = processTree(pid);
  } catch {
    return 0; // a process of the tree ended between two reads: the next sample counts
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

/** CPU time (µs) the processes of the trees rooted at `pids` have used so far (a process gone between reads counts 0). */
function treeCpuMicros(pids: readonly number[]): number {
  let sum = 0;
  for (const root of pids) {
    let tree: Array<{ pid: number; name: string }> = [];
    try {
      tree = processTree(root);
    } catch {
      continue;
    }
    for (const p of tree) {
      try {
        sum += cpuMicros(p.pid);
      } catch {
        // ended between the two reads
      }
    }
  }
  return sum;
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? Number.NaN;
const fmt = (x: number, digits = 1): string => (Number.isFinite(x) ? x.toFixed(digits) : 'n/a');

async function main(): Promise<void> {
  const seconds = Number(values.seconds);
  const rounds = Number(values.rounds);
  const copyMib = Number(values['copy-mib']);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'slipway-bench-db-'));
  const port = await freePort();
  const server = spawn(process.execPath, ['--max-semi-space-size=2', path.join(PROJECT_ROOT, 'bin', 'slipway.js'), 'server'], {
    env: { PATH: process.env['PATH'] ?? '/usr/bin:/bin', HOME: os.tmpdir(), ...testEnv(path.join(dir, 'data'), { SLIPWAY_PORT: String(port), SLIPWAY_DB_IMAGE_POSTGRES: values.image }) },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  children.push(server);
  const base = `http://127.0.0.1:${port}`;
  await waitForPort(port, 60_000);
  const token = await loginAs(base, ADMIN_EMAIL, ADMIN_PASSWORD);
  const key = (await request(base, 'POST', '/api/v1/api-keys', { token, body: { name: 'bench' } })).json.key as string;

  // Create-to-accepting: Slipway's POST until `running` (its probe: psql inside), against docker run by hand.
  const created: number[] = [];
  const byHand: number[] = [];
  let databaseId = '';
  for (let i = 0; i < Number(values['create-runs']); i += 1) {
    const hand = await dockerRunByHand();
    byHand.push(hand.seconds);
    await run('docker', ['rm', '-f', '--', hand.id]).catch(() => undefined);
    const started = performance.now();
    const res = await request(base, 'POST', '/api/v1/databases', { token, body: { name: `bench${i}`, engine: 'postgres' } });
    if (res.status !== 201) throw new Error(`create: ${res.status} ${res.text}`);
    await until(async () => (await request(base, 'GET', `/api/v1/databases/${res.json.id}`, { token })).json.status === 'running', 180_000, 'the managed database');
    created.push((performance.now() - started) / 1000);
    if (i === 0) databaseId = res.json.id as string;
    else await request(base, 'DELETE', `/api/v1/databases/${res.json.id}`, { token });
  }
  console.log(`create to accepting: Slipway median ${fmt(median(created), 2)} s (${created.map((x) => fmt(x, 2)).join(', ')}), docker run by hand ${fmt(median(byHand), 2)} s (${byHand.map((x) => fmt(x, 2)).join(', ')}): ×${fmt(median(created) / median(byHand), 2)} (goal ≤ 1.2)`);

  // The two paths to a database of the same image and size.
  const creds = (await request(base, 'GET', `/api/v1/databases/${databaseId}/credentials`, { token })).json as { username: string; password: string; database: string };
  // The real CLI in a process of its own, as a person runs it (not in the bench's event loop, which also reads psql's output).
  const connectPort = await freePort();
  const cli = spawn(process.execPath, [path.join(PROJECT_ROOT, 'bin', 'slipway.js'), 'db', 'connect', databaseId, '--port', String(connectPort)], {
    env: { PATH: process.env['PATH'] ?? '/usr/bin:/bin', HOME: dir, SLIPWAY_URL: base, SLIPWAY_API_KEY: key },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  children.push(cli);
  await waitForPort(connectPort, 30_000);
  const slipway: Target = { name: 'slipway db connect', port: connectPort, user: creds.username, password: creds.password, database: creds.database };
  const hand = await dockerRunByHand();
  const ssh = await startSshForward('-L', hand.port, dir);
  children.push(...ssh.processes);
  const viaSsh: Target = { name: 'ssh -L', port: ssh.port, user: 'app', password: PASSWORD, database: 'bench' };
  for (const target of [slipway, viaSsh]) {
    await run('pgbench', ['-h', '127.0.0.1', '-p', String(target.port), '-U', target.user, '-i', '-s', '10', '-q', '--', target.database], { env: pgEnv(target), maxBuffer: 16 * 1024 * 1024 });
  }

  const tps: Record<string, number[]> = { [slipway.name]: [], [viaSsh.name]: [] };
  const mibs: Record<string, number[]> = { [slipway.name]: [], [viaSsh.name]: [] };
  // The relay's own CPU per MiB of COPY: the server (supervisor, worker) and the CLI, against sshd (with its session's children) and ssh.
  const relays: Record<string, readonly number[]> = { [slipway.name]: [server.pid ?? 0, cli.pid ?? 0], [viaSsh.name]: ssh.pids };
  const cpuPerMib: Record<string, number[]> = { [slipway.name]: [], [viaSsh.name]: [] };
  for (let round = 1; round <= rounds; round += 1) {
    // Interleaved, the order swapped each round.
    for (const target of round % 2 === 1 ? [slipway, viaSsh] : [viaSsh, slipway]) {
      const t = await pgbenchTps(target, 8, seconds);
      const cpuBefore = treeCpuMicros(relays[target.name]!);
      const m = await copyMibPerSecond(target, copyMib);
      cpuPerMib[target.name]!.push((treeCpuMicros(relays[target.name]!) - cpuBefore) / 1000 / copyMib);
      tps[target.name]!.push(t);
      mibs[target.name]!.push(m);
      console.log(`  round ${round} ${target.name}: pgbench -S 8 clients ${fmt(t, 0)} tps, COPY ${copyMib} MiB at ${fmt(m)} MiB/s`);
    }
  }
  const tpsRatio = median(tps[slipway.name]!) / median(tps[viaSsh.name]!);
  const mibRatio = median(mibs[slipway.name]!) / median(mibs[viaSsh.name]!);
  console.log(`pgbench -S tps: ×${fmt(tpsRatio, 2)} of ssh -L; COPY MiB/s: ×${fmt(mibRatio, 2)} of ssh -L (goal ≥ 1.0 on both)`);
  console.log(`the relay's CPU per MiB of COPY (median): ${fmt(median(cpuPerMib[slipway.name]!), 2)} ms (server + CLI) against ${fmt(median(cpuPerMib[viaSsh.name]!), 2)} ms (sshd + ssh)`);

  // The server's RSS with 50 connections held open and busy.
  const before = serverRssKib(server.pid ?? 0);
  let peak = before;
  const sampler = setInterval(() => (peak = Math.max(peak, serverRssKib(server.pid ?? 0))), 200);
  const fifty = await pgbenchTps(slipway, 50, Math.max(20, seconds));
  clearInterval(sampler);
  console.log(`50 connections (${fmt(fifty, 0)} tps): server RSS ${fmt(before / 1024)} MiB before, peak ${fmt(peak / 1024)} MiB: +${fmt((peak - before) / 1024)} MiB (goal < +64 MiB)`);
  await request(base, 'DELETE', `/api/v1/databases/${databaseId}?force=true`, { token });
}

async function cleanUp(): Promise<void> {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill();
  for (const id of containers) await docker.getContainer(id).remove({ force: true }).catch(() => undefined);
}

process.once('SIGINT', () => void cleanUp().then(() => process.exit(130)));
main()
  .then(cleanUp)
  .catch(async (err: unknown) => {
    console.error(err instanceof Error ? err.stack : err);
    await cleanUp();
    process.exitCode = 1;
  });
