// A throwaway OpenSSH server on loopback and one `ssh` forward through it (-R or -L): the baseline of the tunnel and `db connect` benches.
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { chmod, copyFile, mkdir, writeFile } from 'node:fs/promises';
import { connect } from 'node:net';
import { userInfo } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import { freePort } from '../test/helpers/net.js';

/** OpenSSH's server (Debian: openssh-server). */
const SSHD = '/usr/sbin/sshd';
const run = promisify(execFile);

/** Resolves once something accepts connections on `port` of loopback; rejects after `timeoutMs`. */
export async function waitForPort(port: number, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const ok = await new Promise<boolean>((resolve) => {
      const socket = connect(port, '127.0.0.1');
      socket.once('connect', () => {
        socket.destroy();
        resolve(true);
      });
      socket.once('error', () => resolve(false));
    });
    if (ok) return;
    if (Date.now() > deadline) throw new Error(`nothing listens on ${port} after ${timeoutMs} ms`);
    await sleep(100);
  }
}

export interface SshForward {
  /** The forwarded port on loopback (the remote end of -R, the local end of -L). */
  readonly port: number;
  /** sshd and ssh, for their CPU time (sshd forks a process per connection: count its descendants). */
  readonly pids: readonly number[];
  readonly processes: readonly ChildProcess[];
}

/**
 * Starts sshd on a free loopback port with fresh keys in `dir`, then `ssh -N` with one forward:
 * `-R` publishes `targetPort` on the ssh server's side (as a tunnel does), `-L` carries a local port
 * to `targetPort` through the server (as `ssh -L` to a database does). Both ends are 127.0.0.1.
 */
export async function startSshForward(direction: '-R' | '-L', targetPort: number, dir: string): Promise<SshForward> {
  // Named up front: spawning a missing program emits an 'error' event that would end the whole run (ENOENT).
  if (!existsSync(SSHD)) throw new Error(`${SSHD} not found: install Debian's openssh-server (apt-get install openssh-server) to compare with ssh ${direction}`);
  const hostKey = join(dir, 'host_key');
  const userKey = join(dir, 'user_key');
  const authorized = join(dir, 'authorized_keys');
  const config = join(dir, 'sshd_config');
  await run('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-f', hostKey]);
  await run('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-f', userKey]);
  await copyFile(`${userKey}.pub`, authorized);
  await chmod(authorized, 0o600);
  await writeFile(config, ['PidFile none', 'UsePAM no', 'StrictModes no', 'PasswordAuthentication no', 'KbdInteractiveAuthentication no', 'PermitRootLogin prohibit-password', 'AllowTcpForwarding yes', 'LogLevel ERROR', ''].join('\n'));
  await mkdir('/run/sshd', { recursive: true }).catch(() => {}); // sshd's privilege-separation directory
  const sshPort = await freePort();
  const sshd = spawn(SSHD, ['-D', '-e', '-f', config, '-p', String(sshPort), '-o', 'ListenAddress=127.0.0.1', '-h', hostKey, '-o', `AuthorizedKeysFile=${authorized}`], { stdio: ['ignore', 'ignore', 'pipe'] });
  let sshdErr = '';
  sshd.on('error', (err) => (sshdErr += `${err.message}\n`));
  sshd.stderr?.on('data', (chunk: Buffer) => (sshdErr += chunk.toString()));
  await waitForPort(sshPort, 5000).catch((err: Error) => {
    sshd.kill();
    throw new Error(`${err.message}; sshd said: ${sshdErr.trim() || '(nothing)'}`);
  });
  const port = await freePort();
  const ssh = spawn(
    'ssh',
    ['-N', '-T', '-p', String(sshPort), '-i', userKey, '-o', 'StrictHostKeyChecking=no', '-o', 'UserKnownHostsFile=/dev/null', '-o', 'BatchMode=yes', '-o', 'ExitOnForwardFailure=yes', '-o', 'LogLevel=ERROR', direction, `127.0.0.1:${port}:127.0.0.1:${targetPort}`, '--', `${userInfo().username}@127.0.0.1`],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  let sshErr = '';
  ssh.on('error', (err) => (sshErr += `${err.message}\n`));
  ssh.stderr?.on('data', (chunk: Buffer) => (sshErr += chunk.toString()));
  await waitForPort(port, 10_000).catch((err: Error) => {
    ssh.kill();
    sshd.kill();
    throw new Error(`${err.message}; ssh said: ${sshErr.trim() || '(nothing)'}; sshd said: ${sshdErr.trim() || '(nothing)'}`);
  });
  return { port, pids: [sshd.pid ?? 0, ssh.pid ?? 0], processes: [sshd, ssh] };
}
