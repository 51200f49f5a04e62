// The node guard's image: the manager's own iptables (nft backend), its libraries and extension modules, and a static busybox, FROM scratch, named by their content.
import { execFile } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import type Dockerode from 'dockerode';
import { followProgress } from '../docker/engine-calls.js';
import { GUARD_BUSYBOX, GUARD_IPTABLES, GUARD_XTABLES_DIR } from './node-guard.js';

const run = promisify(execFile);

/** Where the host's iptables (nft backend) may be. */
const IPTABLES_CANDIDATES = ['/usr/sbin/xtables-nft-multi', '/sbin/xtables-nft-multi'];
/** Where the host's xtables extension modules may be. */
const XTABLES_CANDIDATES = ['/usr/lib/x86_64-linux-gnu/xtables', '/usr/lib/aarch64-linux-gnu/xtables', '/usr/lib64/xtables', '/usr/lib/xtables'];
/** The extension modules the rules use: -p tcp --dport, -m conntrack, and the standard targets and jumps. */
const XTABLES_MODULES = ['libxt_tcp.so', 'libxt_conntrack.so', 'libxt_standard.so'];
const BUILD_TIMEOUT_MS = 5 * 60_000;

/** A host file and where the image holds it. */
export interface ImageFile {
  readonly source: string;
  readonly target: string;
}

async function firstExisting(candidates: readonly string[]): Promise<string | undefined> {
  for (const candidate of candidates) {
    if (await fs.access(candidate).then(() => true, () => false)) return candidate;
  }
  return undefined;
}

/** The shared libraries a binary loads, as ldd lists them (the loader included). */
async function librariesOf(binary: string): Promise<string[]> {
  const { stdout } = await run('ldd', ['--', binary], { timeout: 30_000 });
  return [...stdout.matchAll(/(\/[^\s]+\.so[^\s]*)/g)].map((m) => m[1] ?? '').filter((p) => p !== '');
}

/** The files of the guard image, from this host; throws saying what to install when one is missing. */
export async function guardImageFiles(busybox: string): Promise<ImageFile[]> {
  const iptables = await firstExisting(IPTABLES_CANDIDATES);
  if (iptables === undefined) throw new Error(`no xtables-nft-multi (${IPTABLES_CANDIDATES.join(', ')}): install iptables`);
  const xtables = await firstExisting(XTABLES_CANDIDATES);
  if (xtables === undefined) throw new Error(`no xtables modules (${XTABLES_CANDIDATES.join(', ')}): install iptables`);
  if (!(await fs.access(busybox).then(() => true, () => false))) throw new Error(`no busybox at ${busybox} (SLIPWAY_SWARM_PROBE)`);
  const modules = XTABLES_MODULES.map((m) => path.join(xtables, m));
  const libraries = new Set<string>();
  for (const binary of [iptables, ...modules]) for (const lib of await librariesOf(binary)) libraries.add(lib);
  return [
    { source: busybox, target: GUARD_BUSYBOX },
    { source: iptables, target: GUARD_IPTABLES },
    ...modules.map((m) => ({ source: m, target: path.posix.join(GUARD_XTABLES_DIR, path.basename(m)) })),
    ...[...libraries].sort().map((lib) => ({ source: lib, target: lib })),
  ];
}

/** A hash of the image's content: each file's place and bytes. */
export async function contentHash(files: readonly ImageFile[]): Promise<string> {
  const hash = crypto.createHash('sha256');
  for (const file of [...files].sort((a, b) => a.target.localeCompare(b.target))) {
    hash.update(`${file.target}\0`);
    hash.update(crypto.createHash('sha256').update(await fs.readFile(file.source)).digest('hex'));
    hash.update('\0');
  }
  return hash.digest('hex').slice(0, 16);
}

/** Builds the image `tag` from `files` on the engine `docker` (FROM scratch, no RUN step); resolves once it exists. */
export async function buildGuardImage(docker: Dockerode, files: readonly ImageFile[], tag: string, signal: AbortSignal): Promise<void> {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'slipway-guard-image-'));
  try {
    const entries = ['Dockerfile'];
    for (const file of files) {
      const relative = path.posix.join('rootfs', file.target);
      await fs.mkdir(path.join(dir, path.dirname(relative)), { recursive: true });
      await fs.copyFile(file.source, path.join(dir, relative));
      await fs.chmod(path.join(dir, relative), 0o755);
      entries.push(relative);
    }
    await fs.writeFile(path.join(dir, 'Dockerfile'), 'FROM scratch\nCOPY rootfs/ /\n');
    const stream = (await docker.buildImage({ context: dir, src: entries }, {
      t: tag,
      rm: true,
      forcerm: true,
      version: '1',
      abortSignal: AbortSignal.any([signal, AbortSignal.timeout(BUILD_TIMEOUT_MS)]),
    })) as NodeJS.ReadableStream;
    await followProgress(docker, stream, 'build');
  } finally {
    await fs.rm(dir, { recursive: true, force: true });
  }
}
