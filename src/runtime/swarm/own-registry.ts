// Slipway's own registry under swarm without SLIPWAY_REGISTRY (decisions §16): Debian's docker-registry as a supervised child with a config of its own.
import { spawn, type ChildProcess } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type Dockerode from 'dockerode';
import { ConfigError } from '../../config.js';

/** Debian's registry (package `docker-registry`). */
export const REGISTRY_BINARY = '/usr/bin/docker-registry';
/** How long the registry may take to answer `/v2/` after a start. */
const READY_TIMEOUT_MS = 30_000;
/** Restart delays after the registry dies: doubled from the first up to the last. */
const RESTART_FIRST_MS = 500;
const RESTART_MAX_MS = 30_000;
/** A registry that ran this long before dying is restarted after the first delay again. */
const STABLE_MS = 60_000;
/** How long a stop waits for the registry to end on SIGTERM before SIGKILL. */
const STOP_TIMEOUT_MS = 10_000;
/** Lines of the registry's output kept for an error message. */
const KEPT_LINES = 20;

type Log = (level: 'info' | 'warn' | 'error', msg: string, detail?: object) => void;

/** `host:port` as a registry reference and a URL spell it (an IPv6 host in brackets). */
export function hostPort(host: string, port: number): string {
  return host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
}

/** The registry's configuration: filesystem storage, plain HTTP on `addr`, deletes on, no auth, no debug server, no health check. */
export function registryConfig(options: { storageDir: string; addr: string; secret: string }): string {
  // JSON strings are YAML double-quoted scalars: paths and addresses need no escaping rules of their own.
  const q = (value: string): string => JSON.stringify(value);
  return [
    'version: 0.1',
    'log:',
    '  level: warn',
    '  accesslog:',
    '    disabled: true',
    'storage:',
    '  filesystem:',
    `    rootdirectory: ${q(options.storageDir)}`,
    '  delete:',
    '    enabled: true',
    'http:',
    `  addr: ${q(options.addr)}`,
    `  secret: ${q(options.secret)}`,
    '',
  ].join('\n');
}

/** Writes `<data>/registry.yml` (mode 0600: it holds the HTTP secret) and creates `<data>/registry`; resolves with the file's path. */
export async function writeRegistryConfig(dataDir: string, addr: string): Promise<string> {
  const storageDir = path.join(dataDir, 'registry');
  await fs.mkdir(storageDir, { recursive: true, mode: 0o700 });
  const file = path.join(dataDir, 'registry.yml');
  const body = registryConfig({ storageDir, addr, secret: crypto.randomBytes(32).toString('base64url') });
  // Written aside and renamed: a registry restarting meanwhile never reads half a file.
  const temp = `${file}.${process.pid}.tmp`;
  await fs.writeFile(temp, body, { mode: 0o600 });
  await fs.chmod(temp, 0o600);
  await fs.rename(temp, file);
  return file;
}

/** Throws a ConfigError saying what to install when the registry's binary is not there. */
export async function checkRegistryBinary(binary: string): Promise<void> {
  try {
    await fs.access(binary, fs.constants.X_OK);
  } catch {
    throw new ConfigError(
      `SLIPWAY_RUNTIME=swarm without SLIPWAY_REGISTRY runs Debian's registry, but ${binary} is missing: apt-get install docker-registry (or set SLIPWAY_REGISTRY to a registry every node can pull from)`,
    );
  }
}

/** The manager's address as swarm sees it: its node's `Status.Addr`, or its manager address when that reads 0.0.0.0. */
export async function managerAddress(docker: Dockerode): Promise<string> {
  const info = (await docker.info()) as { Swarm?: { NodeID?: string; NodeAddr?: string; ControlAvailable?: boolean } };
  const nodeId = info.Swarm?.NodeID ?? '';
  if (nodeId === '' || info.Swarm?.ControlAvailable !== true) throw new ConfigError('SLIPWAY_RUNTIME=swarm: the engine (DOCKER_HOST) is not a swarm manager');
  const node = (await docker.getNode(nodeId).inspect()) as { Status?: { Addr?: string }; ManagerStatus?: { Addr?: string } };
  const status = node.Status?.Addr ?? '';
  const address = status !== '' && status !== '0.0.0.0' ? status : (node.ManagerStatus?.Addr ?? '').replace(/:\d+$/, '').replace(/^\[(.*)\]$/, '$1');
  if (address === '' || address === '0.0.0.0') throw new Error('the swarm reports no address for the manager node');
  return address;
}

/**
 * Ends a registry a killed server left running (its pid recorded under the data directory, its
 * command line naming this data directory's config): it would hold the port.
 */
async function endLeftover(pidFile: string): Promise<void> {
  const pid = Number(await fs.readFile(pidFile, 'utf8').catch(() => ''));
  if (!Number.isInteger(pid) || pid <= 0) return;
  const cmdline = await fs.readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '');
  if (!cmdline.includes(path.join(path.dirname(pidFile), 'registry.yml'))) return;
  try {
    process.kill(pid, 'SIGKILL');
  } catch {
    return;
  }
  const deadline = Date.now() + STOP_TIMEOUT_MS;
  while (Date.now() < deadline && (await fs.readFile(`/proc/${pid}/cmdline`, 'utf8').then((now) => now === cmdline, () => false))) await sleep(50);
}

/** The next restart delay after `previous` (0: the first). */
export function nextRestartDelay(previous: number, first = RESTART_FIRST_MS, max = RESTART_MAX_MS): number {
  return previous <= 0 ? first : Math.min(max, previous * 2);
}

export interface OwnRegistryOptions {
  readonly dataDir: string;
  /** The address it listens on (the manager's, so every node reaches it). */
  readonly host: string;
  readonly port: number;
  readonly log: Log;
  /** The registry program (tests: a stand-in). */
  readonly binary?: string;
  readonly readyTimeoutMs?: number;
  readonly restartFirstMs?: number;
}

/** Debian's docker-registry run and watched by Slipway: restarted with backoff when it dies, stopped with the server. */
export class OwnRegistry {
  readonly #options: OwnRegistryOptions;
  readonly #binary: string;
  #child: ChildProcess | undefined;
  #config = '';
  #stopped = false;
  #delay = 0;
  #timer: NodeJS.Timeout | undefined;
  #lines: string[] = [];
  #starts = 0;

  constructor(options: OwnRegistryOptions) {
    this.#options = options;
    this.#binary = options.binary ?? REGISTRY_BINARY;
  }

  get #pidFile(): string {
    return path.join(this.#options.dataDir, 'registry.pid');
  }

  /** What images are pushed to and nodes pull from: `host:port`. */
  get address(): string {
    return hostPort(this.#options.host, this.#options.port);
  }

  /** The running registry's pid (undefined while it is down). */
  get pid(): number | undefined {
    return this.#child?.exitCode === null && this.#child.signalCode === null ? this.#child.pid : undefined;
  }

  /** How many times the registry was started (the first start included). */
  get starts(): number {
    return this.#starts;
  }

  /** Writes the config, starts the registry and waits until `/v2/` answers; throws (with its last output) when it does not in time. */
  async start(signal?: AbortSignal): Promise<void> {
    await checkRegistryBinary(this.#binary);
    await endLeftover(this.#pidFile);
    this.#config = await writeRegistryConfig(this.#options.dataDir, this.address);
    this.#spawn();
    try {
      await this.ready(signal);
    } catch (err) {
      await this.stop();
      throw err;
    }
  }

  /** Resolves once `/v2/` answers (the registry restarting: once it is back), within the ready timeout. */
  async ready(signal?: AbortSignal): Promise<void> {
    const timeoutMs = this.#options.readyTimeoutMs ?? READY_TIMEOUT_MS;
    const deadline = Date.now() + timeoutMs;
    const url = `http://${this.address}/v2/`;
    for (;;) {
      signal?.throwIfAborted();
      if (this.#stopped) throw new Error('the registry is stopped');
      const answered = await fetch(url, { signal: AbortSignal.timeout(2_000) }).then(
        async (res) => {
          await res.arrayBuffer().catch(() => undefined);
          return res.status === 200;
        },
        () => false,
      );
      if (answered) return;
      if (Date.now() > deadline) {
        const output = this.#lines.join('\n').trim();
        throw new Error(`Slipway's registry (${this.#binary}) did not answer at ${url} within ${timeoutMs / 1000} s${output === '' ? '' : `; its last output:\n${output}`}`);
      }
      await sleep(200);
    }
  }

  /** Stops supervising and ends the registry (SIGTERM, SIGKILL after 10 s). */
  async stop(): Promise<void> {
    this.#stopped = true;
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    const child = this.#child;
    if (child === undefined || child.exitCode !== null || child.signalCode !== null) return;
    const ended = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), STOP_TIMEOUT_MS);
    await ended;
    clearTimeout(timer);
  }

  #spawn(): void {
    const startedAt = Date.now();
    this.#starts += 1;
    // argv, no shell; no environment of Slipway's (REGISTRY_* variables would override the config).
    const child = spawn(this.#binary, ['serve', this.#config], { stdio: ['ignore', 'pipe', 'pipe'], env: { PATH: '/usr/sbin:/usr/bin:/sbin:/bin' } });
    this.#child = child;
    if (child.pid !== undefined) void fs.writeFile(this.#pidFile, String(child.pid), { mode: 0o600 }).catch(() => undefined);
    const keep = (chunk: Buffer): void => {
      this.#lines.push(...chunk.toString('utf8').split('\n').filter((line) => line.trim() !== ''));
      if (this.#lines.length > KEPT_LINES) this.#lines.splice(0, this.#lines.length - KEPT_LINES);
    };
    child.stdout?.on('data', keep);
    child.stderr?.on('data', keep);
    let handled = false;
    const ended = (why: string): void => {
      if (handled) return;
      handled = true;
      if (this.#stopped) return;
      // Restart with backoff; a registry that ran a while starts again from the first delay.
      if (Date.now() - startedAt >= STABLE_MS) this.#delay = 0;
      this.#delay = nextRestartDelay(this.#delay, this.#options.restartFirstMs ?? RESTART_FIRST_MS);
      this.#options.log('warn', `Slipway's registry ${why}; restarting it in ${this.#delay} ms`, { output: this.#lines.slice(-5) });
      this.#timer = setTimeout(() => {
        this.#timer = undefined;
        if (!this.#stopped) this.#spawn();
      }, this.#delay);
      this.#timer.unref();
    };
    child.once('error', (err) => ended(`could not start (${err.message})`));
    child.once('exit', (code, sig) => ended(sig === null ? `exited with code ${code ?? '?'}` : `was killed by ${sig}`));
  }
}

/** Starts Slipway's own registry on the manager's address (decisions §16); resolves once it answers. */
export async function startOwnRegistry(options: { docker: Dockerode; dataDir: string; port: number; log: Log; binary?: string }): Promise<OwnRegistry> {
  const binary = options.binary ?? REGISTRY_BINARY;
  await checkRegistryBinary(binary);
  const host = await managerAddress(options.docker);
  const registry = new OwnRegistry({ dataDir: options.dataDir, host, port: options.port, log: options.log, binary });
  await registry.start();
  options.log('info', `Slipway's registry answers at ${registry.address} (every node needs --insecure-registry ${registry.address}; docs/swarm.md)`);
  return registry;
}
