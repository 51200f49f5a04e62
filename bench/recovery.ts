// Benchmark: how fast a restarted server answers and brings its apps back; what API load adds to app traffic's p99,
// and how much of that is sharing the event loop (a twin server's list hammered instead).
// Run: node dist/bench/recovery.js [--apps 20,100] [--seconds 10] [--rounds 3] [--connections 4] [--api-connections 8] [--p99-only | --restarts-only]
//        [--concurrency 4,8] [--cold-rounds N] [--baseline DIR] [--listen-delay S] [--poll-ms 20] [--plane node|haproxy]   (needs `wrk`: apt-get install -y wrk)
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { createDockerEngine } from '../src/runtime/docker/docker-engine.js';
import { LABEL_INSTANCE, LABEL_MANAGED } from '../src/runtime/engine.js';
import { busyboxArchive } from '../test/helpers/apps.js';
import { ADMIN_EMAIL, ADMIN_PASSWORD, PROJECT_ROOT, loginAs, removeEngineObjects, request, testEnv } from '../test/helpers/server.js';
import Database from 'better-sqlite3';
import { wrk as runWrk } from './wrk.js';
import { cpuMicros, processTree } from './proc.js';

const { values } = parseArgs({
  options: {
    apps: { type: 'string', default: '20,100' },
    seconds: { type: 'string', default: '10' },
    rounds: { type: 'string', default: '3' },
    // Only the p99 part (skips both restarts).
    'p99-only': { type: 'boolean', default: false },
    // Only the restarts (skips the p99 part).
    'restarts-only': { type: 'boolean', default: false },
    // SLIPWAY_DATA_PLANE of the server: node or haproxy.
    plane: { type: 'string', default: 'node' },
    // SLIPWAY_RECOVERY_CONCURRENCY of the restarts after the containers stopped: a list runs one restart per value, interleaved (unset: the server's default).
    concurrency: { type: 'string' },
    // How many times the restarts after the containers stopped are repeated (each concurrency once per round).
    'cold-rounds': { type: 'string', default: '1' },
    // Another checkout (compiled, same database schema) whose server is timed too, interleaved, in the restarts after the containers stopped.
    baseline: { type: 'string' },
    // Milliseconds between two looks at the apps that do not answer 200 yet (each look asks every one of them once).
    'poll-ms': { type: 'string', default: '20' },
    // Seconds each app waits before it listens (a slower app than busybox httpd's instant start).
    'listen-delay': { type: 'string', default: '0' },
    // busybox httpd closes every connection: more wrk connections overflow its accept queue on a busy host.
    connections: { type: 'string', default: '4' },
    'api-connections': { type: 'string', default: '8' },
  },
});

const engine = createDockerEngine();

async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const port = (server.address() as net.AddressInfo).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** One GET with a Host header; the status, or 0 when nothing answered (refused, reset, 2 s timeout). */
function get(port: number, host: string, urlPath = '/'): Promise<number> {
  return new Promise((resolve) => {
    const req = http.get({ host: '127.0.0.1', port, path: urlPath, headers: { host }, agent: false, timeout: 2000 }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
      res.on('error', () => resolve(0));
    });
    req.on('timeout', () => req.destroy());
    req.on('error', () => resolve(0));
  });
}

interface Server {
  child: ChildProcess;
  stop(signal: NodeJS.Signals): Promise<void>;
}

function startServer(env: Record<string, string>, root = PROJECT_ROOT): Server {
  const child = spawn(process.execPath, ['--max-semi-space-size=2', path.join(root, 'bin', 'slipway.js'), 'server'], {
    env: { PATH: process.env['PATH'] ?? '/usr/bin:/bin', HOME: os.tmpdir(), ...env },
    stdio: ['ignore', 'ignore', 'ignore'],
  });
  return {
    child,
    stop: (signal) =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null || child.signalCode !== null) return resolve();
        child.once('exit', () => resolve());
        child.kill(signal);
      }),
  };
}

/** Seconds from `since` until `check` passes (polled every `everyMs`), at most `limitMs`; NaN when it does not (or `gone()` says it never will). */
async function timeUntil(since: number, check: () => Promise<boolean>, everyMs: number, limitMs: number, gone = (): boolean => false): Promise<number> {
  for (;;) {
    if (await check()) return (performance.now() - since) / 1000;
    if (performance.now() - since > limitMs || gone()) return Number.NaN;
    await new Promise((resolve) => setTimeout(resolve, everyMs));
  }
}

/** Starts the server and times its first answer (/healthz) and every app's first 200. */
async function timedStart(env: Record<string, string>, port: number, subdomains: string[], root = PROJECT_ROOT): Promise<{ server: Server; first: number; all: number }> {
  const since = performance.now();
  const server = startServer(env, root);
  const exited = (): boolean => server.child.exitCode !== null || server.child.signalCode !== null;
  const first = await timeUntil(since, async () => (await get(port, `127.0.0.1:${port}`, '/healthz')) === 200, 5, 60_000, exited);
  // A server that did not start (e.g. a baseline checkout older than the database's migrations) is not polled for a minute.
  if (Number.isNaN(first)) return { server, first, all: Number.NaN };
  const pending = new Set(subdomains);
  const all = await timeUntil(
    since,
    async () => {
      await Promise.all([...pending].map(async (s) => ((await get(port, `${s}.localhost:${port}`)) === 200 ? pending.delete(s) : undefined)));
      return pending.size === 0;
    },
    Number(values['poll-ms']),
    180_000,
  );
  return { server, first, all };
}

/** wrk's requests/s and p99 (ms), with `headers`. */
async function wrk(url: string, headers: string[], connections: string, seconds: string): Promise<{ rps: number; p99: number; errors: string }> {
  const result = await runWrk(url, { threads: 1, connections, seconds, headers });
  return { rps: result.rps, p99: result.p99Ms, errors: result.errorText };
}

/** bench/api's baseline: a bare Fastify route in its own process answering `body` at the list's path. */
async function spawnBareServer(body: string): Promise<{ child: ChildProcess; url: string }> {
  const script = path.join(path.dirname(fileURLToPath(import.meta.url)), 'bare-json-server.js');
  const child = spawn(process.execPath, ['--max-semi-space-size=2', script], { stdio: ['pipe', 'pipe', 'inherit'] });
  child.stdin?.end(body);
  let output = '';
  child.stdout?.setEncoding('utf8');
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('the bare server did not start within 30 s')), 30_000);
    child.stdout?.on('data', (chunk: string) => {
      output += chunk;
      const match = /listening on (http:\/\/\S+)/.exec(output);
      if (match?.[1] !== undefined) {
        clearTimeout(timer);
        resolve({ child, url: match[1] });
      }
    });
  });
}

/** CPU seconds (user + system, with reaped children) of one process, from /proc; NaN when unreadable. */
function processCpuSeconds(pid: number): number {
  try {
    return cpuMicros(pid, { reaped: true }) / 1e6;
  } catch {
    return Number.NaN;
  }
}

/** CPU seconds of a process and its live descendants (the supervisor and its server worker); NaN when it is gone. */
function treeCpuSeconds(pid: number): number {
  let tree: Array<{ pid: number }>;
  try {
    tree = processTree(pid);
  } catch {
    return Number.NaN;
  }
  return tree.reduce((total, p) => total + processCpuSeconds(p.pid), 0);
}

/** The engine's CPU seconds so far by process kind: dockerd, containerd, the containerd shims (with the runc runs they reaped), docker-proxy. */
function engineCpuSeconds(): Map<string, number> {
  const byKind = new Map<string, number>();
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    let comm: string;
    try {
      comm = fs.readFileSync(`/proc/${entry}/comm`, 'utf8').trim();
    } catch {
      continue;
    }
    if (!/^(?:dockerd|containerd|containerd-shim.*|docker-proxy|runc)$/.test(comm)) continue;
    const cpu = processCpuSeconds(Number(entry));
    const kind = comm.startsWith('containerd-shim') ? 'shims' : comm;
    if (!Number.isNaN(cpu)) byKind.set(kind, (byKind.get(kind) ?? 0) + cpu);
  }
  return byKind;
}

/** The engine's CPU seconds from `before` to now: the total, and each kind's share as text. */
function engineCpuSince(before: Map<string, number>): { total: number; parts: string } {
  const now = engineCpuSeconds();
  const parts: string[] = [];
  let total = 0;
  for (const [kind, seconds] of now) {
    // docker-proxy and shim processes of stopped containers are gone: a kind counts only what its live processes used.
    const used = Math.max(0, seconds - (before.get(kind) ?? 0));
    total += used;
    parts.push(`${kind} ${used.toFixed(1)}`);
  }
  return { total, parts: parts.join(', ') };
}

function median(xs: number[]): number {
  const sorted = [...xs].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? Number.NaN;
}

/**
 * GETs `url` at `rps` requests/s for `seconds` over at most `connections` keep-alive sockets (a
 * request due while all are busy is skipped and counted): the same API load on two servers, where
 * a closed loop (wrk) would load the faster one more.
 */
async function paced(url: string, headers: Record<string, string>, rps: number, seconds: number, connections: number): Promise<{ answered: number; skipped: number }> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: connections });
  let inFlight = 0;
  let answered = 0;
  let skipped = 0;
  let sent = 0;
  const started = performance.now();
  await new Promise<void>((resolve) => {
    const tick = setInterval(() => {
      const elapsed = performance.now() - started;
      if (elapsed >= seconds * 1000) {
        clearInterval(tick);
        resolve();
        return;
      }
      for (const due = Math.floor((elapsed / 1000) * rps); sent < due; sent += 1) {
        if (inFlight >= connections) {
          skipped += 1;
          continue;
        }
        inFlight += 1;
        const done = (): void => {
          inFlight -= 1;
        };
        http
          .get(url, { agent, headers }, (res) => {
            res.resume();
            res.on('end', () => {
              answered += 1;
              done();
            });
          })
          .on('error', done);
      }
    }, 2);
  });
  agent.destroy();
  return { answered, skipped };
}

/** The p99 part's control: another Slipway server with `count` deployments (created, never built), on its own data directory. */
async function startTwin(count: number): Promise<{ url: string; token: string; close: () => Promise<void> }> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'slipway-bench-twin-'));
  const port = await freePort();
  const { server, first } = await timedStart({ ...testEnv(dataDir, { SLIPWAY_PORT: String(port) }), SLIPWAY_LOG_LEVEL: 'silent', SLIPWAY_DATA_PLANE: values.plane }, port, []);
  const close = async (): Promise<void> => {
    await server.stop('SIGTERM');
    fs.rmSync(dataDir, { recursive: true, force: true });
  };
  if (Number.isNaN(first)) {
    await close();
    throw new Error('the twin server did not start');
  }
  const url = `http://127.0.0.1:${port}`;
  const token = await loginAs(url, ADMIN_EMAIL, ADMIN_PASSWORD);
  for (let i = 0; i < count; i += 1) {
    const name = `t${i}-${process.pid}`;
    const created = await request(url, 'POST', '/api/v1/deployments', { token, body: { name, subdomain: name, source_type: 'archive' } });
    if (created.status !== 201) throw new Error(`the twin's deployment: ${created.text}`);
  }
  return { url, token, close };
}

const roots = [PROJECT_ROOT, ...(values.baseline === undefined ? [] : [path.resolve(values.baseline)])];
const concurrencies: Array<string | undefined> = values.concurrency === undefined ? [undefined] : values.concurrency.split(',');

async function scenario(count: number): Promise<void> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'slipway-bench-recovery-'));
  const port = await freePort();
  const env = {
    ...testEnv(dataDir, { SLIPWAY_PORT: String(port), SLIPWAY_MAX_CONCURRENT_BUILDS: '4', SLIPWAY_STARTUP_TIMEOUT_SECONDS: '60' }),
    SLIPWAY_LOG_LEVEL: 'silent',
    SLIPWAY_DATA_PLANE: values.plane,
    ...(process.env['SLIPWAY_TRACE_FILE'] === undefined ? {} : { SLIPWAY_TRACE_FILE: process.env['SLIPWAY_TRACE_FILE'] }),
  };
  let server: Server | undefined;
  try {
    const start = await timedStart(env, port, []);
    server = start.server;
    console.log(`\nfirst start, no apps (baseline):   first answer ${start.first.toFixed(2)} s`);
    const url = `http://127.0.0.1:${port}`;
    const token = await loginAs(url, ADMIN_EMAIL, ADMIN_PASSWORD);
    const subdomains = Array.from({ length: count }, (_, i) => `r${i}-${process.pid}`);
    const deployStarted = performance.now();
    // Deployed 8 at a time (the server builds 4 at once).
    const queue = [...subdomains];
    await Promise.all(
      Array.from({ length: 8 }, async () => {
        for (let s = queue.shift(); s !== undefined; s = queue.shift()) {
          const created = await request(url, 'POST', '/api/v1/deployments', { token, body: { name: s, subdomain: s, source_type: 'archive' } });
          const id = created.json.id as string;
          const form = new FormData();
          form.append('archive', new Blob([(await busyboxArchive({ body: `${s}\n`, listenDelaySeconds: Number(values['listen-delay']) })).archive]), 'a.tar.gz');
          await request(url, 'POST', `/api/v1/deployments/${id}/upload`, { token, raw: form });
          const deployed = await request(url, 'POST', `/api/v1/deployments/${id}/deploy?wait=true`, { token });
          if (deployed.status !== 200) throw new Error(`deploy of ${s} failed: ${deployed.text}`);
        }
      }),
    );
    console.log(`${count} apps deployed in ${((performance.now() - deployStarted) / 1000).toFixed(1)} s`);

    // 1. Server restart, containers running.
    if (!values['p99-only']) await restarts();
    async function restarts(): Promise<void> {
      if (server === undefined) return;
      await server.stop('SIGTERM');
      const warm = await timedStart(env, port, subdomains);
      server = warm.server;
      console.log(`server restart, apps running:      first answer ${warm.first.toFixed(2)} s, all ${count} apps 200 ${warm.all.toFixed(2)} s`);

      // 2. Host reboot: the server and every container stopped; once per concurrency per round, interleaved.
      const sqlite = new Database(path.join(dataDir, 'slipway.db'), { readonly: true });
      const instance = (sqlite.prepare('select id from instance').get() as { id: string }).id;
      sqlite.close();
      for (let round = 0; round < Number(values['cold-rounds']); round += 1) {
        for (const [concurrency, root] of concurrencies.flatMap((c) => roots.map((r) => [c, r] as const))) {
          await server?.stop('SIGKILL');
          const containers = await engine.listContainers({ [LABEL_MANAGED]: 'true', [LABEL_INSTANCE]: instance });
          await Promise.all(containers.map((c) => engine.stopContainer(c.id, 0)));
          const engineBefore = engineCpuSeconds();
          const cpuBefore = process.cpuUsage();
          const coldEnv = concurrency === undefined ? env : { ...env, SLIPWAY_RECOVERY_CONCURRENCY: concurrency };
          const load = (os.loadavg()[0] ?? 0).toFixed(1);
          const cold = await timedStart(coldEnv, port, subdomains, root);
          server = cold.server;
          const { total: engineCpu, parts: engineParts } = engineCpuSince(engineBefore);
          const serverCpu = cold.server.child.pid === undefined ? Number.NaN : treeCpuSeconds(cold.server.child.pid);
          const benchUsage = process.cpuUsage(cpuBefore);
          const benchCpu = (benchUsage.user + benchUsage.system) / 1e6;
          console.log(
            `restart after containers stopped${root === PROJECT_ROOT ? '' : ` [${root}]`}${concurrency === undefined ? '' : ` (recovery concurrency ${concurrency})`}: first answer ${cold.first.toFixed(2)} s, ` +
              `all ${count} apps 200 ${cold.all.toFixed(2)} s; CPU until then: engine ${engineCpu.toFixed(1)} s ` +
              `(${((engineCpu / count) * 1000).toFixed(0)} ms per app; ${engineParts}), server ${serverCpu.toFixed(1)} s, ` +
              `this bench ${benchCpu.toFixed(1)} s; load ${load} at its start`,
          );
        }
      }
    }

    if (values['restarts-only']) return;
    // 3. App traffic's p99, alone and while the deployments list (a page of up to 100) is hammered.
    const appUrl = `${url}/`;
    const appHost = `Host: ${subdomains[0]}.localhost:${port}`;
    // Two controls, each hammered while wrk measures the same app:
    // - a twin: another Slipway server (its own data directory and event loop) holding as many
    //   deployments, its list hammered the same way. Same code, same CPU per request: the
    //   difference from hammering this server's own list is what sharing the event loop costs.
    // - the same list body on a bare Fastify route in another process (more req/s, so more CPU).
    const listBody = (await request(url, 'GET', '/api/v1/deployments', { token })).text;
    const bare = await spawnBareServer(listBody);
    const twin = await startTwin(count);
    const quiet: number[] = [];
    const loaded: number[] = [];
    const twinLoaded: number[] = [];
    const control: number[] = [];
    let apiRps = 0;
    let twinRps = 0;
    let bareRps = 0;
    const underLoad = async (target: string, headers: string[]): Promise<{ app: number; rps: number }> => {
      const [app, load] = await Promise.all([
        wrk(appUrl, [appHost], values.connections, values.seconds),
        wrk(target, headers, values['api-connections'], values.seconds),
      ]);
      for (const r of [app, load]) if (r.errors !== '') console.log(`  (errors: ${r.errors})`);
      return { app: app.p99, rps: load.rps };
    };
    // The same API load on both servers: a paced 80% of what this server's own list answered under wrk.
    let pacedRps = 0;
    const pacedOwn: number[] = [];
    const pacedTwin: number[] = [];
    let pacedSkipped = 0;
    let pacedAnswered = 0;
    const underPaced = async (target: string, auth: string): Promise<number> => {
      const [app, load] = await Promise.all([
        wrk(appUrl, [appHost], values.connections, values.seconds),
        // More sockets than wrk's: a request is never held back by the previous one on its socket.
        paced(target, { authorization: `Bearer ${auth}` }, pacedRps, Number(values.seconds), 4 * Number(values['api-connections'])),
      ]);
      pacedSkipped += load.skipped;
      pacedAnswered += load.answered;
      return app.p99;
    };
    try {
      for (let round = 0; round < Number(values.rounds); round += 1) {
        quiet.push((await wrk(appUrl, [appHost], values.connections, values.seconds)).p99);
        const own = await underLoad(`${url}/api/v1/deployments`, [`Authorization: Bearer ${token}`]);
        loaded.push(own.app);
        apiRps = own.rps;
        if (round === 0) pacedRps = Math.round(own.rps * 0.8);
        pacedOwn.push(await underPaced(`${url}/api/v1/deployments`, token));
        pacedTwin.push(await underPaced(`${twin.url}/api/v1/deployments`, twin.token));
        const other = await underLoad(`${twin.url}/api/v1/deployments`, [`Authorization: Bearer ${twin.token}`]);
        twinLoaded.push(other.app);
        twinRps = other.rps;
        const plain = await underLoad(`${bare.url}/api/v1/deployments`, []);
        control.push(plain.app);
        bareRps = plain.rps;
      }
    } finally {
      bare.child.kill('SIGTERM');
      await twin.close();
    }
    const list = (xs: number[]): string => xs.map((x) => x.toFixed(1)).join('/');
    const added = (xs: number[]): string => `${median(xs).toFixed(2)} ms (added ${(median(xs) - median(quiet)).toFixed(2)})`;
    console.log(
      `app p99 (wrk -c${values.connections}, ${values.rounds} rounds, median): alone ${median(quiet).toFixed(2)} ms; ` +
        `Slipway's own list hammered (${values['api-connections']} conns, ${apiRps.toFixed(0)} req/s) ${added(loaded)}; ` +
        `a twin Slipway server's list hammered (${twinRps.toFixed(0)} req/s) ${added(twinLoaded)}; ` +
        `the same JSON on a bare route in another process (${bareRps.toFixed(0)} req/s) ${added(control)}; ` +
        `rounds ${list(quiet)} | ${list(loaded)} | ${list(twinLoaded)} | ${list(control)}`,
    );
    console.log(
      `the same paced API load (${pacedRps} req/s asked, ${(pacedAnswered / (2 * Number(values.rounds) * Number(values.seconds))).toFixed(0)} answered, ${pacedSkipped} skipped with every socket busy): ` +
        `this server's list ${added(pacedOwn)}; the twin's list ${added(pacedTwin)}; ` +
        `what sharing the event loop adds: ${(median(pacedOwn) - median(pacedTwin)).toFixed(2)} ms; rounds ${list(pacedOwn)} | ${list(pacedTwin)}`,
    );
  } finally {
    await server?.stop('SIGTERM');
    await removeEngineObjects(dataDir);
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}

console.log(`bench/recovery on ${os.cpus().length} CPUs, load average ${os.loadavg().map((l) => l.toFixed(1)).join(' ')}`);
for (const count of values.apps.split(',').map(Number)) await scenario(count);
