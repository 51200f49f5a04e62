// Benchmark: a deployed container app through Slipway's router (HAProxy and/or Node data plane) vs the same container directly,
// with nginx and a bare HAProxy in front of the same container as reference rows, then a release replaced under load through the edge; with wrk.
// Run: node dist/bench/router.js [--plane haproxy|node|both] [--app node|busybox] [--duration 10] [--rounds 3] [--skip-references] [--skip-release] [--haproxy-threads N]
//   (needs `wrk`: apt-get install -y wrk; installs Debian's nginx when missing, as root)
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { createDockerEngine } from '../src/runtime/docker/docker-engine.js';
import { LABEL_DEPLOYMENT, type ContainerInfo } from '../src/runtime/engine.js';
import { tarGzOf } from '../test/helpers/apps.js';
import { ensureBusyboxImage, BUSYBOX_IMAGE } from '../test/helpers/busybox-image.js';
import { ensureNodeImage, NODE_IMAGE } from '../test/helpers/node-image.js';
import { ADMIN_EMAIL, ADMIN_PASSWORD, loginAs, removeEngineObjects, request, spawnServerProcess, testEnv } from '../test/helpers/server.js';
import { loadConfig } from '../src/config.js';
import { findHaproxy } from '../src/proxy/haproxy/haproxy-binary.js';
import { ensureNginx, startBareHaproxy, startNginxProxy, type ReferenceProxy } from './reference-proxies.js';
import { cpuMicros, hostCpuTicks, processTree } from './proc.js';
import { wrk, type WrkResult } from './wrk.js';

const { values } = parseArgs({
  options: {
    plane: { type: 'string', default: 'both' },
    // The app behind the edge: a Node server that keeps connections alive (as every real app server does),
    // or busybox httpd, which forks and closes the connection per request.
    app: { type: 'string', default: 'node' },
    duration: { type: 'string', default: '10' },
    rounds: { type: 'string', default: '3' },
    // The issue's load: 50 connections for small bodies, 10 for 1 MiB bodies.
    'small-connections': { type: 'string', default: '50' },
    'large-connections': { type: 'string', default: '10' },
    // nginx and a bare HAProxy in front of the first plane's container, as reference rows.
    'skip-references': { type: 'boolean', default: false },
    // The release replaced under load (small bodies through the first plane, HAProxy when present).
    'skip-release': { type: 'boolean', default: false },
    'release-connections': { type: 'string', default: '10' },
    // SLIPWAY_HAPROXY_THREADS for the HAProxy plane's server (default: the server's own, half the CPUs).
    'haproxy-threads': { type: 'string' },
  },
});
if (!['haproxy', 'node', 'both'].includes(values.plane)) throw new Error('--plane must be haproxy, node or both');
if (!['node', 'busybox'].includes(values.app)) throw new Error('--app must be node or busybox');
const planes = values.plane === 'both' ? (['haproxy', 'node'] as const) : ([values.plane] as const);

// Ctrl-C or SIGTERM stops the wrk under way and ends the run through main's cleanup (servers, containers, reference proxies, folders).
const interrupted = new AbortController();
for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, () => interrupted.abort(new Error(`interrupted by ${signal}`)));

/** A wrk run with what the host's CPUs did meanwhile. */
interface Measured extends WrkResult {
  /** Share of the host's CPU time that was busy during the run (1 = both cores saturated). */
  readonly hostBusy: number;
  /** HAProxy's CPU time per request, in µs (10 ms ticks), when it was the edge measured. */
  readonly haproxyMicros: number | undefined;
}

/** wrk against `url` with `Host: host`, `values.duration` seconds; stops early when interrupted. */
async function load(url: string, host: string, connections: string, haproxyPid?: number): Promise<Measured> {
  interrupted.signal.throwIfAborted();
  const hostBefore = hostCpuTicks();
  const haproxyBefore = haproxyPid === undefined ? 0 : cpuMicros(haproxyPid);
  const result = await wrk(url, { connections, seconds: values.duration, headers: [`Host: ${host}`], signal: interrupted.signal });
  const hostAfter = hostCpuTicks();
  const haproxyMicros = haproxyPid === undefined ? undefined : (cpuMicros(haproxyPid) - haproxyBefore) / result.requests;
  interrupted.signal.throwIfAborted();
  return { ...result, hostBusy: (hostAfter.busy - hostBefore.busy) / (hostAfter.total - hostBefore.total), haproxyMicros };
}

interface PlaneRun {
  readonly plane: string;
  readonly server: Awaited<ReturnType<typeof spawnServerProcess>>;
  readonly dataDir: string;
  readonly token: string;
  readonly id: string;
  readonly container: ContainerInfo & { hostPort: number };
  /** The server's HAProxy (HAProxy plane only). */
  readonly haproxyPid: number | undefined;
}

/** Starts a server on one plane and deploys the app built from `dir` on it. */
async function deployOn(plane: string, dir: string): Promise<PlaneRun> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), `slipway-bench-router-${plane}-`));
  const threads = values['haproxy-threads'];
  const server = await spawnServerProcess(testEnv(dataDir, { SLIPWAY_DATA_PLANE: plane, ...(threads === undefined ? {} : { SLIPWAY_HAPROXY_THREADS: threads }) }));
  const token = await loginAs(server.url, ADMIN_EMAIL, ADMIN_PASSWORD);
  const archive = await tarGzOf(dir);
  const created = await request(server.url, 'POST', '/api/v1/deployments', {
    token,
    body: { name: 'bench', subdomain: 'bench', source_type: 'archive' },
  });
  const id = created.json.id as string;
  const form = new FormData();
  form.append('archive', new Blob([archive]), 'a.tar.gz');
  await request(server.url, 'POST', `/api/v1/deployments/${id}/upload`, { token, raw: form });
  const deployed = await request(server.url, 'POST', `/api/v1/deployments/${id}/deploy?wait=true`, { token });
  if (deployed.status !== 200) throw new Error(`deploy failed: ${deployed.text}`);
  const haproxyPid = processTree(server.child.pid as number).find((p) => p.name === 'haproxy')?.pid;
  return { plane, server, dataDir, token, id, container: await runningContainer(id), haproxyPid };
}

/** The deployment's running container (exactly one once a deploy has returned). */
async function runningContainer(id: string): Promise<ContainerInfo & { hostPort: number }> {
  const running = (await createDockerEngine().listContainers({ [LABEL_DEPLOYMENT]: id })).filter((c) => c.running);
  const container = running[0];
  if (running.length !== 1 || container?.hostPort == null) throw new Error(`expected one running container with a port, found ${running.length}`);
  return { ...container, hostPort: container.hostPort };
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? Number.NaN;
}

/** Waits (up to `timeoutMs`) until the deployment's only running container is a new one, not `oldId`. */
async function soleNewContainer(id: string, oldId: string, timeoutMs: number): Promise<ContainerInfo> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    interrupted.signal.throwIfAborted();
    const running = (await createDockerEngine().listContainers({ [LABEL_DEPLOYMENT]: id })).filter((c) => c.running);
    const only = running[0];
    if (running.length === 1 && only !== undefined && only.id !== oldId) return only;
    if (Date.now() > deadline) throw new Error(`the old release was still running (or no new one) ${timeoutMs / 1000} s after the redeploy`);
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

/** One measured target's per-round results against its own direct run. */
interface Row {
  readonly target: string;
  readonly body: string;
  readonly direct: Measured[];
  readonly edge: Measured[];
}

function summary(rows: Iterable<Row>): string[] {
  const lines = [
    'target   body    edge/direct req/s (median; rounds)       p99 direct    p99 edge   p99 added   errors direct/edge   host CPU busy direct/edge   haproxy µs/req',
  ];
  for (const row of rows) {
    const ratios = row.edge.map((e, i) => e.rps / (row.direct[i]?.rps ?? Number.NaN));
    const p99Direct = median(row.direct.map((r) => r.p99Ms));
    const p99Edge = median(row.edge.map((r) => r.p99Ms));
    const added = p99Edge - p99Direct;
    const sum = (results: WrkResult[]): number => results.reduce((total, r) => total + r.errors, 0);
    const busy = (results: Measured[]): string => `${(median(results.map((r) => r.hostBusy)) * 100).toFixed(0)}%`;
    const haproxy = median(row.edge.map((r) => r.haproxyMicros ?? Number.NaN));
    lines.push(
      `${row.target.padEnd(8)} ${row.body.padEnd(6)}  ×${median(ratios).toFixed(2)} (${ratios.map((v) => v.toFixed(2)).join(', ')})`.padEnd(58) +
        `${p99Direct.toFixed(1).padStart(8)} ms ${p99Edge.toFixed(1).padStart(8)} ms ${`${added >= 0 ? '+' : ''}${added.toFixed(1)} ms`.padStart(10)}   ` +
        `${`${sum(row.direct)}/${sum(row.edge)}`.padEnd(18)}   ${`${busy(row.direct)}/${busy(row.edge)}`.padEnd(26)}  ${Number.isNaN(haproxy) ? '' : haproxy.toFixed(1)}`,
    );
  }
  return lines;
}

function loadAverage(): string {
  return `load average ${os.loadavg().map((n) => n.toFixed(2)).join(' ')} at ${new Date().toISOString()}`;
}

function describe(name: string, w: Measured): string {
  return (
    `${name.padEnd(8)} ${w.rps.toFixed(0).padStart(9)} req/s  p99 ${w.p99Ms.toFixed(2).padStart(8)} ms  ` +
    `${w.mibPerSec.toFixed(1).padStart(8)} MiB/s  ${w.requests} requests${w.errors > 0 ? `, ${w.errors} failed (${w.errorText})` : ''}; ` +
    `host CPU ${(w.hostBusy * 100).toFixed(0)}% busy${w.haproxyMicros === undefined ? '' : `, haproxy ${w.haproxyMicros.toFixed(1)} µs/request`}`
  );
}

/**
 * wrk (small body) through `r`'s router while the app is deployed again through the API: the new release
 * replaces the old one under load. Every failed request (non-2xx, connect/read/write error, timeout) counts.
 */
async function releaseUnderLoad(r: PlaneRun, dir: string): Promise<void> {
  const before = r.container;
  const stopLoad = new AbortController();
  const onInterrupt = (): void => stopLoad.abort();
  interrupted.signal.addEventListener('abort', onInterrupt, { once: true });
  // wrk runs until stopped (the bound is only a guard); 10 s timeouts so a slow fork in busybox httpd (--app busybox) is not a "failure".
  const loadDone = wrk(`http://127.0.0.1:${r.server.port}/small`, {
    connections: values['release-connections'],
    seconds: 600,
    timeoutSeconds: 10,
    headers: [`Host: bench.localhost:${r.server.port}`],
    signal: stopLoad.signal,
  });
  try {
    await new Promise((resolve) => setTimeout(resolve, 3000));
    // A changed file makes a new image, so this is a real new release, not the same image restarted.
    await fsp.writeFile(path.join(dir, 'release'), String(Date.now()));
    const archive = await tarGzOf(dir);
    const form = new FormData();
    form.append('archive', new Blob([archive]), 'a.tar.gz');
    const uploaded = await request(r.server.url, 'POST', `/api/v1/deployments/${r.id}/upload`, { token: r.token, raw: form });
    if (uploaded.status >= 300) throw new Error(`upload failed: ${uploaded.text}`);
    const started = performance.now();
    const deployed = await request(r.server.url, 'POST', `/api/v1/deployments/${r.id}/deploy?wait=true`, { token: r.token });
    const deploySeconds = (performance.now() - started) / 1000;
    if (deployed.status !== 200) throw new Error(`redeploy failed: ${deployed.text}`);
    // The old release drains after the deploy returns: keep the load on until it is gone, then a while on the new one alone.
    const after = await soleNewContainer(r.id, before.id, 120_000);
    const drainedSeconds = (performance.now() - started) / 1000;
    await new Promise((resolve) => setTimeout(resolve, 3000));
    stopLoad.abort();
    const result = await loadDone;
    interrupted.signal.throwIfAborted();
    console.log(
      `\nrelease replaced under load (${r.plane}; wrk -c${values['release-connections']} small bodies, --timeout 10s; ` +
        `deploy?wait=true took ${deploySeconds.toFixed(1)} s, the old container was gone after ${drainedSeconds.toFixed(1)} s; ` +
        `container ${before.id.slice(0, 12)} → ${after.id.slice(0, 12)}):`,
    );
    const { connect, read, write, timeout } = result.socketErrors;
    console.log(
      `  ${result.requests} requests, ${result.errors} failed (non-2xx ${result.non2xx}; socket errors: connect ${connect}, read ${read}, write ${write}, timeout ${timeout}); ` +
        `${result.rps.toFixed(0)} req/s, p99 ${result.p99Ms.toFixed(1)} ms`,
    );
    console.log(`  (${loadAverage()})`);
    if (result.errors > 0) process.exitCode = 1;
  } finally {
    stopLoad.abort();
    interrupted.signal.removeEventListener('abort', onInterrupt);
    await loadDone.catch(() => undefined);
  }
}

/** Writes the app's Dockerfile (and server) next to its two files, `small` and `1m`. */
async function writeApp(dir: string): Promise<void> {
  if (values.app === 'busybox') {
    const dockerfile = [`FROM ${BUSYBOX_IMAGE}`, 'COPY small 1m /www/', 'EXPOSE 8080', 'CMD ["/bin/sh", "-c", "exec httpd -f -p $PORT -h /www"]', ''];
    await fsp.writeFile(path.join(dir, 'Dockerfile'), dockerfile.join('\n'));
    return;
  }
  // Both files held in memory; an unknown path is a 404. Connections stay open between requests.
  const server = [
    "const http = require('node:http');",
    "const fs = require('node:fs');",
    "const files = { '/small': fs.readFileSync('/app/small'), '/1m': fs.readFileSync('/app/1m') };",
    'http.createServer((req, res) => {',
    '  const body = files[req.url];',
    "  res.writeHead(body === undefined ? 404 : 200, { 'content-type': 'application/octet-stream', 'content-length': body === undefined ? 0 : body.length });",
    '  res.end(body);',
    '}).listen(Number(process.env.PORT));',
    "process.on('SIGTERM', () => process.exit(0));",
    '',
  ];
  await fsp.writeFile(path.join(dir, 'server.cjs'), server.join('\n'));
  const dockerfile = [`FROM ${NODE_IMAGE}`, 'WORKDIR /app', 'COPY . /app', 'EXPOSE 3000', 'CMD ["/usr/bin/node", "/app/server.cjs"]', ''];
  await fsp.writeFile(path.join(dir, 'Dockerfile'), dockerfile.join('\n'));
}

async function main(): Promise<void> {
  const engine = createDockerEngine();
  await ensureBusyboxImage(engine);
  if (values.app === 'node') await ensureNodeImage(engine);
  if (!values['skip-references']) await ensureNginx();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'slipway-bench-app-'));
  const runs: PlaneRun[] = [];
  const references: Array<{ name: string; proxy: ReferenceProxy }> = [];
  try {
    await fsp.writeFile(path.join(dir, 'small'), 'hello world');
    await fsp.writeFile(path.join(dir, '1m'), Buffer.alloc(1024 * 1024, 97));
    await writeApp(dir);
    for (const plane of planes) {
      interrupted.signal.throwIfAborted();
      runs.push(await deployOn(plane, dir));
    }
    const first = runs[0];
    if (first === undefined) throw new Error('no plane to measure');
    // The reference proxies go to the first plane's container directly, so their rows share that plane's direct runs.
    if (!values['skip-references']) {
      references.push({ name: 'nginx', proxy: await startNginxProxy(first.container.hostPort) });
      const haproxy = await findHaproxy(undefined);
      if (!('path' in haproxy)) throw new Error(`no HAProxy for the bare reference row: ${haproxy.missing}`);
      const threads = Number(values['haproxy-threads'] ?? loadConfig({}).haproxyThreads);
      references.push({ name: 'bare', proxy: await startBareHaproxy(haproxy.path, first.container.hostPort, threads) });
    }
    const rounds = Number(values.rounds);
    console.log(
      `wrk -t2 -d${values.duration}s; small: ${values['small-connections']} connections, 1 MiB: ${values['large-connections']}; ` +
        `${rounds} rounds, targets interleaved within each round (each plane with its own identical ${values.app === 'node' ? 'Node keep-alive' : 'busybox httpd'} container` +
        `${references.length === 0 ? '' : `; nginx and a bare HAProxy ("bare") in front of the ${first.plane} plane's container`}); CPUs: ${os.cpus().length}; ${loadAverage()}\n`,
    );
    const rows = new Map<string, Row>();
    const record = (target: string, body: string, direct: Measured, edge: Measured): void => {
      const key = `${target} ${body}`;
      const row = rows.get(key) ?? { target, body, direct: [], edge: [] };
      row.direct.push(direct);
      row.edge.push(edge);
      rows.set(key, row);
    };
    for (let round = 1; round <= rounds; round++) {
      for (const [body, file, connections] of [['small', '/small', values['small-connections']], ['1 MiB', '/1m', values['large-connections']]] as const) {
        for (const r of runs) {
          const direct = await load(`http://127.0.0.1:${r.container.hostPort}${file}`, `127.0.0.1:${r.container.hostPort}`, connections);
          const routed = await load(`http://127.0.0.1:${r.server.port}${file}`, `bench.localhost:${r.server.port}`, connections, r.haproxyPid);
          record(r.plane, body, direct, routed);
          console.log(`round ${round} ${body.padEnd(6)} ${describe(`direct`, direct)}`);
          console.log(`round ${round} ${body.padEnd(6)} ${describe(r.plane, routed)}`);
          for (const { name, proxy } of r === first ? references : []) {
            const proxied = await load(`http://127.0.0.1:${proxy.port}${file}`, `127.0.0.1:${proxy.port}`, connections, proxy.workerPid);
            record(name, body, direct, proxied);
            console.log(`round ${round} ${body.padEnd(6)} ${describe(name, proxied)}`);
          }
        }
      }
    }
    console.log(`\nper target, against the direct run just before it (medians of ${rounds} rounds; p99 added = median edge p99 − median direct p99):`);
    const order = ['haproxy', 'bare', 'nginx', 'node'];
    const sorted = [...rows.values()].sort((a, b) => order.indexOf(a.target) - order.indexOf(b.target) || (a.body === 'small' ? -1 : 1));
    console.log(summary(sorted).join('\n'));
    console.log(`(${loadAverage()})`);
    for (const { proxy } of references) await proxy.stop();
    if (!values['skip-release']) await releaseUnderLoad(runs.find((r) => r.plane === 'haproxy') ?? first, dir);
  } finally {
    for (const { proxy } of references) await proxy.stop();
    for (const r of runs) {
      await r.server.kill('SIGTERM');
      // Leave nothing behind: the app's containers and images, and the folders.
      await removeEngineObjects(r.dataDir);
      fs.rmSync(r.dataDir, { recursive: true, force: true });
    }
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

await main();
