// Benchmark (run by hand: `node dist/bench/job-lag.js [--runs 60]`): seconds from a job's due time to its container running, against a plain timer's `docker run` of the same image at the same instant (the floor).
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { createDockerClient } from '../src/runtime/docker/docker-engine.js';
import { LABEL_DEPLOYMENT } from '../src/runtime/engine.js';
import { LABEL_JOB_RUN } from '../src/runtime/docker/one-off-run.js';
import { busyboxArchive, createArchiveApp, deployAndWait } from '../test/helpers/apps.js';
import { ADMIN_EMAIL, ADMIN_PASSWORD, loginAs, removeEngineObjects, request, spawnServerProcess, testEnv } from '../test/helpers/server.js';

const { values: options } = parseArgs({ options: { runs: { type: 'string', default: '60' } } });
const RUNS = Number(options.runs);
const EVERY_MS = 2000;
const FLOOR_LABEL = 'dev.slipway.bench-floor';

const quantile = (values: number[], q: number): number => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)] ?? NaN;
};
const seconds = (ms: number): string => (ms / 1000).toFixed(3);

async function main(): Promise<void> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'slipway-bench-jobs-'));
  const server = await spawnServerProcess(testEnv(dataDir));
  const docker = createDockerClient();
  const events = await docker.getEvents({ since: Math.floor(Date.now() / 1000), filters: { type: ['container'], event: ['start'] } });
  const started = new Map<string, number>();
  let buffered = '';
  events.on('error', (err: Error) => console.error(`engine events: ${err.message}`));
  events.on('end', () => console.error('engine events: the stream ended'));
  events.on('data', (chunk: Buffer) => {
    buffered += chunk.toString();
    const lines = buffered.split('\n');
    buffered = lines.pop() ?? '';
    for (const line of lines) {
      if (line.trim() === '') continue;
      const event = JSON.parse(line) as { timeNano: number; Actor?: { Attributes?: Record<string, string> } };
      const labels = event.Actor?.Attributes ?? {};
      const key = labels[LABEL_JOB_RUN] !== undefined ? `job:${labels[LABEL_JOB_RUN]}` : labels[FLOOR_LABEL] !== undefined ? `floor:${labels[FLOOR_LABEL]}` : undefined;
      if (key !== undefined) started.set(key, event.timeNano / 1e6);
    }
  });
  try {
    const api = { request: (method: string, urlPath: string, o?: Parameters<typeof request>[3]) => request(server.url, method, urlPath, o) };
    const token = await loginAs(server.url, ADMIN_EMAIL, ADMIN_PASSWORD);
    const { archive } = await busyboxArchive();
    const app = await createArchiveApp(api, token, archive);
    const deployed = await deployAndWait(api, token, app.id);
    if (deployed.status !== 200) throw new Error(`deploy failed: ${deployed.text}`);
    const [live] = await docker.listContainers({ filters: { label: [`${LABEL_DEPLOYMENT}=${app.id}`] } });
    if (live === undefined) throw new Error('the app has no container');
    const image = live.Image;

    const created = await api.request('POST', `/api/v1/deployments/${app.id}/jobs`, { token, body: { name: 'lag', schedule: '*/2 * * * * *', command: ['true'], concurrency: 'allow' } });
    if (created.status !== 201) throw new Error(created.text);
    const jobPath = `/api/v1/deployments/${app.id}/jobs/${created.json.id}`;
    // The floor: a plain timer at each of the same due times, the next RUNS from a few seconds on.
    const first = Math.ceil((Date.now() + 4000) / EVERY_MS) * EVERY_MS;
    const floors: Array<Promise<void>> = [];
    for (let i = 0; i < RUNS; i++) {
      const due = first + i * EVERY_MS;
      floors.push(
        new Promise((resolve) => {
          setTimeout(() => execFile('docker', ['run', '--rm', '--label', `${FLOOR_LABEL}=${due}`, '--', image, 'true'], () => resolve()), due - Date.now());
        }),
      );
    }
    await Promise.all(floors);
    await new Promise((resolve) => setTimeout(resolve, 3000));
    await api.request('PATCH', jobPath, { token, body: { schedule: '@monthly' } });
    const runs = (await api.request('GET', `${jobPath}/runs`, { token })).json as Array<{ id: string; due_at: string; status: string }>;

    const jobLags: number[] = [];
    const floorLags: number[] = [];
    for (const run of runs) {
      const due = Date.parse(run.due_at);
      if (due < first || due >= first + RUNS * EVERY_MS) continue;
      const at = started.get(`job:${run.id}`);
      if (at !== undefined) jobLags.push(at - due);
    }
    for (let i = 0; i < RUNS; i++) {
      const due = first + i * EVERY_MS;
      const at = started.get(`floor:${due}`);
      if (at !== undefined) floorLags.push(at - due);
    }
    const statuses: Record<string, number> = {};
    for (const run of runs) statuses[run.status] = (statuses[run.status] ?? 0) + 1;
    const report = {
      runs: RUNS,
      job_runs_recorded: statuses,
      start_events_seen: started.size,
      job: { measured: jobLags.length, median_s: seconds(quantile(jobLags, 0.5)), p99_s: seconds(quantile(jobLags, 0.99)) },
      floor: { measured: floorLags.length, median_s: seconds(quantile(floorLags, 0.5)), p99_s: seconds(quantile(floorLags, 0.99)) },
      median_ratio: (quantile(jobLags, 0.5) / quantile(floorLags, 0.5)).toFixed(2),
      load_average: os.loadavg().map((l) => l.toFixed(1)).join(' '),
    };
    console.log(JSON.stringify(report, null, 2));
    console.log(`goal: median ratio ≤ 1.2 (${report.median_ratio}), p99 < 2 s (${report.job.p99_s} s)`);
  } finally {
    (events as unknown as { destroy(): void }).destroy();
    await server.kill('SIGTERM');
    // A loaded engine may time out a removal: tried again before giving up.
    for (let attempt = 1; attempt <= 3; attempt++) {
      try {
        await removeEngineObjects(dataDir);
        break;
      } catch (err) {
        if (attempt === 3) console.error(`could not remove the bench's engine objects: ${String(err)}`);
      }
    }
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}

await main();
