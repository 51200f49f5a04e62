// Benchmark: a deployed container app through Slipway's router (HAProxy and/or Node data plane) vs the same container directly, with wrk.
// Run: node dist/bench/router.js [--plane haproxy|node|both] [--duration 10] [--rounds 3]   (needs `wrk`: apt-get install -y wrk)
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { parseArgs, promisify } from 'node:util';
import { createDockerEngine } from '../src/runtime/docker/docker-engine.js';
import { LABEL_DEPLOYMENT } from '../src/runtime/engine.js';
import { tarGzOf } from '../test/helpers/apps.js';
import { ensureBusyboxImage, BUSYBOX_IMAGE } from '../test/helpers/busybox-image.js';
import { ADMIN_EMAIL, ADMIN_PASSWORD, loginAs, removeEngineObjects, request, spawnServerProcess, testEnv } from '../test/helpers/server.js';

const run = promisify(execFile);
const { values } = parseArgs({
  options: {
    plane: { type: 'string', default: 'both' },
    duration: { type: 'string', default: '10' },
    rounds: { type: 'string', default: '3' },
    // The load: 50 connections for small bodies, 10 for 1 MiB bodies.
    'small-connections': { type: 'string', default: '50' },
    'large-connections': { type: 'string', default: '10' },
  },
});
if (!['haproxy', 'node', 'both'].includes(values.plane)) throw new Error('--plane must be haproxy, node or both');
const planes = values.plane === 'both' ? (['haproxy', 'node'] as const) : ([values.plane] as const);

interface WrkResult {
  rps: number;
  p99ms: number;
  mibPerSec: number;
  errors: string;
}

function toMs(text: string): number {
  const match = /([\d.]+)(us|ms|s)/.exec(text);
  if (match === null) return Number.NaN;
  const value = Number(match[1]);
  return match[2] === 'us' ? value / 1000 : match[2] === 's' ? value * 1000 : value;
}

/** Runs wrk (2 threads) and parses requests/s, p99 and transfer rate. */
async function wrk(url: string, host: string, connections: string): Promise<WrkResult> {
  const { stdout } = await run('wrk', ['-t2', `-c${connections}`, `-d${values.duration}s`, '--latency', '-H', `Host: ${host}`, '--', url], {
    maxBuffer: 1024 * 1024,
  });
  const rps = Number(/Requests\/sec:\s+([\d.]+)/.exec(stdout)?.[1]);
  // The latency distribution's 99% line only: the Latency line's "+/- Stdev" column (e.g. 87.99%) also ends in 99%.
  const p99 = toMs(/^\s+99%\s+(\S+)/m.exec(stdout)?.[1] ?? '');
  const transfer = /Transfer\/sec:\s+([\d.]+)(\w+)/.exec(stdout);
  const factor: Record<string, number> = { B: 1 / 1024 / 1024, KB: 1 / 1024, MB: 1, GB: 1024 };
  const mibPerSec = transfer === null ? Number.NaN : Number(transfer[1]) * (factor[transfer[2] ?? 'MB'] ?? 1);
  const errors = /(Socket errors:.*|Non-2xx.*)/.exec(stdout)?.[1] ?? '';
  return { rps, p99ms: p99, mibPerSec, errors };
}

interface PlaneRun {
  readonly plane: string;
  readonly server: Awaited<ReturnType<typeof spawnServerProcess>>;
  readonly dataDir: string;
  readonly hostPort: number;
}

/** Starts a server on one plane and deploys the app built from `dir` on it. */
async function deployOn(plane: string, dir: string): Promise<PlaneRun> {
  const engine = createDockerEngine();
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), `slipway-bench-router-${plane}-`));
  const server = await spawnServerProcess(testEnv(dataDir, { SLIPWAY_DATA_PLANE: plane }));
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
  const container = (await engine.listContainers({ [LABEL_DEPLOYMENT]: id })).find((c) => c.running);
  if (container?.hostPort == null) throw new Error('no running container');
  return { plane, server, dataDir, hostPort: container.hostPort };
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? Number.NaN;
}

async function main(): Promise<void> {
  const engine = createDockerEngine();
  await ensureBusyboxImage(engine);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'slipway-bench-app-'));
  const runs: PlaneRun[] = [];
  try {
    await fsp.writeFile(path.join(dir, 'small'), 'hello world');
    await fsp.writeFile(path.join(dir, '1m'), Buffer.alloc(1024 * 1024, 97));
    await fsp.writeFile(
      path.join(dir, 'Dockerfile'),
      [`FROM ${BUSYBOX_IMAGE}`, 'COPY small 1m /www/', 'EXPOSE 8080', 'CMD ["/bin/sh", "-c", "exec httpd -f -p $PORT -h /www"]', ''].join('\n'),
    );
    for (const plane of planes) runs.push(await deployOn(plane, dir));
    const rounds = Number(values.rounds);
    console.log(
      `wrk -t2 -d${values.duration}s; small: ${values['small-connections']} connections, 1 MiB: ${values['large-connections']}; ` +
        `${rounds} rounds, planes interleaved within each round (each with its own identical busybox httpd container)\n`,
    );
    // ratios[plane][body] = per-round router/direct ratios of req/s, and the p99 added
    const ratios = new Map<string, { rps: number[]; p99: number[]; mib: number[] }>();
    const lines: string[] = [];
    for (let round = 1; round <= rounds; round++) {
      for (const [label, file, connections] of [['small', '/small', values['small-connections']], ['1 MiB', '/1m', values['large-connections']]] as const) {
        for (const r of runs) {
          const direct = await wrk(`http://127.0.0.1:${r.hostPort}${file}`, `127.0.0.1:${r.hostPort}`, connections);
          const routed = await wrk(`http://127.0.0.1:${r.server.port}${file}`, `bench.localhost:${r.server.port}`, connections);
          const key = `${r.plane} ${label}`;
          const entry = ratios.get(key) ?? { rps: [], p99: [], mib: [] };
          entry.rps.push(routed.rps / direct.rps);
          entry.p99.push(routed.p99ms - direct.p99ms);
          entry.mib.push(routed.mibPerSec);
          ratios.set(key, entry);
          for (const [name, w] of [['direct', direct], [r.plane, routed]] as const) {
            lines.push(
              `round ${round} ${label.padEnd(6)} ${name.padEnd(8)} ${w.rps.toFixed(0).padStart(9)} req/s  p99 ${w.p99ms.toFixed(2).padStart(8)} ms  ${w.mibPerSec.toFixed(1).padStart(8)} MiB/s ${w.errors}`,
            );
          }
        }
      }
    }
    console.log(lines.join('\n'));
    console.log('\nplane    body    router/direct req/s (median; all rounds)       p99 added (median)');
    for (const [key, entry] of ratios) {
      console.log(`${key.padEnd(15)} ×${median(entry.rps).toFixed(2)} (${entry.rps.map((v) => v.toFixed(2)).join(', ')})`.padEnd(55) + `  +${median(entry.p99).toFixed(2)} ms`);
    }
  } finally {
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
