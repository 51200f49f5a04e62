// Benchmark: a deployed container app through Slipway's router vs the same container directly, with wrk.
// Run: node dist/bench/router.js [--duration 10] [--connections 32]   (needs `wrk`: apt-get install -y wrk)
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
const { values } = parseArgs({ options: { duration: { type: 'string', default: '10' }, connections: { type: 'string', default: '32' } } });

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
async function wrk(url: string, host: string): Promise<WrkResult> {
  const { stdout } = await run('wrk', ['-t2', `-c${values.connections}`, `-d${values.duration}s`, '--latency', '-H', `Host: ${host}`, '--', url], {
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

async function main(): Promise<void> {
  const engine = createDockerEngine();
  await ensureBusyboxImage(engine);
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'slipway-bench-router-'));
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'slipway-bench-app-'));
  let server: Awaited<ReturnType<typeof spawnServerProcess>> | undefined;
  try {
    server = await spawnServerProcess(testEnv(dataDir));
    const token = await loginAs(server.url, ADMIN_EMAIL, ADMIN_PASSWORD);
    await fsp.writeFile(path.join(dir, 'small'), 'hello world');
    await fsp.writeFile(path.join(dir, '1m'), Buffer.alloc(1024 * 1024, 97));
    await fsp.writeFile(
      path.join(dir, 'Dockerfile'),
      [`FROM ${BUSYBOX_IMAGE}`, 'COPY small 1m /www/', 'EXPOSE 8080', 'CMD ["/bin/sh", "-c", "exec httpd -f -p $PORT -h /www"]', ''].join('\n'),
    );
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

    console.log(`wrk -t2 -c${values.connections} -d${values.duration}s; app = busybox httpd in a container (127.0.0.1:${container.hostPort})\n`);
    const rows: string[] = [];
    for (const [label, file] of [['small', '/small'], ['1 MiB', '/1m']] as const) {
      const direct = await wrk(`http://127.0.0.1:${container.hostPort}${file}`, `127.0.0.1:${container.hostPort}`);
      const routed = await wrk(`http://127.0.0.1:${server.port}${file}`, `bench.localhost:${server.port}`);
      for (const [name, r] of [['direct', direct], ['router', routed]] as const) {
        rows.push(`${label.padEnd(6)} ${name.padEnd(7)} ${r.rps.toFixed(0).padStart(9)} req/s  p99 ${r.p99ms.toFixed(2).padStart(8)} ms  ${r.mibPerSec.toFixed(1).padStart(8)} MiB/s ${r.errors}`);
      }
      rows.push(
        `${label.padEnd(6)} ratio   router/direct: req/s ×${(routed.rps / direct.rps).toFixed(2)}, p99 ×${(routed.p99ms / direct.p99ms).toFixed(2)}`,
      );
    }
    console.log(rows.join('\n'));
    await request(server.url, 'DELETE', `/api/v1/deployments/${id}`, { token });
  } finally {
    await server?.kill('SIGTERM');
    // Leave nothing behind: the app's containers and images if the run stopped early, and both folders.
    await removeEngineObjects(dataDir);
    fs.rmSync(dataDir, { recursive: true, force: true });
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

await main();
