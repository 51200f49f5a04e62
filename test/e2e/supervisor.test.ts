// The supervisor, for real: a killed or crashing server process is started again and says why; a clean stop stops all.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { after, describe, test } from 'node:test';
import { EXIT_CANNOT_START, supervise } from '../../src/cli/supervisor.js';
import { eventually } from '../helpers/apps.js';
import { freePort } from '../helpers/net.js';
import { PROJECT_ROOT, request, spawnServerProcess, testEnv, type ServerProcess } from '../helpers/server.js';

/** True while a process with this pid exists. */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** The pids of the server processes the supervisor reported starting, in order. */
function workerPids(output: string): number[] {
  return [...output.matchAll(/server process (\d+) started/g)].map((m) => Number(m[1]));
}

describe('supervised server', () => {
  const dirs: string[] = [];
  const servers: ServerProcess[] = [];
  after(async () => {
    for (const server of servers) await server.kill('SIGKILL');
    for (const dir of dirs) fs.rmSync(dir, { recursive: true, force: true });
  });

  async function start(): Promise<ServerProcess> {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'slipway-supervised-'));
    dirs.push(dir);
    const server = await spawnServerProcess(testEnv(dir, { SLIPWAY_PORT: String(await freePort()) }));
    servers.push(server);
    return server;
  }

  test('kill -9 of the server process: it is started again, answers on the same port, and the death is logged', async () => {
    const server = await start();
    const [first] = workerPids(server.output());
    assert.ok(first !== undefined && alive(first));
    assert.equal((await request(server.url, 'GET', '/api/v1/deployments')).status, 401);

    process.kill(first, 'SIGKILL');
    await eventually(async () => (/listening on[\s\S]*listening on/.test(server.output()) ? true : undefined), 60_000, 'a second start');
    assert.match(server.output(), new RegExp(`server process ${first} was killed by SIGKILL; restarting`));
    assert.equal((await request(server.url, 'GET', '/api/v1/deployments')).status, 401);
    const second = workerPids(server.output())[1];
    assert.ok(second !== undefined && second !== first && alive(second));

    // A clean stop stops both processes; nothing is restarted.
    await server.kill('SIGTERM');
    assert.equal(server.child.exitCode, 0);
    await eventually(async () => (alive(second) ? undefined : true), 20_000, 'the server process to exit');
    assert.equal(workerPids(server.output()).length, 2);
    assert.match(server.output(), /SIGTERM: shutting down/);
  });

  test('kill -9 of the supervisor: its server process does not run on unsupervised', async () => {
    const server = await start();
    const [worker] = workerPids(server.output());
    assert.ok(worker !== undefined && alive(worker));
    await server.kill('SIGKILL');
    await eventually(async () => (alive(worker) ? undefined : true), 20_000, 'the orphaned server process to exit');
  });
});

describe('supervisor', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'slipway-supervisor-'));
  after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const guards = pathToFileURL(path.join(PROJECT_ROOT, 'dist', 'src', 'cli', 'supervisor.js')).href;

  /** A worker that throws an uncaught error on its first run, then runs until SIGTERM (exit 0). */
  function crashingWorker(): { entry: string; marker: string } {
    const marker = path.join(dir, `ran-${Math.random().toString(36).slice(2)}`);
    const entry = path.join(dir, `worker-${Math.random().toString(36).slice(2)}.mjs`);
    fs.writeFileSync(
      entry,
      `import fs from 'node:fs';
import { installWorkerGuards } from ${JSON.stringify(guards)};
installWorkerGuards();
const marker = ${JSON.stringify(marker)};
const runs = fs.existsSync(marker) ? Number(fs.readFileSync(marker, 'utf8')) : 0;
fs.writeFileSync(marker, String(runs + 1));
if (runs === 0) setTimeout(() => { throw new Error('boom from the worker'); }, 10);
else {
  const keep = setInterval(() => {}, 1000);
  process.once('SIGTERM', () => { clearInterval(keep); process.exit(0); });
}
`,
    );
    return { entry, marker };
  }

  test('a worker that dies on an uncaught error is restarted, and the log says how and why', async () => {
    const { entry, marker } = crashingWorker();
    const lines: string[] = [];
    const stop = new AbortController();
    const done = supervise({ entry, log: (line) => lines.push(line), minBackoffMs: 50, signal: stop.signal });
    await eventually(async () => (fs.existsSync(marker) && fs.readFileSync(marker, 'utf8') === '2' ? true : undefined), 20_000, 'a second run');
    await eventually(async () => (lines.filter((l) => / started$/.test(l)).length === 2 ? true : undefined), 5_000, 'two starts logged');
    stop.abort();
    assert.equal(await done, 0);
    const died = lines.find((l) => /exited with code 1/.test(l));
    assert.ok(died !== undefined, lines.join('\n'));
    assert.match(died, /after an uncaught error: Error: boom from the worker; restarting in 50 ms/);
  });

  test('a worker that cannot start (exit 2) is not restarted', async () => {
    const entry = path.join(dir, 'cannot-start.mjs');
    fs.writeFileSync(entry, `process.exit(${EXIT_CANNOT_START});\n`);
    const lines: string[] = [];
    assert.equal(await supervise({ entry, log: (line) => lines.push(line), minBackoffMs: 50 }), EXIT_CANNOT_START);
    assert.equal(lines.filter((l) => / started$/.test(l)).length, 1);
    assert.match(lines.join('\n'), /exited with code 2; not restarting/);
  });
});
