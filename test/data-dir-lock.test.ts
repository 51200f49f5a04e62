// One server per data directory: a second `slipway server` on it exits naming the holder; a killed holder frees it.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, it } from 'node:test';
import { lockDataDir } from '../src/data-dir-lock.js';
import { PROJECT_ROOT, spawnServerProcess, testEnv } from './helpers/server.js';

/** Runs `slipway server` to its end (it is expected to refuse to start), killed after 60 s. */
function runServer(env: Record<string, string>): Promise<{ code: number | null; output: string }> {
  const child = spawn(process.execPath, [path.join(PROJECT_ROOT, 'bin', 'slipway.js'), 'server'], {
    env: { PATH: process.env['PATH'] ?? '/usr/bin:/bin', HOME: os.tmpdir(), ...env, SLIPWAY_LOG_LEVEL: 'info' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
  return new Promise((resolve) => {
    child.once('close', (code) => {
      clearTimeout(timer);
      resolve({ code, output });
    });
  });
}

describe('the data directory lock', () => {
  it('refuses a second server on the same data directory, naming the one that holds it', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'slipway-dirlock-'));
    const env = testEnv(dir, { SLIPWAY_DATA_PLANE: 'node' });
    const first = await spawnServerProcess(env);
    try {
      const second = await runServer(env);
      assert.notEqual(second.code, 0, second.output);
      const named = /another Slipway server holds the data directory .*: process (\d+) on (\S+)/.exec(second.output);
      assert.ok(named, second.output);
      assert.equal(named[2], os.hostname());
      // The named process is alive: the first server's worker.
      assert.doesNotThrow(() => process.kill(Number(named[1]), 0));
      // The first one serves on, untouched.
      const res = await fetch(`${first.url}/healthz`, { signal: AbortSignal.timeout(30_000) });
      assert.equal(res.status, 200);
    } finally {
      await first.kill();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('is a real lock: freed when its holder is killed, whatever the holder file still says', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'slipway-dirlock-'));
    const moduleUrl = new URL('../src/data-dir-lock.js', import.meta.url).href;
    // The holder keeps its lock referenced, as the server does: a lock nothing references may be
    // collected, and collecting it closes its SQLite connection, which frees the lock.
    const holder = spawn(process.execPath, ['--input-type=module', '-e', `const m = await import(${JSON.stringify(moduleUrl)}); globalThis.held = await m.lockDataDir(process.argv[1], 'held'); console.log('held'); setInterval(() => {}, 1000);`, dir], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    try {
      await new Promise<void>((resolve, reject) => {
        holder.stdout.once('data', () => resolve());
        holder.once('exit', () => reject(new Error('the holder exited')));
      });
      await assert.rejects(lockDataDir(dir, 'second', 300), new RegExp(`process ${holder.pid} on .*instance held`));
      const exited = new Promise((resolve) => holder.once('exit', resolve));
      holder.kill('SIGKILL');
      await exited;
      assert.ok(fs.existsSync(path.join(dir, 'server.lock.holder')), 'a killed holder leaves its file behind');
      const lock = await lockDataDir(dir, 'second', 0);
      lock.release();
    } finally {
      holder.kill('SIGKILL');
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('released with removeFiles, leaves no file behind (a failed restore), and the next taker gets a lock of its own', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'slipway-dirlock-'));
    try {
      const lock = await lockDataDir(dir, 'a failed restore', 0);
      assert.ok(fs.readdirSync(dir).includes('server.lock'));
      lock.release({ removeFiles: true });
      assert.deepEqual(fs.readdirSync(dir), []);
      const next = await lockDataDir(dir, 'the next one', 0);
      await assert.rejects(lockDataDir(dir, 'a third', 0), /another Slipway server holds the data directory/);
      next.release();
      assert.deepEqual(fs.readdirSync(dir), ['server.lock'], 'a plain release keeps the file');
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});

