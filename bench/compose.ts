// Benchmark (issue 38): a four-service compose stack deployed by Slipway (time to serving, failed requests during a redeploy) against Debian's docker-compose 1.29 `up -d --build` of the same stack. Run: node dist/bench/compose.js [--runs 3] [--poll-ms 20]
import { execFile } from 'node:child_process';
import crypto from 'node:crypto';
import fsp from 'node:fs/promises';
import http from 'node:http';
import path from 'node:path';
import { promisify } from 'node:util';
import { appRequest, tarGzOf, tempDir, testEngine, upload } from '../test/helpers/apps.js';
import { BUSYBOX_IMAGE, ensureBusyboxImage } from '../test/helpers/busybox-image.js';
import { startTestServer } from '../test/helpers/server.js';

const arg = (name: string, fallback: string): string => {
  const index = process.argv.indexOf(name);
  return index === -1 ? fallback : (process.argv[index + 1] ?? fallback);
};
const runs = Number(arg('--runs', '3'));
const pollMs = Number(arg('--poll-ms', '20'));
const run = promisify(execFile);

/**
 * The stack: web and worker built from the source (each with a step of its own that `nonce` makes
 * new, so a cold build caches nothing of it), an internal httpd `api`, redis from the stand-in
 * image with a health check the web waits for. `published` is docker-compose's host port for the
 * web (Slipway refuses published ports and serves the web at its subdomain).
 */
function composeFile(published: number | null): string {
  return `
x-slipway: {web: web, port: 8080}
services:
  web:
    build: ./web
    ${published === null ? 'expose: ["8080"]' : `ports: ["127.0.0.1:${published}:8080"]`}
    depends_on:
      cache: {condition: service_healthy}
      api: {condition: service_started}
  worker:
    build: ./worker
    depends_on: [cache]
  api:
    image: ${BUSYBOX_IMAGE}
    command: ["sh", "-c", "mkdir -p /s && echo api > /s/index.html && exec httpd -f -p 80 -h /s"]
  cache:
    image: slipway-stand-in/redis:7
    healthcheck: {test: ["CMD", "redis-cli", "ping"], interval: 1s, retries: 30}
`;
}

async function writeStack(dir: string, published: number | null, nonce: string, body: string): Promise<void> {
  await fsp.mkdir(path.join(dir, 'web'), { recursive: true });
  await fsp.mkdir(path.join(dir, 'worker'), { recursive: true });
  await fsp.writeFile(path.join(dir, 'compose.yaml'), composeFile(published));
  await fsp.writeFile(
    path.join(dir, 'web', 'Dockerfile'),
    [`FROM ${BUSYBOX_IMAGE}`, `RUN echo ${nonce} > /nonce`, 'COPY index.html /www/index.html', 'EXPOSE 8080', 'CMD ["httpd", "-f", "-p", "8080", "-h", "/www"]', ''].join('\n'),
  );
  await fsp.writeFile(path.join(dir, 'web', 'index.html'), body);
  await fsp.writeFile(
    path.join(dir, 'worker', 'Dockerfile'),
    [`FROM ${BUSYBOX_IMAGE}`, `RUN echo ${nonce} > /nonce`, 'CMD ["sh", "-c", "while true; do sleep 1; done"]', ''].join('\n'),
  );
}

/** A GET to the docker-compose stack's published web port. */
function direct(port: number): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.get({ host: '127.0.0.1', port, path: '/', agent: false, timeout: 2_000 }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', reject);
  });
}

type Get = () => Promise<{ status: number; body: string }>;

/** Seconds from `started` until `get` answers 200 with `body` (polled every pollMs). */
async function servedAfter(get: Get, body: string, started: number): Promise<number> {
  const deadline = Date.now() + 600_000;
  for (;;) {
    const res = await get().catch(() => undefined);
    if (res?.status === 200 && res.body === body) return (performance.now() - started) / 1000;
    if (Date.now() > deadline) throw new Error('never served');
    await new Promise((resolve) => setTimeout(resolve, pollMs));
  }
}

/** Runs `redeploy` while polling `get` every pollMs: requests, failed ones (not 200 or no answer), and the seconds until `body` is served. */
async function underPolling(get: Get, body: string, redeploy: () => Promise<void>): Promise<{ requests: number; failed: number; seconds: number }> {
  let requests = 0;
  let failed = 0;
  let servedAt: number | null = null;
  const started = performance.now();
  let done = false;
  const poller = (async () => {
    while (!done) {
      const res = await get().catch(() => undefined);
      requests += 1;
      if (res?.status !== 200) failed += 1;
      else if (res.body === body && servedAt === null) servedAt = performance.now();
      await new Promise((resolve) => setTimeout(resolve, pollMs));
    }
  })();
  await redeploy();
  // Polled until the new body is served, and a second more (a late gap counts too).
  const deadline = Date.now() + 600_000;
  while (servedAt === null && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, pollMs));
  await new Promise((resolve) => setTimeout(resolve, 1000));
  done = true;
  await poller;
  return { requests, failed, seconds: ((servedAt ?? performance.now()) - started) / 1000 };
}

const median = (values: number[]): number => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? (sorted[mid] ?? 0) : ((sorted[mid - 1] ?? 0) + (sorted[mid] ?? 0)) / 2;
};

const load = async (): Promise<string> => (await fsp.readFile('/proc/loadavg', 'utf8')).split(' ').slice(0, 3).join(' ');

try {
  await run('docker-compose', ['version', '--short']);
} catch {
  throw new Error("docker-compose is missing: apt-get install -y docker-compose (Debian's 1.29)");
}
await ensureBusyboxImage(testEngine());
const ts = await startTestServer({ SLIPWAY_STARTUP_TIMEOUT_SECONDS: '120' });
const rows: Array<{ system: string; cold: number; warm: number; requests: number; failed: number; redeploy: number }> = [];
try {
  const { token } = await ts.newUser('bench-compose');
  for (let i = 0; i < runs; i += 1) {
    console.log(`run ${i + 1}/${runs} (load ${await load()})`);
    // Alternating which goes first: the second finds the engine warmer (the stand-in image's pages).
    const order = i % 2 === 0 ? ['slipway', 'docker-compose'] : ['docker-compose', 'slipway'];
    for (const system of order) {
      const dir = tempDir(`bench-compose-${system}`);
      const nonce = crypto.randomUUID();
      try {
        if (system === 'slipway') {
          const subdomain = `bc${crypto.randomBytes(4).toString('hex')}`;
          const created = await ts.request('POST', '/api/v1/deployments', { token, body: { name: subdomain, subdomain, source_type: 'archive', compose_path: 'compose.yaml' } });
          if (created.status !== 201) throw new Error(created.text);
          const id = created.json.id as string;
          const get: Get = () => appRequest(ts.port, subdomain, { timeoutMs: 2_000 });
          const deploy = async (body: string): Promise<number> => {
            await writeStack(dir, null, nonce, body);
            if ((await upload(ts, token, id, await tarGzOf(dir))).status !== 200) throw new Error('upload failed');
            const started = performance.now();
            const res = await ts.request('POST', `/api/v1/deployments/${id}/deploy`, { token });
            if (res.status !== 202) throw new Error(res.text);
            return servedAfter(get, body, started);
          };
          try {
            const cold = await deploy('one\n');
            const warm = await deploy('two\n');
            const body = 'three\n';
            await writeStack(dir, null, nonce, body);
            if ((await upload(ts, token, id, await tarGzOf(dir))).status !== 200) throw new Error('upload failed');
            const redeploy = await underPolling(get, body, async () => {
              const res = await ts.request('POST', `/api/v1/deployments/${id}/deploy?wait=true`, { token });
              if (res.status !== 200) throw new Error(res.text);
            });
            rows.push({ system, cold, warm, requests: redeploy.requests, failed: redeploy.failed, redeploy: redeploy.seconds });
          } finally {
            await ts.request('DELETE', `/api/v1/deployments/${id}`, { token });
          }
        } else {
          const project = `slipwaybench${crypto.randomBytes(4).toString('hex')}`;
          const port = 20000 + crypto.randomInt(20000);
          const get: Get = () => direct(port);
          const compose = ['-p', project, '-f', path.join(dir, 'compose.yaml')];
          const up = async (body: string): Promise<number> => {
            await writeStack(dir, port, nonce, body);
            const started = performance.now();
            await run('docker-compose', [...compose, 'up', '-d', '--build'], { cwd: dir });
            return servedAfter(get, body, started);
          };
          try {
            const cold = await up('one\n');
            const warm = await up('two\n');
            const body = 'three\n';
            await writeStack(dir, port, nonce, body);
            const redeploy = await underPolling(get, body, async () => {
              await run('docker-compose', [...compose, 'up', '-d', '--build'], { cwd: dir });
            });
            rows.push({ system, cold, warm, requests: redeploy.requests, failed: redeploy.failed, redeploy: redeploy.seconds });
          } finally {
            await run('docker-compose', [...compose, 'down', '-v', '--rmi', 'local', '--timeout', '5'], { cwd: dir }).catch((err: unknown) => console.error(String(err)));
          }
        }
        const row = rows.at(-1);
        if (row !== undefined) console.log(`  ${system}: cold ${row.cold.toFixed(2)} s, warm ${row.warm.toFixed(2)} s, redeploy ${row.redeploy.toFixed(2)} s with ${row.failed}/${row.requests} failed requests`);
      } finally {
        await fsp.rm(dir, { recursive: true, force: true });
      }
    }
  }
} finally {
  await ts.close();
}

const of = (system: string): typeof rows => rows.filter((r) => r.system === system);
const s = of('slipway');
const d = of('docker-compose');
const m = (list: typeof rows, key: 'cold' | 'warm' | 'redeploy'): number => median(list.map((r) => r[key]));
console.log(`\nmedians over ${runs} runs (load ${await load()}):`);
console.log(`  deploy to serving, cold:  slipway ${m(s, 'cold').toFixed(2)} s, docker-compose up -d --build ${m(d, 'cold').toFixed(2)} s (×${(m(s, 'cold') / m(d, 'cold')).toFixed(2)})`);
console.log(`  deploy to serving, warm:  slipway ${m(s, 'warm').toFixed(2)} s, docker-compose ${m(d, 'warm').toFixed(2)} s (×${(m(s, 'warm') / m(d, 'warm')).toFixed(2)})`);
console.log(`  redeploy, failed requests polled every ${pollMs} ms: slipway ${s.map((r) => `${r.failed}/${r.requests}`).join(', ')}; docker-compose ${d.map((r) => `${r.failed}/${r.requests}`).join(', ')}`);
