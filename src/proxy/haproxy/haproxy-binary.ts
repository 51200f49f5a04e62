// Finding an HAProxy binary and its version (the HAProxy data plane needs 2.6 or later), and a free port for it to bind.
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import path from 'node:path';

/** Where Debian and most distributions put the binary; the configured path, if any, comes first. */
const DIRECTORIES = ['/usr/sbin', '/usr/local/sbin', '/usr/bin', '/usr/local/bin', '/sbin', '/bin'];

export interface HaproxyBinary {
  readonly path: string;
  /** e.g. "2.6.12-1+deb12u3" */
  readonly version: string;
}

/** The HAProxy ≥ 2.6 to use, or undefined (with the reason) when there is none. */
export async function findHaproxy(configured: string | undefined): Promise<HaproxyBinary | { missing: string }> {
  const candidates = configured !== undefined ? [configured] : DIRECTORIES.map((dir) => path.join(dir, 'haproxy'));
  const found = candidates.find((file) => {
    try {
      fs.accessSync(file, fs.constants.X_OK);
      return true;
    } catch {
      return false;
    }
  });
  if (found === undefined) return { missing: configured !== undefined ? `${configured} is not an executable` : 'no haproxy binary found' };
  const output = await new Promise<string>((resolve) => {
    execFile(found, ['-v'], { timeout: 5000 }, (err, stdout) => resolve(err === null ? stdout : ''));
  });
  const match = /HA-?Proxy version (\d+)\.(\d+)(\S*)/.exec(output);
  if (match === null) return { missing: `${found} -v did not print a version` };
  const major = Number(match[1]);
  const minor = Number(match[2]);
  const version = `${match[1]}.${match[2]}${match[3] ?? ''}`;
  if (major < 2 || (major === 2 && minor < 6)) return { missing: `${found} is HAProxy ${version}; 2.6 or later is needed` };
  return { path: found, version };
}

/** A port free on `host` now, for HAProxy to bind (SLIPWAY_PORT=0: tests and benchmarks). */
export async function freePort(host: string): Promise<number> {
  const probe = createServer();
  await new Promise<void>((resolve, reject) => {
    probe.once('error', reject);
    probe.listen(0, host, () => resolve());
  });
  const { port } = probe.address() as AddressInfo;
  await new Promise<void>((resolve) => probe.close(() => resolve()));
  return port;
}
