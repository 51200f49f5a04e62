// Benchmark: one app through the edge at 1 and at 3 replicas (each replica CPU-limited, so the app is the bottleneck), then a redeploy of 3 replicas under load.
// Run: node dist/bench/replicas.js [--plane haproxy|node] [--cpus 0.25] [--duration 10] [--connections 30]
//   (needs `wrk`: apt-get install -y wrk)
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { createDockerEngine } from '../src/runtime/docker/docker-engine.js';
import { tarGzOf } from '../test/helpers/apps.js';
import { ensureNodeImage, NODE_IMAGE } from '../test/helpers/node-image.js';
import { ADMIN_EMAIL, ADMIN_PASSWORD, loginAs, removeEngineObjects, request, spawnServerProcess, testEnv } from '../test/helpers/server.js';
import { wrk, type WrkResult } from './wrk.js';

const { values } = parseArgs({
  options: {
    plane: { type: 'string', default: 'haproxy' },
    cpus: { type: 'string', default: '0.25' },
    duration: { type: 'string', default: '10' },
    connections: { type: 'string', default: '30' },
  },
});

/** A keep-alive Node app that burns ~2 ms of CPU per request (so its CPU limit bounds its rate). */
async function writeApp(dir: string, label: string): Promise<void> {
  const server = [
    "const http = require('node:http');",
    'http.createServer((req, res) => {',
    '  let x = 0; const until = Date.now() + 2; while (Date.now() < until) x++;',
    `  res.end(${JSON.stringify(label)} + x % 2 + '\\n');`,
    '}).listen(Number(process.env.PORT));',
    "process.on('SIGTERM', () => process.exit(0));",
    '',
  ];
  await fsp.writeFile(path.join(dir, 'server.cjs'), server.join('\n'));
  await fsp.writeFile(path.join(dir, 'Dockerfile'), [`FROM ${NODE_IMAGE}`, 'WORKDIR /app', 'COPY . /app', 'EXPOSE 3000', 'CMD ["/usr/bin/node", "/app/server.cjs"]', ''].join('\n'));
}

function line(name: string, r: WrkResult): string {
  return `${name.padEnd(28)} ${r.rps.toFixed(0).padStart(7)} req/s  p50 ${r.p50Ms.toFixed(1).padStart(7)} ms  p99 ${r.p99Ms.toFixed(1).padStart(7)} ms  ${r.requests} requests, ${r.errors} failed${r.errors > 0 ? ` (${r.errorText})` : ''}`;
}

async function main(): Promise<void> {
  await ensureNodeImage(createDockerEngine());
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'slipway-bench-replicas-'));
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'slipway-bench-replicas-app-'));
  const server = await spawnServerProcess(testEnv(dataDir, { SLIPWAY_DATA_PLANE: values.plane }));
  try {
    const token = await loginAs(server.url, ADMIN_EMAIL, ADMIN_PASSWORD);
    const created = await request(server.url, 'POST', '/api/v1/deployments', {
      token,
      body: { name: 'bench', subdomain: 'bench', source_type: 'archive', cpus: Number(values.cpus), replicas: 1 },
    });
    if (created.status !== 201) throw new Error(created.text);
    const id = created.json.id as string;
    const deploy = async (label: string): Promise<void> => {
      await writeApp(dir, label);
      const form = new FormData();
      form.append('archive', new Blob([await tarGzOf(dir)]), 'a.tar.gz');
      await request(server.url, 'POST', `/api/v1/deployments/${id}/upload`, { token, raw: form });
      const deployed = await request(server.url, 'POST', `/api/v1/deployments/${id}/deploy?wait=true`, { token });
      if (deployed.status !== 200) throw new Error(`deploy failed: ${deployed.text}`);
    };
    const port = new URL(server.url).port;
    const measure = (signal?: AbortSignal): Promise<WrkResult> =>
      wrk(`http://127.0.0.1:${port}/`, {
        connections: values.connections,
        // Under a signal wrk runs until it is stopped (the bound is a guard).
        seconds: signal === undefined ? values.duration : 300,
        headers: [`Host: bench.localhost:${port}`],
        timeoutSeconds: 10,
        ...(signal === undefined ? {} : { signal }),
      });
    const out: string[] = [`plane ${values.plane}, each replica --cpus ${values.cpus}, wrk -c${values.connections} -d${values.duration}s; load average ${os.loadavg().map((n) => n.toFixed(1)).join(' ')}`];

    await deploy('one');
    out.push(line('1 replica', await measure()));
    await request(server.url, 'PATCH', `/api/v1/deployments/${id}`, { token, body: { replicas: 3 } });
    const restarted = await request(server.url, 'POST', `/api/v1/deployments/${id}/restart`, { token });
    if (restarted.status !== 200) throw new Error(restarted.text);
    out.push(line('3 replicas', await measure()));
    // A redeploy while wrk runs: every failed request counts.
    const stopLoad = new AbortController();
    const during = measure(stopLoad.signal);
    await new Promise((resolve) => setTimeout(resolve, 1000));
    const started = Date.now();
    await deploy('two');
    const deploySeconds = (Date.now() - started) / 1000;
    // Past the switch and the old replicas' drain.
    await new Promise((resolve) => setTimeout(resolve, 3000));
    stopLoad.abort();
    out.push(`${line('3 replicas, redeploy under load', await during)}; the deploy took ${deploySeconds.toFixed(1)} s`);
    process.stdout.write(`${out.join('\n')}\n`);
  } finally {
    await server.kill('SIGTERM');
    await removeEngineObjects(dataDir);
    await fsp.rm(dataDir, { recursive: true, force: true });
    await fsp.rm(dir, { recursive: true, force: true });
  }
}

await main();
