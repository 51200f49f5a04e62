// The Docker start-up (scripts/setup.mjs): a pid file left by a killed dockerd made the next
// dockerd refuse to start ("pid file found"), so CI found no engine. Stale pid files are removed;
// the pid file of a process that still runs is kept.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { pathToFileURL } from 'node:url';
import { PROJECT_ROOT } from '../helpers/server.js';

interface Setup {
  clearStalePidFiles(pidFiles: Array<[string, string]>): boolean;
}

let dir: string;
let setup: Setup;

before(async () => {
  setup = (await import(pathToFileURL(path.join(PROJECT_ROOT, 'scripts', 'setup.mjs')).href)) as Setup;
  dir = await fs.mkdtemp(path.join(os.tmpdir(), 'slipway-pid-'));
});
after(async () => {
  await fs.rm(dir, { recursive: true, force: true });
});

/** A pid that no process has: one of a child that has exited. */
function deadPid(): number {
  const child = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))'], { encoding: 'utf8' });
  return Number(child.stdout);
}

async function exists(file: string): Promise<boolean> {
  return fs.access(file).then(() => true, () => false);
}

test('removes a pid file whose process is gone and reports no daemon running', async () => {
  const file = path.join(dir, 'docker.pid');
  await fs.writeFile(file, String(deadPid()));
  assert.equal(setup.clearStalePidFiles([[file, 'dockerd']]), false);
  assert.equal(await exists(file), false);
});

test('removes a pid file naming a live process of another program (a reused pid)', async () => {
  const file = path.join(dir, 'reused.pid');
  await fs.writeFile(file, String(process.pid));
  assert.equal(setup.clearStalePidFiles([[file, 'dockerd']]), false);
  assert.equal(await exists(file), false);
});

test('keeps the pid file of a running daemon and reports it running', async () => {
  const file = path.join(dir, 'live.pid');
  await fs.writeFile(file, String(process.pid));
  const name = (await fs.readFile(`/proc/${process.pid}/comm`, 'utf8')).trim();
  // The name given for the first file is the one that answers "running" (dockerd's place).
  assert.equal(setup.clearStalePidFiles([[file, name]]), true);
  assert.equal(await exists(file), true);
});

test('ignores garbage and missing pid files without throwing', async () => {
  const garbage = path.join(dir, 'garbage.pid');
  await fs.writeFile(garbage, 'not a pid\n');
  assert.equal(setup.clearStalePidFiles([[garbage, 'dockerd'], [path.join(dir, 'absent.pid'), 'dockerd']]), false);
  assert.equal(await exists(garbage), false);
});
