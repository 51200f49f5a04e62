// Benchmark: a local app served directly, through a Slipway tunnel, and through an OpenSSH reverse tunnel.
//
// `node dist/bench/tunnel.js` runs everything on loopback: the app, the Slipway server and client
// and the load generator are separate processes (this file, in different roles). Requests/s and p99
// use a small body over 50 connections; MiB/s a 1 MiB body over 10 connections. wrk is used when it
// is installed, else a small keep-alive load generator of our own. The CPU time the Slipway server
// and client processes spend per small request is printed too: on a shared machine it is steadier
// than requests/s.
import { nodeDataPlane } from '../src/proxy/node-data-plane.js';
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, rm, writeFile, chmod, copyFile, mkdir } from 'node:fs/promises';
import { Agent, createServer, request } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { AppProxy } from '../src/proxy/app-proxy.js';
import { RoutingTable } from '../src/proxy/routing-table.js';
import { CONNECT_PATH } from '../src/tunnel/protocol.js';
import { runTunnelClient } from '../src/tunnel/tunnel-client.js';
import { TunnelServer, type TunnelOwner } from '../src/tunnel/tunnel-server.js';
import { freePort } from '../test/helpers/net.js';
import { hasWrk, wrk } from './wrk.js';

const run = promisify(execFile);
const SELF = fileURLToPath(import.meta.url);
const MiB = 1024 * 1024;
const DURATION_S = 5;
const BENCH_KEY = 'slw_k1_benchbenchbenchbenchbenchbenchbench';
const SMALL_BODY = Buffer.from('x'.repeat(100));
const BIG_BODY = Buffer.alloc(MiB, 'y');

interface Target {
  readonly name: string;
  readonly port: number;
  readonly host: string;
}

interface Result {
  readonly rps: number;
  readonly p99Ms: number;
  readonly errors: number;
}

// ---- roles (child processes) ---------------------------------------------------------------------

/** Prints one JSON line for the parent. */
function announce(value: object): void {
  process.stdout.write(`${JSON.stringify(value)}\n`);
}

/** Answers each message from the parent with this process's CPU time so far (µs, user + system). */
function answerCpuQueries(): void {
  process.on('message', () => {
    const usage = process.cpuUsage();
    process.send?.({ cpuUs: usage.user + usage.system });
  });
  process.channel?.unref();
}

async function roleApp(): Promise<void> {
  const server = createServer((req, res) => {
    const body = req.url === '/big' ? BIG_BODY : SMALL_BODY;
    res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': body.length });
    res.end(body);
  });
  server.keepAliveTimeout = 60_000;
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  announce({ port: (server.address() as AddressInfo).port });
}

async function roleServer(): Promise<void> {
  const table = new RoutingTable('localhost');
  const owner: TunnelOwner = { userId: 'bench', apiKeyId: 'bench-key' };
  let port = 0;
  const tunnels = new TunnelServer({
    dataPlane: tableOnly(table),
    authority: {
      authenticateKey: async (key) => (key === BENCH_KEY ? owner : null),
      claimSubdomain: async () => 'ok',
      releaseSubdomain: async () => {},
    },
    publicUrlFor: (subdomain) => `http://${subdomain}.localhost:${port}`,
    limits: { tunnelsPerKey: 10, streamsPerTunnel: 1000 },
  });
  const proxy = new AppProxy({ table, publicProtocol: 'http' });
  const front = createServer((req, res) => {
    if (!proxy.handleRequest(req, res)) res.writeHead(404).end();
  });
  front.keepAliveTimeout = 60_000;
  front.on('upgrade', (req, socket, head) => {
    if (new URL(req.url ?? '/', 'http://x').pathname === CONNECT_PATH) tunnels.handleUpgrade(req, socket, head);
    else if (!proxy.handleUpgrade(req, socket, head)) socket.destroy();
  });
  front.listen(0, '127.0.0.1');
  await once(front, 'listening');
  port = (front.address() as AddressInfo).port;
  answerCpuQueries();
  announce({ port });
}

async function roleClient(serverPort: number, appPort: number): Promise<void> {
  answerCpuQueries();
  await runTunnelClient({
    serverUrl: `http://127.0.0.1:${serverPort}`,
    apiKey: BENCH_KEY,
    port: appPort,
    subdomain: 'bench',
    signal: new AbortController().signal,
    onEvent: (event) => {
      if (event.type === 'connected') announce({ subdomain: event.subdomain });
      else if (event.type === 'error' || event.type === 'disconnected') process.stderr.write(`${JSON.stringify(event)}\n`);
    },
  });
}

// ---- orchestration -------------------------------------------------------------------------------

const children: ChildProcess[] = [];

/** Starts this file in another role; resolves with its first JSON line and the process. */
async function startRole(args: string[]): Promise<{ info: Record<string, unknown>; child: ChildProcess }> {
  const child = spawn(process.execPath, [SELF, ...args], { stdio: ['ignore', 'pipe', 'inherit', 'ipc'] });
  children.push(child);
  const lines = createInterface({ input: child.stdout as NodeJS.ReadableStream });
  const timeout = setTimeout(() => child.kill(), 15_000);
  for await (const line of lines) {
    clearTimeout(timeout);
    return { info: JSON.parse(line) as Record<string, unknown>, child };
  }
  throw new Error(`role ${args[0] ?? '?'} exited before it was ready`);
}

/** A role's CPU time so far, in µs (see answerCpuQueries). */
async function cpuOf(child: ChildProcess): Promise<number> {
  const answer = once(child, 'message') as Promise<[{ cpuUs: number }]>;
  child.send({});
  const [message] = await answer;
  return message.cpuUs;
}

async function loadWithWrk(target: Target, path: string, connections: number, seconds: number): Promise<Result> {
  const result = await wrk(`http://127.0.0.1:${target.port}${path}`, { connections, seconds, headers: [`Host: ${target.host}`] });
  return { rps: result.rps, p99Ms: result.p99Ms, errors: result.errors };
}

/** Our own generator: `connections` keep-alive loops for `seconds`. */
async function loadWithNode(target: Target, path: string, connections: number, seconds: number): Promise<Result> {
  const agent = new Agent({ keepAlive: true, maxSockets: connections });
  const latencies: number[] = [];
  let errors = 0;
  const end = performance.now() + seconds * 1000;
  const loop = async (): Promise<void> => {
    while (performance.now() < end) {
      const started = performance.now();
      try {
        const status = await new Promise<number>((resolve, reject) => {
          const req = request({ host: '127.0.0.1', port: target.port, path, headers: { host: target.host }, agent }, (res) => {
            res.on('data', () => {});
            res.on('end', () => resolve(res.statusCode ?? 0));
            res.on('error', reject);
          });
          req.on('error', reject);
          req.end();
        });
        if (status !== 200) errors++;
        latencies.push(performance.now() - started);
      } catch {
        errors++;
      }
    }
  };
  await Promise.all(Array.from({ length: connections }, loop));
  agent.destroy();
  latencies.sort((a, b) => a - b);
  return { rps: latencies.length / seconds, p99Ms: latencies[Math.floor(latencies.length * 0.99)] ?? Number.NaN, errors };
}

async function waitForPort(port: number, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const ok = await new Promise<boolean>((resolve) => {
      const socket = connect(port, '127.0.0.1');
      socket.once('connect', () => {
        socket.destroy();
        resolve(true);
      });
      socket.once('error', () => resolve(false));
    });
    if (ok) return;
    if (Date.now() > deadline) throw new Error(`nothing listens on ${port} after ${timeoutMs} ms`);
    await sleep(100);
  }
}


/** An OpenSSH reverse tunnel (`ssh -R`) through a throwaway sshd on loopback; the forwarded port. */
async function startSshTunnel(appPort: number, dir: string): Promise<number> {
  const hostKey = join(dir, 'host_key');
  const userKey = join(dir, 'user_key');
  const authorized = join(dir, 'authorized_keys');
  const config = join(dir, 'sshd_config');
  await run('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-f', hostKey]);
  await run('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-f', userKey]);
  await copyFile(`${userKey}.pub`, authorized);
  await chmod(authorized, 0o600);
  await writeFile(config, ['PidFile none', 'UsePAM no', 'StrictModes no', 'PasswordAuthentication no', 'KbdInteractiveAuthentication no', 'PermitRootLogin prohibit-password', 'AllowTcpForwarding yes', 'LogLevel ERROR', ''].join('\n'));
  await mkdir('/run/sshd', { recursive: true }).catch(() => {}); // sshd's privilege-separation directory
  const sshPort = await freePort();
  const sshd = spawn('/usr/sbin/sshd', ['-D', '-e', '-f', config, '-p', String(sshPort), '-o', 'ListenAddress=127.0.0.1', '-h', hostKey, '-o', `AuthorizedKeysFile=${authorized}`], { stdio: ['ignore', 'ignore', 'pipe'] });
  children.push(sshd);
  let sshdErr = '';
  sshd.stderr?.on('data', (chunk: Buffer) => (sshdErr += chunk.toString()));
  await waitForPort(sshPort, 5000).catch((err: Error) => {
    throw new Error(`${err.message}; sshd said: ${sshdErr.trim() || '(nothing)'}`);
  });
  const remotePort = await freePort();
  const ssh = spawn(
    'ssh',
    ['-N', '-T', '-p', String(sshPort), '-i', userKey, '-o', 'StrictHostKeyChecking=no', '-o', 'UserKnownHostsFile=/dev/null', '-o', 'BatchMode=yes', '-o', 'ExitOnForwardFailure=yes', '-o', 'LogLevel=ERROR', '-R', `127.0.0.1:${remotePort}:127.0.0.1:${appPort}`, '--', `${userInfo().username}@127.0.0.1`],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  children.push(ssh);
  let sshErr = '';
  ssh.stderr?.on('data', (chunk: Buffer) => (sshErr += chunk.toString()));
  await waitForPort(remotePort, 10_000).catch((err: Error) => {
    throw new Error(`${err.message}; ssh said: ${sshErr.trim() || '(nothing)'}; sshd said: ${sshdErr.trim() || '(nothing)'}`);
  });
  return remotePort;
}

function fmt(value: number, digits = 0): string {
  return Number.isFinite(value) ? value.toFixed(digits) : 'n/a';
}

async function main(): Promise<void> {
  const useWrk = await hasWrk();
  const load = useWrk ? loadWithWrk : loadWithNode;
  console.log(`load generator: ${useWrk ? 'wrk (2 threads)' : 'built-in Node keep-alive loops'}; ${DURATION_S} s per run; CPUs: ${(await import('node:os')).cpus().length}`);

  const app = (await startRole(['app'])).info;
  const appPort = Number(app['port']);
  const server = await startRole(['server']);
  const serverPort = Number(server.info['port']);
  const client = await startRole(['client', String(serverPort), String(appPort)]);
  const slipway: Target = { name: 'slipway tunnel', port: serverPort, host: `${String(client.info['subdomain'])}.localhost:${serverPort}` };
  const targets: Target[] = [{ name: 'direct', port: appPort, host: `127.0.0.1:${appPort}` }, slipway];

  const dir = await mkdtemp(join(tmpdir(), 'slipway-bench-'));
  try {
    const sshPort = await startSshTunnel(appPort, dir);
    targets.push({ name: 'ssh -R', port: sshPort, host: `127.0.0.1:${sshPort}` });
  } catch (err) {
    console.log(`OpenSSH reverse tunnel unavailable, skipped: ${(err as Error).message}`);
  }

  const rows: Array<{ name: string; small: Result; big: Result }> = [];
  let cpuPerRequest: { server: number; client: number } | undefined;
  for (const target of targets) {
    await load(target, '/small', 10, 1); // warm-up: connections, JIT
    const before = target === slipway ? await Promise.all([cpuOf(server.child), cpuOf(client.child)]) : undefined;
    const small = await load(target, '/small', 50, DURATION_S);
    if (before !== undefined) {
      const after = await Promise.all([cpuOf(server.child), cpuOf(client.child)]);
      const requests = small.rps * DURATION_S;
      cpuPerRequest = { server: (after[0] - before[0]) / requests, client: (after[1] - before[1]) / requests };
    }
    await load(target, '/big', 10, 1);
    const big = await load(target, '/big', 10, DURATION_S);
    rows.push({ name: target.name, small, big });
    console.log(`  measured ${target.name}`);
  }

  const direct = rows[0];
  console.log('');
  console.log('| path | req/s (100 B, 50 conn) | vs direct | p99 ms | vs direct | MiB/s (1 MiB, 10 conn) | vs direct | errors |');
  console.log('|---|---:|---:|---:|---:|---:|---:|---:|');
  for (const row of rows) {
    const mibs = row.big.rps; // one 1 MiB body per request
    const ratio = (a: number, b: number | undefined): string => (b === undefined || b === 0 ? 'n/a' : `${fmt(a / b, 2)}x`);
    console.log(
      `| ${row.name} | ${fmt(row.small.rps)} | ${ratio(row.small.rps, direct?.small.rps)} | ${fmt(row.small.p99Ms, 2)} | ${ratio(row.small.p99Ms, direct?.small.p99Ms)} | ${fmt(mibs, 1)} | ${ratio(mibs, direct?.big.rps)} | ${row.small.errors + row.big.errors} |`,
    );
  }
  if (cpuPerRequest !== undefined) {
    console.log('');
    console.log(`slipway CPU per 100 B request: server ${fmt(cpuPerRequest.server, 1)} µs, client ${fmt(cpuPerRequest.client, 1)} µs`);
  }
  await rm(dir, { recursive: true, force: true });
}

async function entry(): Promise<void> {
  const [role, ...args] = process.argv.slice(2);
  if (role === 'app') return roleApp();
  if (role === 'server') return roleServer();
  if (role === 'client') return roleClient(Number(args[0]), Number(args[1]));
  try {
    await main();
  } finally {
    for (const child of children) child.kill();
  }
}

entry().catch((err: unknown) => {
  console.error(err);
  for (const child of children) child.kill();
  process.exitCode = 1;
});

/** The routing table as a data plane (tunnels never drain). */
function tableOnly(table: RoutingTable) {
  return nodeDataPlane(table, { drain: async () => undefined });
}
