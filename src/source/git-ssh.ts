// The ssh program git runs for ssh:// and git@host: sources: it connects to the address Slipway checked, never resolving the host again.
import { spawn } from 'node:child_process';
import { chmod, mkdtemp, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';

/** Environment git's ssh wrapper reads (set by git.ts for each git process; the wrapper's only input besides git's argv). */
export const SSH_ENV = {
  /** The address the host resolved to when it was checked; absent when private hosts are allowed (no check, no pin). */
  address: 'SLIPWAY_GIT_SSH_ADDRESS',
  /** The host of the repository URL, which git must be asking for. */
  host: 'SLIPWAY_GIT_SSH_HOST',
  /** ssh's ConnectTimeout, in seconds. */
  connectTimeout: 'SLIPWAY_GIT_SSH_CONNECT_TIMEOUT',
} as const;

/**
 * The ssh argv for git's call `wrapper <options…> <[user@]host> <command>` (GIT_SSH_VARIANT=ssh):
 * fixed safety options, then `HostName=<address>` (with `HostKeyAlias=<host>`, so known_hosts still
 * names the host) when pinned, git's options, `--`, the host and the command. Throws if git's host
 * is not the checked one.
 */
export function pinnedSshArgs(gitArgs: readonly string[], env: Readonly<Record<string, string | undefined>>): string[] {
  if (gitArgs.length < 2) throw new Error('expected git to pass a host and a command');
  const options = gitArgs.slice(0, -2);
  const destination = gitArgs[gitArgs.length - 2] as string;
  const command = gitArgs[gitArgs.length - 1] as string;
  const host = destination.slice(destination.lastIndexOf('@') + 1).replace(/^\[(.*)\]$/, '$1');
  const expected = env[SSH_ENV.host];
  if (expected === undefined || host.toLowerCase() !== expected.toLowerCase() || destination.startsWith('-')) {
    throw new Error(`git asked ssh for "${destination}", not the repository's host`);
  }
  const timeout = /^\d+$/.test(env[SSH_ENV.connectTimeout] ?? '') ? env[SSH_ENV.connectTimeout] : '30';
  const address = env[SSH_ENV.address];
  const pin = address === undefined || address === '' ? [] : ['-o', `HostName=${address}`, '-o', `HostKeyAlias=${expected}`];
  return ['-o', 'BatchMode=yes', '-o', 'StrictHostKeyChecking=accept-new', '-o', `ConnectTimeout=${timeout}`, ...pin, ...options, '--', destination, command];
}

/** The wrapper's entry point: runs `ssh` from PATH with pinnedSshArgs and exits as it does. */
export function runPinnedSsh(): void {
  let args: string[];
  try {
    args = pinnedSshArgs(process.argv.slice(2), process.env);
  } catch (err) {
    process.stderr.write(`slipway: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(255);
  }
  const child = spawn('ssh', args, { stdio: 'inherit' });
  child.on('error', (err) => {
    process.stderr.write(`slipway: ssh could not start: ${err.message}\n`);
    process.exit(255);
  });
  child.on('exit', (code, signal) => process.exit(code ?? (signal === null ? 255 : 128)));
}

let installed: Promise<string> | undefined;

/**
 * The path of an executable that runs runPinnedSsh (written once per process in a private temp
 * directory): git's GIT_SSH. git runs GIT_SSH directly with an argv, never through a shell.
 */
export function gitSshProgram(): Promise<string> {
  installed ??= (async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'slipway-git-ssh-'));
    const file = path.join(dir, 'ssh.mjs');
    const moduleUrl = new URL(import.meta.url).href;
    await writeFile(file, `#!${process.execPath}\nimport { runPinnedSsh } from ${JSON.stringify(moduleUrl)};\nrunPinnedSsh();\n`, { mode: 0o700 });
    await chmod(file, 0o700);
    return file;
  })();
  installed.catch(() => {
    installed = undefined;
  });
  return installed;
}
