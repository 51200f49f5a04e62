// Benchmark: the swarm runtime on the test cluster beside the docker runtime — deploy time, req/s through the edge at 1 and 3 replicas, failed requests and p99 during a redeploy and a drain, and how soon a lost node's replicas leave the edge and are replaced.
// Run (root, as the swarm suite): node dist/bench/swarm.js [--duration 10] [--connections 20]   (needs `wrk`: apt-get install -y wrk)
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { createDockerEngine } from '../src/runtime/docker/docker-engine.js';
import { appRequest, tarGzOf } from '../test/helpers/apps.js';
import { ensureBusyboxImage, writeBusyboxApp } from '../test/helpers/busybox-image.js';
import { ADMIN_EMAIL, ADMIN_PASSWORD, loginAs, removeEngineObjects, request, spawnServerProcess, testEnv } from '../test/helpers/server.js';
import { clusterScript } from '../test/helpers/swarm-cluster.js';
import { wrk, type WrkResult } from './wrk.js';

const { values } = parseArgs({
  options: {
    duration: { type: 'string', default: '10' },
    connections: { type: 'string', default: '20' },
  },
});

function line(name: string, r: WrkResult): string {
  return `${name.padEnd(34)} ${r.rps.toFixed(0).padStart(7)} req/s  p50 ${r.p50Ms.toFixed(1).padStart(7)} ms  p99 ${r.p99Ms.toFixed(1).padStart(8)} ms  ${r.requests} requests, ${r.errors} failed${r.errors > 0 ? ` (${r.errorText})` : ''}`;
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** A server (child process) with one deployment; deploy() uploads a fresh busybox app and waits, resolving with the seconds it took. */
async function benchServer(env: Record<string, string>, label: string) {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), `slipway-bench-swarm-${label}-`));
  const appDir = fs.mkdtempSync(path.join(os.tmpdir(), 'slipway-bench-swarm-app-'));
  const server = await spawnServerProcess(testEnv(dataDir, { SLIPWAY_LOG_LEVEL: 'warn', ...env }));
  const token = await loginAs(server.url, ADMIN_EMAIL, ADMIN_PASSWORD);
  const created = await request(server.url, 'POST', '/api/v1/deployments', { token, body: { name: 'bench', subdomain: 'bench', source_type: 'archive' } });
  if (created.status !== 201) throw new Error(created.text);
  const id = created.json.id as string;
  const port = new URL(server.url).port;
  return {
    token,
    url: server.url,
    id,
    async deploy(body: string): Promise<number> {
      await fsp.rm(appDir, { recursive: true, force: true });
      await fsp.mkdir(appDir);
      await writeBusyboxApp(appDir, { body });
      const form = new FormData();
      form.append('archive', new Blob([await tarGzOf(appDir)]), 'a.tar.gz');
      await request(server.url, 'POST', `/api/v1/deployments/${id}/upload`, { token, raw: form });
      const started = Date.now();
      const deployed = await request(server.url, 'POST', `/api/v1/deployments/${id}/deploy?wait=true`, { token });
      if (deployed.status !== 200) throw new Error(`deploy failed: ${deployed.text}`);
      return (Date.now() - started) / 1000;
    },
    measure(signal?: AbortSignal): Promise<WrkResult> {
      return wrk(`http://127.0.0.1:${port}/`, {
        connections: values.connections,
        seconds: signal === undefined ? values.duration : 300,
        headers: [`Host: bench.localhost:${port}`],
        timeoutSeconds: 10,
        ...(signal === undefined ? {} : { signal }),
      });
    },
    async close(): Promise<void> {
      await server.kill('SIGTERM');
      await removeEngineObjects(dataDir);
      await fsp.rm(dataDir, { recursive: true, force: true });
      await fsp.rm(appDir, { recursive: true, force: true });
    },
  };
}

/** Runs `during` while wrk loads the app, then 3 s more; the load's figures. */
async function underLoad(server: Awaited<ReturnType<typeof benchServer>>, during: () => Promise<void>): Promise<WrkResult> {
  const stop = new AbortController();
  const load = server.measure(stop.signal);
  await sleep(1000);
  try {
    await during();
    await sleep(3000);
  } finally {
    stop.abort();
  }
  return load;
}

interface ListedNode {
  id: string;
  address: string;
  state: string;
  availability: string;
  replicas: number;
}

/**
 * A worker holding replicas drops off the test bridge. Paced requests (one every 50 ms, 1 s to
 * answer) find when the edge stopped sending any there (the last failure before 40 in a row
 * succeed); the nodes list finds when swarm had all 3 replicas on the other nodes.
 */
async function loseNode(swarm: Awaited<ReturnType<typeof benchServer>>, admin: string, layout: Awaited<ReturnType<Awaited<ReturnType<typeof clusterScript>>['up']>>): Promise<string> {
  const nodes = async (): Promise<ListedNode[]> => (await request(swarm.url, 'GET', '/api/v1/nodes', { token: admin })).json as ListedNode[];
  for (const n of await nodes()) if (n.availability !== 'active') await request(swarm.url, 'POST', `/api/v1/nodes/${n.id}/activate`, { token: admin });
  // Spread the replicas again (the drained node came back empty): a restart places them anew.
  await request(swarm.url, 'POST', `/api/v1/deployments/${swarm.id}/restart`, { token: swarm.token });
  const lost = (await nodes()).find((n) => n.replicas > 0 && n.address !== layout.nodes[0]?.address);
  const node = layout.nodes.find((n) => n.address === lost?.address);
  if (lost === undefined || node === undefined) return 'lose a node: no worker held a replica';
  const port = Number(new URL(swarm.url).port);
  const started = Date.now();
  execFileSync('ip', ['-n', node.netns, 'link', 'set', 'eth0', 'down']);
  try {
    let lastFailure = 0;
    let failures = 0;
    let requests = 0;
    let inARow = 0;
    while (inARow < 40 && Date.now() - started < 120_000) {
      const res = await appRequest(port, 'bench', { timeoutMs: 1000 }).catch(() => ({ status: 0 }));
      requests += 1;
      if (res.status === 200) inARow += 1;
      else {
        inARow = 0;
        failures += 1;
        lastFailure = Date.now();
      }
      await sleep(50);
    }
    const leftEdge = ((lastFailure === 0 ? started : lastFailure) - started) / 1000;
    let replaced = Number.NaN;
    while (Date.now() - started < 120_000) {
      const now = await nodes();
      if (now.filter((n) => n.id !== lost.id).reduce((sum, n) => sum + n.replicas, 0) === 3) {
        replaced = (Date.now() - started) / 1000;
        break;
      }
      await sleep(250);
    }
    return `swarm, 3 replicas, lose a node: out of the edge after ${leftEdge.toFixed(1)} s (${failures} of ${requests} paced requests failed or took over 1 s); replaced on the other nodes after ${replaced.toFixed(1)} s`;
  } finally {
    execFileSync('ip', ['-n', node.netns, 'link', 'set', 'eth0', 'up']);
  }
}

async function main(): Promise<void> {
  const out: string[] = [`wrk -c${values.connections} -d${values.duration}s, Node data plane, busybox httpd app; load average ${os.loadavg().map((n) => n.toFixed(1)).join(' ')}`];

  // The docker runtime on the host's engine: the reference.
  await ensureBusyboxImage(createDockerEngine());
  const local = await benchServer({}, 'docker');
  try {
    out.push(`docker runtime: first deploy ${(await local.deploy('one\n')).toFixed(1)} s, redeploy ${(await local.deploy('two\n')).toFixed(1)} s`);
    out.push(line('docker, 1 replica', await local.measure()));
  } finally {
    await local.close();
  }

  const cluster = await clusterScript();
  const layout = await cluster.up(process.pid);
  try {
    const manager = layout.nodes[0];
    if (manager === undefined) throw new Error('no manager');
    await ensureBusyboxImage(createDockerEngine(`unix://${manager.socket}`));
    const swarm = await benchServer(
      { DOCKER_HOST: `unix://${manager.socket}`, SLIPWAY_RUNTIME: 'swarm', SLIPWAY_REGISTRY: layout.registry, SLIPWAY_BUILD_NETWORK: 'none' },
      'swarm',
    );
    try {
      out.push(`swarm runtime: first deploy ${(await swarm.deploy('one\n')).toFixed(1)} s, redeploy ${(await swarm.deploy('two\n')).toFixed(1)} s (1 replica)`);
      out.push(line('swarm, 1 replica', await swarm.measure()));
      await request(swarm.url, 'PATCH', `/api/v1/deployments/${swarm.id}`, { token: swarm.token, body: { replicas: 3 } });
      const restarted = await request(swarm.url, 'POST', `/api/v1/deployments/${swarm.id}/restart`, { token: swarm.token });
      if (restarted.status !== 200) throw new Error(restarted.text);
      out.push(line('swarm, 3 replicas', await swarm.measure()));
      let redeploySeconds = 0;
      const redeploy = await underLoad(swarm, async () => {
        redeploySeconds = await swarm.deploy('three\n');
      });
      out.push(`${line('swarm, 3 replicas, redeploy', redeploy)}; the deploy took ${redeploySeconds.toFixed(1)} s`);
      const admin = await loginAs(swarm.url, ADMIN_EMAIL, ADMIN_PASSWORD);
      let drainSeconds = 0;
      const drain = await underLoad(swarm, async () => {
        const nodes = (await request(swarm.url, 'GET', '/api/v1/nodes', { token: admin })).json as Array<{ id: string; address: string; replicas: number }>;
        // The node holding the most replicas (a worker when they tie).
        const worker = [...nodes].sort((a, b) => b.replicas - a.replicas || (a.address === layout.nodes[0]?.address ? 1 : -1))[0];
        if (worker === undefined) throw new Error('no worker');
        const started = Date.now();
        await request(swarm.url, 'POST', `/api/v1/nodes/${worker.id}/drain`, { token: admin });
        for (;;) {
          const now = (await request(swarm.url, 'GET', '/api/v1/nodes', { token: admin })).json as Array<{ id: string; replicas: number }>;
          if (now.find((n) => n.id === worker.id)?.replicas === 0 && now.reduce((sum, n) => sum + n.replicas, 0) === 3) break;
          if (Date.now() - started > 120_000) throw new Error('the drain did not finish');
          await sleep(250);
        }
        drainSeconds = (Date.now() - started) / 1000;
      });
      out.push(`${line('swarm, 3 replicas, drain a node', drain)}; replaced in ${drainSeconds.toFixed(1)} s`);
      out.push(await loseNode(swarm, admin, layout));
    } finally {
      await swarm.close();
    }
  } finally {
    await cluster.down(layout);
  }
  process.stdout.write(`${out.join('\n')}\n`);
}

await main();
