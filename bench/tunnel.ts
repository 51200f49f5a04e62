// Benchmark: a local app served directly, through a Slipway tunnel, and through an OpenSSH reverse tunnel.
//
// `node dist/bench/tunnel.js` runs everything on loopback: the app, the Slipway server and client
// and the load generator are separate processes (this file, in different roles). Requests/s and p99
// use a small body over 50 connections; MiB/s a 1 MiB body over 10 connections. wrk is used when it
// is installed, else a small keep-alive load generator of our own. The CPU time the Slipway server
// and client processes spend per small request is printed too: on a shared machine it is steadier
// than requests/s.
import { nodeDataPlane } from '../src/proxy/node-data-plane.js';
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync, readdirSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { Agent, createServer, request } from 'node:http';
import { createServer as createTcpServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { loadConfig } from '../src/config.js';
import { AppProxy } from '../src/proxy/app-proxy.js';
import { findHaproxy } from '../src/proxy/haproxy/haproxy-binary.js';
import { HaproxyDataPlane, haproxyFiles, listenForHaproxy } from '../src/proxy/haproxy/haproxy-data-plane.js';
import { connectedTunnel, frontDoor } from '../src/proxy/front-door.js';
import { proxyProtocolListener } from '../src/proxy/proxy-protocol.js';
import { RoutingTable } from '../src/proxy/routing-table.js';
import { CONNECT_PATH } from '../src/tunnel/protocol.js';
import { runTunnelClient } from '../src/tunnel/tunnel-client.js';
import { TunnelServer, type TunnelOwner } from '../src/tunnel/tunnel-server.js';
import { freePort } from '../test/helpers/net.js';
import { hasWrk, wrk } from './wrk.js';
import { startSshForward } from './throwaway-ssh.js';

const SELF = fileURLToPath(import.meta.url);
const MiB = 1024 * 1024;
/** Seconds per measured run, unless `--seconds` says otherwise. */
const DEFAULT_SECONDS = 5;
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
  /** What the failures were (wrk's error lines), '' when none. */
  readonly errorText: string;
}

// ---- roles (child processes) ---------------------------------------------------------------------

/** Prints one JSON line for the parent. */
function announce(value: object): void {
  process.stdout.write(`${JSON.stringify(value)}\n`);
}

/** Answers each message from the parent with this process's CPU time so far (µs, user + system) and its read/write system calls (Linux). */
function answerCpuQueries(): void {
  process.on('message', () => {
    const usage = process.cpuUsage();
    let io = { syscr: 0, syscw: 0 };
    try {
      const text = readFileSync('/proc/self/io', 'utf8');
      io = { syscr: Number(/syscr: (\d+)/.exec(text)?.[1] ?? 0), syscw: Number(/syscw: (\d+)/.exec(text)?.[1] ?? 0) };
    } catch {
      // not Linux: no counts
    }
    process.send?.({ cpuUs: usage.user + usage.system, ...io });
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

async function roleServer(plane: string): Promise<void> {
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
  // As main.ts: a connection whose first request names the tunnel becomes its raw pipe.
  const door = frontDoor({
    http: front,
    headTimeoutMs: 20_000,
    target: (host) => connectedTunnel(table, host),
  });
  let haproxy: HaproxyDataPlane | undefined;
  let dataDir: string | undefined;
  if (plane === 'haproxy') {
    // As main.ts wires it: HAProxy owns the public port and sends tunnel hosts (never live app
    // hosts) and the tunnel's connect path to Node with a PROXY v2 header.
    const binary = await findHaproxy(undefined);
    if (!('path' in binary)) throw new Error(`no HAProxy: ${binary.missing}`);
    dataDir = await mkdtemp(join(tmpdir(), 'slipway-bench-haproxy-'));
    const config = loadConfig({ SLIPWAY_DATA_DIR: dataDir, SLIPWAY_DOMAIN: 'localhost' });
    const internal = proxyProtocolListener(front, config.edge.headersTimeoutMs, door);
    await listenForHaproxy(internal, haproxyFiles(dataDir).nodeSocket);
    port = await freePort();
    haproxy = new HaproxyDataPlane({
      binary: binary.path,
      dataDir,
      domain: 'localhost',
      table,
      bindHost: '127.0.0.1',
      bindPort: port,
      limits: config.edge,
      publicProtocol: 'http',
      fastPath: true,
      threads: config.haproxyThreads,
      log: () => undefined,
    });
    await haproxy.start();
  } else {
    const listener = createTcpServer({ noDelay: true }, door);
    listener.listen(0, '127.0.0.1');
    await once(listener, 'listening');
    port = (listener.address() as AddressInfo).port;
  }
  // A clean exit, so that `--cpu-prof` writes its profile.
  process.once('SIGTERM', () => {
    const stopped = haproxy === undefined ? Promise.resolve() : haproxy.close().catch(() => undefined);
    void stopped.then(async () => {
      if (dataDir !== undefined) await rm(dataDir, { recursive: true, force: true });
      process.exit(0);
    });
  });
  if (haproxy !== undefined) {
    // HAProxy's own CPU, for the parent's per-request figures.
    const pid = Number(readFileSync(join(dataDir as string, 'haproxy', 'haproxy.pid'), 'utf8').trim());
    announce({ port, haproxyPid: pid });
    answerCpuQueries();
    return;
  }
  answerCpuQueries();
  announce({ port });
}

async function roleClient(serverPort: number, appPort: number): Promise<void> {
  process.once('SIGTERM', () => process.exit(0));
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
async function startRole(args: string[], nodeArgs: string[] = []): Promise<{ info: Record<string, unknown>; child: ChildProcess }> {
  const child = spawn(process.execPath, [...nodeArgs, SELF, ...args], { stdio: ['ignore', 'pipe', 'inherit', 'ipc'] });
  children.push(child);
  const lines = createInterface({ input: child.stdout as NodeJS.ReadableStream });
  const timeout = setTimeout(() => child.kill(), 15_000);
  for await (const line of lines) {
    clearTimeout(timeout);
    return { info: JSON.parse(line) as Record<string, unknown>, child };
  }
  throw new Error(`role ${args[0] ?? '?'} exited before it was ready`);
}

interface Usage {
  readonly cpuUs: number;
  readonly syscr: number;
  readonly syscw: number;
}

/** A role's CPU time so far, in µs, and its read/write system calls (see answerCpuQueries). */
async function cpuOf(child: ChildProcess): Promise<Usage> {
  const answer = once(child, 'message') as Promise<[Usage]>;
  child.send({});
  const [message] = await answer;
  return message;
}

async function loadWithWrk(target: Target, path: string, connections: number, seconds: number): Promise<Result> {
  const result = await wrk(`http://127.0.0.1:${target.port}${path}`, { connections, seconds, headers: [`Host: ${target.host}`] });
  return { rps: result.rps, p99Ms: result.p99Ms, errors: result.errors, errorText: result.errorText };
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
  return { rps: latencies.length / seconds, p99Ms: latencies[Math.floor(latencies.length * 0.99)] ?? Number.NaN, errors, errorText: errors > 0 ? `${errors} failed requests` : '' };
}

/** sshd and ssh (for their CPU time: sshd forks a process per connection, counted as its descendant). */
const sshPids: number[] = [];

/** CPU time (µs, user + system) of `roots` and all their descendants, from /proc (Linux; 0 elsewhere). */
function treeCpuUs(roots: readonly number[]): number {
  const TICK_US = 10_000; // CLK_TCK is 100 on Linux
  let entries: string[];
  try {
    entries = readdirSync('/proc').filter((name) => /^\d+$/.test(name));
  } catch {
    return 0;
  }
  const parent = new Map<number, number>();
  const ticks = new Map<number, number>();
  for (const name of entries) {
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      parent.set(Number(name), Number(fields[1]));
      ticks.set(Number(name), Number(fields[11]) + Number(fields[12]));
    } catch {
      // exited meanwhile
    }
  }
  const inTree = (pid: number): boolean => {
    for (let p = pid, hops = 0; p > 1 && hops < 64; p = parent.get(p) ?? 0, hops++) if (roots.includes(p)) return true;
    return false;
  };
  let sum = 0;
  for (const [pid, t] of ticks) if (inTree(pid)) sum += t;
  return sum * TICK_US;
}

/** An OpenSSH reverse tunnel (`ssh -R`) through a throwaway sshd on loopback; the forwarded port. */
async function startSshTunnel(appPort: number, dir: string): Promise<number> {
  const forward = await startSshForward('-R', appPort, dir);
  children.push(...forward.processes);
  sshPids.push(...forward.pids);
  return forward.port;
}

function fmt(value: number, digits = 0): string {
  return Number.isFinite(value) ? value.toFixed(digits) : 'n/a';
}

/**
 * `--rounds N` (default 5), `--seconds N` (per measured run, default 5: longer runs ride out more of a shared host's swings), `--only NAME,…` (targets: direct, slipway, ssh), `--cpu-prof DIR` (profiles
 * the server and the client), `--plane node|haproxy|both` (what visitors and the tunnel client dial:
 * the Node server itself, or HAProxy in front of it as `SLIPWAY_DATA_PLANE=haproxy` runs it).
 */
function parseArgs(argv: string[]): { rounds: number; seconds: number; only: Set<string> | undefined; cpuProf: string | undefined; planes: string[] } {
  const value = (flag: string): string | undefined => {
    const i = argv.indexOf(flag);
    return i === -1 ? undefined : argv[i + 1];
  };
  const only = value('--only');
  const plane = value('--plane') ?? 'node';
  return {
    rounds: Number(value('--rounds') ?? '5'),
    seconds: Number(value('--seconds') ?? DEFAULT_SECONDS),
    only: only === undefined ? undefined : new Set(only.split(',')),
    cpuProf: value('--cpu-prof'),
    planes: plane === 'both' ? ['node', 'haproxy'] : [plane],
  };
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? (sorted[mid] as number) : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
}

async function main(): Promise<void> {
  const args = parseArgs(process.argv.slice(2));
  const useWrk = await hasWrk();
  const load = useWrk ? loadWithWrk : loadWithNode;
  console.log(`load generator: ${useWrk ? 'wrk (2 threads)' : 'built-in Node keep-alive loops'}; ${args.seconds} s per run; ${args.rounds} interleaved round(s); CPUs: ${(await import('node:os')).cpus().length}; load average ${(await import('node:os')).loadavg().map((n) => n.toFixed(1)).join(' ')}`);

  const app = (await startRole(['app'])).info;
  const appPort = Number(app['port']);
  const profiling = args.cpuProf === undefined ? [] : ['--cpu-prof', '--cpu-prof-dir', args.cpuProf];
  interface Slipway {
    readonly target: Target;
    readonly server: ChildProcess;
    readonly client: ChildProcess;
    readonly haproxyPid: number | undefined;
  }
  const slipways: Slipway[] = [];
  for (const plane of args.planes) {
    const server = await startRole(['server', plane], ['--max-semi-space-size=2', ...profiling]);
    const serverPort = Number(server.info['port']);
    const client = await startRole(['client', String(serverPort), String(appPort)], profiling);
    if (args.cpuProf !== undefined) console.log(`profiles in ${args.cpuProf}: ${plane} server pid ${server.child.pid ?? '?'}, client pid ${client.child.pid ?? '?'}`);
    const name = args.planes.length === 1 && plane === 'node' ? 'slipway tunnel' : `slipway tunnel (${plane})`;
    const haproxyPid = server.info['haproxyPid'] === undefined ? undefined : Number(server.info['haproxyPid']);
    slipways.push({ target: { name, port: serverPort, host: `${String(client.info['subdomain'])}.localhost:${serverPort}` }, server: server.child, client: client.child, haproxyPid });
  }
  const slipwayOf = (target: Target): Slipway | undefined => slipways.find((s) => s.target === target);
  const targets: Target[] = [{ name: 'direct', port: appPort, host: `127.0.0.1:${appPort}` }, ...slipways.map((s) => s.target)];

  const dir = await mkdtemp(join(tmpdir(), 'slipway-bench-'));
  try {
    const sshPort = await startSshTunnel(appPort, dir);
    targets.push({ name: 'ssh -R', port: sshPort, host: `127.0.0.1:${sshPort}` });
  } catch (err) {
    console.log(`OpenSSH reverse tunnel unavailable, skipped: ${(err as Error).message}`);
  }

  const wanted = (target: Target): boolean =>
    args.only === undefined || args.only.has(slipwayOf(target) !== undefined ? 'slipway' : target.name === 'direct' ? 'direct' : 'ssh');
  const measured = targets.filter(wanted);
  type PerRequest = { server: number; client: number; serverReads: number; serverWrites: number; haproxy: number };
  const runs = new Map<Target, Array<{ small: Result; big: Result; cpu?: PerRequest }>>();
  for (const target of measured) {
    runs.set(target, []);
    // Warm-up at the measured loads: connections, and the JIT of the Node processes (a 1 s run at
    // 10 connections left the first measured round of a tunnel ~15% below the later ones).
    await load(target, '/small', 50, 2);
    await load(target, '/big', 10, 1);
  }
  for (let round = 1; round <= args.rounds; round++) {
    // Interleaved: every target once per round, in a rotating order, so a burst of load elsewhere on
    // the machine does not land on one target's runs only.
    const order = measured.map((_, i) => measured[(i + round - 1) % measured.length] as Target);
    for (const target of order) {
      let cpu: PerRequest | undefined;
      const tunnel = slipwayOf(target);
      const before = tunnel === undefined ? undefined : await Promise.all([cpuOf(tunnel.server), cpuOf(tunnel.client)]);
      const treeBefore = tunnel === undefined ? treeCpuUs(sshPids) : tunnel.haproxyPid === undefined ? 0 : treeCpuUs([tunnel.haproxyPid]);
      const small = await load(target, '/small', 50, args.seconds);
      const requests = small.rps * args.seconds;
      if (tunnel !== undefined && before !== undefined) {
        const after = await Promise.all([cpuOf(tunnel.server), cpuOf(tunnel.client)]);
        cpu = {
          server: (after[0].cpuUs - before[0].cpuUs) / requests,
          client: (after[1].cpuUs - before[1].cpuUs) / requests,
          serverReads: (after[0].syscr - before[0].syscr) / requests,
          serverWrites: (after[0].syscw - before[0].syscw) / requests,
          haproxy: tunnel.haproxyPid === undefined ? 0 : (treeCpuUs([tunnel.haproxyPid]) - treeBefore) / requests,
        };
      } else if (target.name === 'ssh -R') {
        cpu = { server: (treeCpuUs(sshPids) - treeBefore) / requests, client: 0, serverReads: 0, serverWrites: 0, haproxy: 0 };
      }
      const big = await load(target, '/big', 10, args.seconds);
      runs.get(target)?.push({ small, big, ...(cpu === undefined ? {} : { cpu }) });
      console.log(
        `  round ${round} ${target.name}: ${fmt(small.rps)} req/s, p99 ${fmt(small.p99Ms, 2)} ms, ${fmt(big.rps, 1)} MiB/s, errors ${small.errors + big.errors}${[small.errorText && `small: ${small.errorText}`, big.errorText && `1 MiB: ${big.errorText}`].filter(Boolean).map((text) => ` (${text})`).join('')}${cpu === undefined ? '' : tunnel === undefined ? `, CPU/request sshd + ssh ${fmt(cpu.server, 1)} µs (10 ms ticks)` : `, CPU/request server ${fmt(cpu.server, 1)} µs client ${fmt(cpu.client, 1)} µs${tunnel.haproxyPid === undefined ? '' : ` haproxy ${fmt(cpu.haproxy, 1)} µs (10 ms ticks)`}, server syscalls/request ${fmt(cpu.serverReads, 2)} reads ${fmt(cpu.serverWrites, 2)} writes`}`,
      );
    }
  }

  const summary = (target: Target) => {
    const list = runs.get(target) ?? [];
    const rps = list.map((r) => r.small.rps);
    const mibs = list.map((r) => r.big.rps); // one 1 MiB body per request
    const p99 = list.map((r) => r.small.p99Ms);
    return {
      rps: median(rps), rpsMin: Math.min(...rps), rpsMax: Math.max(...rps),
      mibs: median(mibs), mibsMin: Math.min(...mibs), mibsMax: Math.max(...mibs),
      p99: median(p99), p99Min: Math.min(...p99), p99Max: Math.max(...p99),
      errors: list.reduce((sum, r) => sum + r.small.errors + r.big.errors, 0),
      cpu: list[0]?.cpu === undefined ? undefined : { server: median(list.map((r) => r.cpu?.server ?? 0)), client: median(list.map((r) => r.cpu?.client ?? 0)), haproxy: median(list.map((r) => r.cpu?.haproxy ?? 0)) },
    };
  };
  const ssh = measured.find((t) => t.name === 'ssh -R');
  const base = ssh === undefined ? undefined : summary(ssh);
  const ratio = (a: number, b: number | undefined): string => (b === undefined || b === 0 ? 'n/a' : `${fmt(a / b, 2)}x`);
  console.log('');
  console.log(`medians of ${args.rounds} round(s) [min–max]`);
  console.log('| path | req/s (100 B, 50 conn) | vs ssh | p99 ms | MiB/s (1 MiB, 10 conn) | vs ssh | errors |');
  console.log('|---|---:|---:|---:|---:|---:|---:|');
  for (const target of measured) {
    const s = summary(target);
    console.log(
      `| ${target.name} | ${fmt(s.rps)} [${fmt(s.rpsMin)}–${fmt(s.rpsMax)}] | ${ratio(s.rps, base?.rps)} | ${fmt(s.p99, 2)} [${fmt(s.p99Min, 2)}–${fmt(s.p99Max, 2)}] | ${fmt(s.mibs, 1)} [${fmt(s.mibsMin, 1)}–${fmt(s.mibsMax, 1)}] | ${ratio(s.mibs, base?.mibs)} | ${s.errors} |`,
    );
    if (s.cpu !== undefined) {
      const tunnel = slipwayOf(target);
      const what = tunnel === undefined ? `sshd + ssh ${fmt(s.cpu.server, 1)} µs` : `server ${fmt(s.cpu.server, 1)} µs, client ${fmt(s.cpu.client, 1)} µs${tunnel.haproxyPid === undefined ? '' : `, haproxy ${fmt(s.cpu.haproxy, 1)} µs`}`;
      console.log(`|   (CPU per 100 B request, median: ${what}) | | | | | | |`);
    }
  }
  for (const tunnel of slipways) {
    if (ssh === undefined || !runs.has(tunnel.target)) continue;
    const perRound = (runs.get(tunnel.target) ?? []).map((r, i) => {
      const o = runs.get(ssh)?.[i];
      return o === undefined ? 'n/a' : `${fmt(r.small.rps / o.small.rps, 2)}/${fmt(r.big.rps / o.big.rps, 2)}`;
    });
    console.log(`${tunnel.target.name} / ssh per round (small/1 MiB): ${perRound.join(', ')}`);
  }
  await rm(dir, { recursive: true, force: true });
}

/** Ends every child this run started (synchronous: usable from an 'exit' handler). */
function endChildren(): void {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill();
}

async function entry(): Promise<void> {
  const [role, ...args] = process.argv.slice(2);
  if (role !== undefined) {
    // A role whose parent is gone (killed, crashed) stops too, through its own clean SIGTERM path.
    process.once('disconnect', () => process.kill(process.pid, 'SIGTERM'));
  } else {
    // However the run ends (an error, Ctrl-C, a kill), its children end with it.
    process.once('exit', endChildren);
    for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
      process.once(signal, () => {
        endChildren();
        process.exit(130);
      });
    }
  }
  if (role === 'app') return roleApp();
  if (role === 'server') return roleServer(args[0] ?? 'node');
  if (role === 'client') return roleClient(Number(args[0]), Number(args[1]));
  try {
    await main();
  } finally {
    endChildren();
  }
}

entry().catch((err: unknown) => {
  console.error(err);
  endChildren();
  process.exitCode = 1;
});

/** The routing table as a data plane (tunnels never drain). */
function tableOnly(table: RoutingTable) {
  return nodeDataPlane(table, { drain: async () => undefined });
}
