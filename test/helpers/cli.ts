// Running the built `slipway` CLI (bin/slipway.js) as a child process, as a person would.
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { PROJECT_ROOT } from './server.js';

export const BIN = path.join(PROJECT_ROOT, 'bin', 'slipway.js');

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

export interface CliRun {
  /** XDG_CONFIG_HOME and HOME of the run. */
  home: string;
  env?: Record<string, string>;
  /** Written to stdin, then stdin is closed. */
  input?: string;
  cwd?: string;
}

/** A running CLI: its output so far, and its end. */
export interface CliChild {
  readonly child: ChildProcess;
  stdout(): string;
  stderr(): string;
  readonly done: Promise<CliResult>;
}

/** Starts `slipway ...args` with a clean environment; killed after 240 s. */
export function startCli(args: string[], run: CliRun): CliChild {
  const child = spawn(process.execPath, [BIN, ...args], {
    cwd: run.cwd ?? run.home,
    env: { XDG_CONFIG_HOME: run.home, HOME: run.home, PATH: process.env['PATH'] ?? '/usr/bin:/bin', ...run.env },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout?.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const done = new Promise<CliResult>((resolve, reject) => {
    const timer = setTimeout(() => child.kill('SIGKILL'), 240_000);
    child.once('error', reject);
    child.once('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
  child.stdin?.end(run.input ?? '');
  return { child, stdout: () => stdout, stderr: () => stderr, done };
}

/** Runs `slipway ...args` to its end. */
export function cli(args: string[], run: CliRun): Promise<CliResult> {
  return startCli(args, run).done;
}

/** Waits until `check` holds (polling every 100 ms), failing after `timeoutMs`. */
export async function until(check: () => boolean, what: string, timeoutMs = 120_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}
