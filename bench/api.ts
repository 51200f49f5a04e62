// Benchmark (run by hand: `node dist/bench/api.js`): API throughput and latency over a real socket beside a bare Fastify route, and the server's peak memory during a 1 GiB upload.
import { spawn, type ChildProcess } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { createGzip } from 'node:zlib';
import { cpuMicros, processTree } from './proc.js';
import { newBoundary, streamUploadBody } from '../test/helpers/multipart.js';
import { ADMIN_EMAIL, ADMIN_PASSWORD, loginAs, request, spawnServerProcess } from '../test/helpers/server.js';
import { makeHeader } from '../test/helpers/tar-fixtures.js';

const { values: options } = parseArgs({
  options: {
    connections: { type: 'string', default: '16' },
    seconds: { type: 'string', default: '5' },
    rounds: { type: 'string', default: '3' },
    'no-upload': { type: 'boolean', default: false },
    'cpu-prof': { type: 'string' },
    deployments: { type: 'string', default: '50,500' },
  },
});
/** List sizes measured, in order (deployments are added between sizes; a list answers its first page of 100). */
const SIZES = (options.deployments ?? '50').split(',').map(Number);
if (SIZES.some((n, i) => !Number.isSafeInteger(n) || n < 1 || (i > 0 && n <= (SIZES[i - 1] ?? 0)))) throw new Error('--deployments: increasing counts, e.g. 50,500');
const CONCURRENCY = Number(options.connections);
const LOAD_SECONDS = Number(options.seconds);
const ROUNDS = Number(options.rounds);
const UPLOAD_CONTENT_BYTES = 1024 ** 3; // random, so the tar.gz is ~1 GiB too
const MIB = 1024 * 1024;

/** A field of /proc/<pid>/status in bytes (VmRSS, VmHWM). */
function procStatus(pid: number, field: 'VmRSS' | 'VmHWM'): number {
  const match = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
  return Number(match?.[1] ?? 0) * 1024;
}

/** Resets the peak RSS (VmHWM) of a process we own, so the next peak is the upload's. */
function resetPeak(pid: number): void {
  fs.writeFileSync(`/proc/${pid}/clear_refs`, '5');
}

/** One GET over a keep-alive agent; resolves with its latency in ms. */
function timedGet(agent: http.Agent, url: URL, key: string): Promise<number> {
  const started = process.hrtime.bigint();
  return new Promise((resolve, reject) => {
    const req = http.get(url, { agent, headers: { authorization: `Bearer ${key}` } }, (res) => {
      res.resume();
      res.on('end', () => {
        if (res.statusCode !== 200) reject(new Error(`GET ${url.pathname}: ${res.statusCode}`));
        else resolve(Number(process.hrtime.bigint() - started) / 1e6);
      });
      res.on('error', reject);
    });
    req.on('error', reject);
  });
}

/** N concurrent request loops for `seconds`; returns requests/s, latency percentiles, and the CPU per request of each of `watch`. */
async function loadTest(
  url: URL,
  key: string,
  concurrency: number,
  seconds: number,
  watch: ReadonlyArray<{ pid: number; name: string }> = [],
): Promise<{ rps: number; p50: number; p99: number; count: number; cpuPerRequest: number[] }> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency });
  const latencies: number[] = [];
  const cpuBefore = watch.map((p) => cpuMicros(p.pid));
  const deadline = Date.now() + seconds * 1000;
  const started = process.hrtime.bigint();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (Date.now() < deadline) latencies.push(await timedGet(agent, url, key));
    }),
  );
  const elapsed = Number(process.hrtime.bigint() - started) / 1e9;
  const cpuPerRequest = watch.map((p, i) => (cpuMicros(p.pid) - (cpuBefore[i] ?? 0)) / latencies.length);
  agent.destroy();
  latencies.sort((a, b) => a - b);
  const at = (q: number): number => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))] ?? NaN;
  return { rps: latencies.length / elapsed, p50: at(0.5), p99: at(0.99), count: latencies.length, cpuPerRequest };
}

/** The baseline: a bare Fastify route in its own process, answering `body` at the same path. */
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
    child.once('exit', (code) => reject(new Error(`the bare server exited (${code})`)));
  });
}

const median = (values: number[]): number => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? NaN;

/** A tar of one file of `size` random bytes, generated on the fly (never held in memory). */
async function* randomTar(size: number): AsyncGenerator<Buffer> {
  yield makeHeader({ path: 'Dockerfile', typeflag: '0', size: 13, mode: 0o644 });
  yield Buffer.concat([Buffer.from('FROM scratch\n'), Buffer.alloc(512 - 13)]);
  yield makeHeader({ path: 'noise.bin', typeflag: '0', size, mode: 0o644 });
  for (let sent = 0; sent < size; sent += MIB) yield crypto.randomBytes(Math.min(MIB, size - sent));
  if (size % 512 !== 0) yield Buffer.alloc(512 - (size % 512));
  yield Buffer.alloc(1024);
}

/** Streams a generated ~1 GiB tar.gz as a multipart upload (chunked); resolves with the answer and the bytes sent. */
function streamUpload(url: URL, key: string, size: number): Promise<{ status: number; body: string; archiveBytes: number }> {
  const boundary = newBoundary();
  let archiveBytes = 0;
  const gz = Readable.from(randomTar(size)).pipe(createGzip({ level: 1 }));
  async function* counted(): AsyncGenerator<Buffer> {
    for await (const chunk of gz) {
      archiveBytes += (chunk as Buffer).length;
      yield chunk as Buffer;
    }
  }
  return new Promise((resolve, reject) => {
    const req = http.request(url, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': `multipart/form-data; boundary=${boundary}` },
    });
    req.on('response', (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body, archiveBytes }));
    });
    req.on('error', reject);
    Readable.from(streamUploadBody(boundary, counted())).pipe(req);
  });
}

async function main(): Promise<void> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'slipway-bench-'));
  const server = await spawnServerProcess(
    {
    SLIPWAY_PORT: '0',
    SLIPWAY_HOST: '127.0.0.1',
    SLIPWAY_DATA_DIR: dataDir,
    SLIPWAY_ADMIN_EMAIL: ADMIN_EMAIL,
    SLIPWAY_ADMIN_PASSWORD: ADMIN_PASSWORD,
    SLIPWAY_MAX_UPLOAD_BYTES: String(2 * 1024 ** 3),
    SLIPWAY_MAX_EXPANDED_BYTES: String(3 * 1024 ** 3),
    },
    options['cpu-prof'] === undefined ? [] : ['--cpu-prof', '--cpu-prof-dir', options['cpu-prof']],
  );
  // `slipway server` is a supervisor that forks the server: memory and CPU are the forked server's.
  const supervisorPid = server.child.pid as number;
  const pid = processTree(supervisorPid).find((p) => p.pid !== supervisorPid && p.name === 'node')?.pid ?? supervisorPid;
  try {
    const token = await loginAs(server.url, ADMIN_EMAIL, ADMIN_PASSWORD);
    const key = (await request(server.url, 'POST', '/api/v1/api-keys', { token, body: { name: 'bench' } })).json.key as string;
    console.log(`load average ${os.loadavg().map((l) => l.toFixed(2)).join(' ')} at the start`);
    console.log(`server pid ${pid} (supervisor ${supervisorPid}), RSS after login ${(procStatus(pid, 'VmRSS') / MIB).toFixed(1)} MiB (peak so far ${(procStatus(pid, 'VmHWM') / MIB).toFixed(1)} MiB, scrypt logins included)`);
    const listUrl = new URL('/api/v1/deployments', server.url);
    const table: string[] = [];
    let created = 0;
    for (const size of SIZES) {
      for (; created < size; created += 1) {
        const res = await request(server.url, 'POST', '/api/v1/deployments', { token: key, body: { name: `bench ${created}`, subdomain: `bench-${created}`, source_type: 'archive' } });
        if (res.status !== 201) throw new Error(`create: ${res.status} ${res.text}`);
      }
      const sample = await request(server.url, 'GET', '/api/v1/deployments', { token: key });
      const items = (sample.json as unknown[]).length;
      const bare = await spawnBareServer(sample.text);
      try {
        const bareUrl = new URL('/api/v1/deployments', bare.url);
        // CPU per request of the processes that answer: the server (and HAProxy in front of it), or the bare route's.
        const serverSide = processTree(pid);
        const bareSide = processTree(bare.child.pid as number);
        const sides = [
          { name: 'API key', url: listUrl, bearer: key, watch: serverSide },
          { name: 'session token', url: listUrl, bearer: token, watch: serverSide },
          { name: 'bare Fastify', url: bareUrl, bearer: key, watch: bareSide },
        ];
        for (const side of sides) await loadTest(side.url, side.bearer, CONCURRENCY, 1); // warm-up
        const results = sides.map(() => [] as Awaited<ReturnType<typeof loadTest>>[]);
        // Rounds interleaved, so a noisy neighbour on the machine hits every side alike.
        for (let round = 1; round <= ROUNDS; round += 1) {
          const line: string[] = [];
          for (const [i, side] of sides.entries()) {
            const r = await loadTest(side.url, side.bearer, CONCURRENCY, LOAD_SECONDS, side.watch);
            results[i]?.push(r);
            const cpu = side.watch.map((p, j) => `${p.name} ${(r.cpuPerRequest[j] ?? NaN).toFixed(0)} µs`).join(' ');
            line.push(`${side.name} ${r.rps.toFixed(0)} req/s p50 ${r.p50.toFixed(2)} ms p99 ${r.p99.toFixed(2)} ms CPU/req ${cpu}`);
          }
          console.log(`${size} deployments, round ${round}: ${line.join(' | ')}`);
        }
        const bareRps = median((results[2] ?? []).map((r) => r.rps));
        for (const [i, side] of sides.entries()) {
          const rs = results[i] ?? [];
          const rps = median(rs.map((r) => r.rps));
          const cpu = side.watch.map((p, j) => `${p.name} ${median(rs.map((r) => r.cpuPerRequest[j] ?? NaN)).toFixed(0)}`).join(', ');
          table.push(
            `| ${size} | ${items} (${sample.text.length} B) | ${side.name} | ${rps.toFixed(0)} | ${median(rs.map((r) => r.p50)).toFixed(2)} | ${median(rs.map((r) => r.p99)).toFixed(2)} | ${(rps / bareRps).toFixed(2)} | ${cpu} |`,
          );
        }
      } finally {
        bare.child.kill();
      }
    }
    console.log(
      `\nload average ${os.loadavg().map((l) => l.toFixed(2)).join(' ')} at the end\n` +
      `GET /api/v1/deployments, ${CONCURRENCY} keep-alive connections, ${ROUNDS} interleaved rounds × ${LOAD_SECONDS} s, medians:\n` +
        '| deployments | answer (items, bytes) | caller | req/s | p50 ms | p99 ms | × bare | CPU µs/request (process) |\n|---:|---|---|---:|---:|---:|---:|---|\n' +
        table.join('\n'),
    );

    console.log(`server RSS after the load test ${(procStatus(pid, 'VmRSS') / MIB).toFixed(1)} MiB`);
    if (options['no-upload']) return;
    // Let the server's heap settle (idle GC) so the upload's peak is measured from a quiet baseline.
    await new Promise((resolve) => setTimeout(resolve, 5000));
    const dep = await request(server.url, 'POST', '/api/v1/deployments', { token: key, body: { name: 'big', subdomain: 'bench-big', source_type: 'archive' } });
    resetPeak(pid);
    const rssBefore = procStatus(pid, 'VmRSS');
    let sampledMax = rssBefore;
    const sampler = setInterval(() => (sampledMax = Math.max(sampledMax, procStatus(pid, 'VmRSS'))), 50);
    const started = Date.now();
    const upload = await streamUpload(new URL(`/api/v1/deployments/${dep.json.id}/upload`, server.url), key, UPLOAD_CONTENT_BYTES);
    clearInterval(sampler);
    const seconds = (Date.now() - started) / 1000;
    const peak = procStatus(pid, 'VmHWM');
    console.log(`upload: ${upload.status} ${upload.body} — archive ${(upload.archiveBytes / MIB).toFixed(0)} MiB in ${seconds.toFixed(1)} s (${(upload.archiveBytes / MIB / seconds).toFixed(0)} MiB/s, extraction included)`);
    console.log(
      `server RSS during the upload: before ${(rssBefore / MIB).toFixed(1)} MiB, peak (VmHWM) ${(peak / MIB).toFixed(1)} MiB, ` +
        `sampled max ${(sampledMax / MIB).toFixed(1)} MiB — goal < 200 MiB: ${peak < 200 * MIB ? 'met' : 'NOT met'}`,
    );
    if (upload.status !== 200 || JSON.parse(upload.body).size !== upload.archiveBytes) throw new Error('the upload did not answer 200 with the archive size');
  } finally {
    await server.kill();
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
