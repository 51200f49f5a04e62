// Benchmark: seconds from the deploy call to the first 200 through the router, against the floor of
// `docker build` + `docker run` + first 200 done by hand, in the same run. Run: node dist/bench/deploy.js [--runs 5]
// With --config: the same deploy with 50 variables (10 of them secrets, 5 declared ARGs) and one
// volume against the deploy without them, interleaved in the same run.
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { createDockerEngine } from '../src/runtime/docker/docker-engine.js';
import { ensureBusyboxImage, writeBusyboxApp } from '../test/helpers/busybox-image.js';
import { createArchiveApp, tarGzOf, upload } from '../test/helpers/apps.js';
import { startTestServer } from '../test/helpers/server.js';

const run = promisify(execFile);
const runs = Number(process.argv[process.argv.indexOf('--runs') + 1] || 5) || 5;

function get(port: number, host: string): Promise<number> {
  return new Promise((resolve) => {
    const req = http.get({ host: '127.0.0.1', port, path: '/', headers: { host }, agent: false, timeout: 1000 }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on('timeout', () => req.destroy());
    req.on('error', () => resolve(0));
  });
}

async function firstOk(port: number, host: string, expectBody: string | undefined, deadlineMs = 60_000): Promise<void> {
  const deadline = Date.now() + deadlineMs;
  while (Date.now() < deadline) {
    if ((await get(port, host)) === 200) {
      if (expectBody === undefined) return;
      const body = await new Promise<string>((resolve) => {
        http.get({ host: '127.0.0.1', port, path: '/', headers: { host }, agent: false }, (res) => {
          let text = '';
          res.on('data', (c: Buffer) => (text += c.toString()));
          res.on('end', () => resolve(text));
        }).on('error', () => resolve(''));
      });
      if (body === expectBody) return;
    }
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  throw new Error('no 200 within the deadline');
}

const median = (values: number[]): number => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? (sorted[mid] as number) : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
};

/** Deploy-to-first-200 of one app, configured (50 variables, one volume) or not; the deployment is deleted after. */
async function timedDeploy(ts: Awaited<ReturnType<typeof startTestServer>>, token: string, label: string, configured: boolean): Promise<number> {
  const dir = await fsp.mkdtemp(path.join(os.tmpdir(), 'slipway-bench-'));
  const body = await writeBusyboxApp(dir, { body: `${label} ${Date.now()}\n` });
  // Both variants build the same Dockerfile (five ARGs declared); only the configured one fills them.
  const dockerfile = path.join(dir, 'Dockerfile');
  const lines = (await fsp.readFile(dockerfile, 'utf8')).split('\n');
  lines.splice(1, 0, 'ARG VAR_0 VAR_1 VAR_2 VAR_3 VAR_4');
  await fsp.writeFile(dockerfile, lines.join('\n'));
  const archive = await tarGzOf(dir);
  fs.rmSync(dir, { recursive: true, force: true });
  const extra = configured ? { volumes: [{ name: 'data', mount_path: '/data' }] } : {};
  const { id, subdomain } = await createArchiveApp(ts, token, archive, extra);
  if (configured) {
    const plain: Record<string, string> = {};
    const secret: Record<string, string> = {};
    for (let v = 0; v < 50; v += 1) (v >= 40 ? secret : plain)[`VAR_${v}`] = `value-${v}-${'x'.repeat(40)}`;
    for (const [vars, isSecret] of [[plain, false], [secret, true]] as const) {
      const res = await ts.request('PATCH', `/api/v1/deployments/${id}/env`, { token, body: { vars, secret: isSecret } });
      if (res.status !== 200) throw new Error(`env failed: ${res.text}`);
    }
  }
  const started = performance.now();
  const trigger = await ts.request('POST', `/api/v1/deployments/${id}/deploy`, { token });
  if (trigger.status !== 202) throw new Error(`deploy failed: ${trigger.text}`);
  await firstOk(ts.port, `${subdomain}.localhost`, body);
  const seconds = (performance.now() - started) / 1000;
  await ts.request('DELETE', `/api/v1/deployments/${id}`, { token });
  return seconds;
}

/** --config: deploys with and without 50 variables and a volume, alternating which goes first. */
async function configMain(): Promise<void> {
  await ensureBusyboxImage(createDockerEngine());
  const ts = await startTestServer();
  const { token } = await ts.newUser('bench');
  const plain: number[] = [];
  const configured: number[] = [];
  try {
    await timedDeploy(ts, token, 'warm-up', true);
    for (let i = 0; i < runs; i += 1) {
      const order = i % 2 === 0 ? [false, true] : [true, false];
      for (const withConfig of order) (withConfig ? configured : plain).push(await timedDeploy(ts, token, `run ${i}`, withConfig));
      process.stdout.write(`run ${i + 1}/${runs}: plain ${plain.at(-1)?.toFixed(3)} s, 50 vars + volume ${configured.at(-1)?.toFixed(3)} s\n`);
    }
  } finally {
    await ts.close();
  }
  // Each run's two deploys ran back to back: their ratio is less exposed to the machine's load drifting.
  const paired = configured.map((c, i) => c / (plain[i] as number));
  process.stdout.write(
    `\nmedian plain ${median(plain).toFixed(3)} s, median with 50 vars + 1 volume ${median(configured).toFixed(3)} s, ` +
      `ratio of medians ${(median(configured) / median(plain)).toFixed(3)}, median of paired ratios ${median(paired).toFixed(3)} (goal <= 1.05)\n`,
  );
}

async function main(): Promise<void> {
  const engine = createDockerEngine();
  await ensureBusyboxImage(engine);
  const ts = await startTestServer();
  const { token } = await ts.newUser('bench');
  const floor: number[] = [];
  const slipway: number[] = [];
  try {
    for (let i = 0; i < runs; i += 1) {
      // Floor: the same app built and run by hand with the docker CLI.
      const dir = await fsp.mkdtemp(path.join(os.tmpdir(), 'slipway-bench-'));
      const body = await writeBusyboxApp(dir, { body: `floor ${i} ${Date.now()}\n` });
      const tag = `slipway-bench/floor:${process.pid}-${i}`;
      let started = performance.now();
      await run('docker', ['build', '-q', '-t', tag, '--', dir], { env: { ...process.env, DOCKER_BUILDKIT: '0' } });
      const { stdout } = await run('docker', ['run', '-d', '--rm', '-e', 'PORT=8080', '-p', '127.0.0.1::8080', '--', tag]);
      const containerId = stdout.trim();
      const { stdout: portOut } = await run('docker', ['port', containerId, '8080/tcp']);
      const hostPort = Number(portOut.trim().split('\n')[0]?.split(':').pop());
      await firstOk(hostPort, '127.0.0.1', body);
      floor.push((performance.now() - started) / 1000);
      await run('docker', ['rm', '-f', containerId]);
      await run('docker', ['rmi', '-f', tag]);

      // Slipway: from the deploy call to the first 200 through the router (upload done beforehand).
      const appBody = await writeBusyboxApp(dir, { body: `slipway ${i} ${Date.now()}\n` });
      const archive = await tarGzOf(dir);
      fs.rmSync(dir, { recursive: true, force: true });
      const { id, subdomain } = await createArchiveApp(ts, token, archive);
      if ((await upload(ts, token, id, archive)).status !== 200) throw new Error('upload failed');
      started = performance.now();
      const trigger = await ts.request('POST', `/api/v1/deployments/${id}/deploy`, { token });
      if (trigger.status !== 202) throw new Error(`deploy failed: ${trigger.text}`);
      await firstOk(ts.port, `${subdomain}.localhost`, appBody);
      slipway.push((performance.now() - started) / 1000);
      await ts.request('DELETE', `/api/v1/deployments/${id}`, { token });
      process.stdout.write(`run ${i + 1}/${runs}: floor ${floor.at(-1)?.toFixed(3)} s, slipway ${slipway.at(-1)?.toFixed(3)} s\n`);
    }
  } finally {
    await ts.close();
  }
  const ratios = slipway.map((s, i) => s / (floor[i] as number));
  process.stdout.write(
    `\nmedian floor ${median(floor).toFixed(3)} s, median slipway ${median(slipway).toFixed(3)} s, ` +
      `median ratio ${median(ratios).toFixed(3)} (goal < 1.15)\n`,
  );
}

await (process.argv.includes('--config') ? configMain() : main());
