// One supervised HAProxy process: started, restarted with backoff when it dies, stopped with the server.
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import type { RuntimeApi } from './runtime-api.js';

/** HAProxy could not be started (a port taken, a bad configuration): the server cannot start either. */
export class HaproxyStartError extends Error {
  override readonly name = 'HaproxyStartError';
  readonly code = 'HAPROXY_START_FAILED';
}

type Log = (level: 'info' | 'warn' | 'error', msg: string, detail?: object) => void;

export interface HaproxyProcessOptions {
  readonly binary: string;
  readonly configFile: string;
  /** Where the pid of the running HAProxy is kept, so a process left by a crashed server is ended. */
  readonly pidFile: string;
  readonly api: RuntimeApi;
  /**
   * Writes the configuration for the state of the moment and starts HAProxy from it, inside the
   * caller's exclusive section (so no route change interleaves with a restart).
   */
  readonly exclusive: <T>(work: () => Promise<T>) => Promise<T>;
  readonly prepare: () => Promise<void>;
  /** Runs after each start and restart, once HAProxy answers, in the same exclusive section (loads what no file holds: TLS keys). */
  readonly loaded?: () => Promise<void>;
  readonly log: Log;
  /** Longest wait for a started HAProxy to answer on its socket. */
  readonly readyTimeoutMs?: number;
}

const MAX_BACKOFF_MS = 10_000;
/** A process that ran this long resets the backoff: its death is not part of a crash loop. */
const STABLE_MS = 30_000;

/** Starts HAProxy in the foreground (`-db`) as a child, and starts it again whenever it exits unasked. */
export class HaproxyProcess {
  readonly #options: HaproxyProcessOptions;
  #child: ChildProcess | undefined;
  #stopping = false;
  #failures = 0;
  #restartTimer: NodeJS.Timeout | undefined;
  #restarts = 0;

  constructor(options: HaproxyProcessOptions) {
    this.#options = options;
  }

  /** The running HAProxy's pid (undefined while it is down). */
  get pid(): number | undefined {
    return this.#child?.exitCode === null && this.#child.signalCode === null ? this.#child.pid : undefined;
  }

  /** How many times HAProxy was started again after dying. */
  get restarts(): number {
    return this.#restarts;
  }

  /** First start: ends a leftover HAProxy of a crashed server, writes the configuration, starts, waits until it answers. */
  async start(): Promise<void> {
    await this.#endLeftover();
    await this.#options.exclusive(async () => {
      await this.#options.prepare();
      await this.#spawn();
      await this.#options.loaded?.();
    });
  }

  /** Stops HAProxy (SIGTERM: open connections are closed now; SIGKILL after 5 s) and stops restarting it. */
  async stop(): Promise<void> {
    this.#stopping = true;
    clearTimeout(this.#restartTimer);
    // In turn with a restart under way (it may be writing files or about to spawn): the process
    // running once it is done is the one stopped, and nothing writes HAProxy's files after this.
    await this.#options.exclusive(() => this.#kill());
  }

  async #kill(): Promise<void> {
    const child = this.#child;
    if (child === undefined || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    child.kill('SIGTERM');
    const killer = setTimeout(() => child.kill('SIGKILL'), 5000);
    await exited;
    clearTimeout(killer);
    await fs.rm(this.#options.pidFile, { force: true });
  }

  async #spawn(): Promise<void> {
    const { binary, configFile, api, log } = this.#options;
    const child = spawn(binary, ['-db', '-f', configFile], { stdio: ['ignore', 'pipe', 'pipe'] });
    this.#child = child;
    let output = '';
    const keep = (chunk: Buffer): void => {
      output = (output + chunk.toString('utf8')).slice(-4000);
    };
    child.stdout?.on('data', keep);
    child.stderr?.on('data', keep);
    const startedAt = Date.now();
    let ready = false;
    child.once('exit', (code, signal) => {
      if (this.#stopping) return;
      if (!ready) return; // the start below reports it
      log('warn', 'HAProxy exited; starting it again', { code, signal, output: output.trim().split('\n').slice(-3).join(' | ') });
      if (Date.now() - startedAt > STABLE_MS) this.#failures = 0;
      this.#scheduleRestart();
    });
    child.on('error', (err) => keep(Buffer.from(String(err))));
    if (child.pid !== undefined) await fs.writeFile(this.#options.pidFile, `${child.pid}\n`, { mode: 0o600 });

    const deadline = Date.now() + (this.#options.readyTimeoutMs ?? 10_000);
    for (;;) {
      if (child.exitCode !== null || child.signalCode !== null) {
        throw new HaproxyStartError(`HAProxy did not start: ${output.trim().split('\n').slice(-5).join(' | ') || `exit ${child.exitCode ?? child.signalCode}`}`);
      }
      try {
        await api.run(['show', 'info'], AbortSignal.timeout(1000));
        ready = true;
        return;
      } catch {
        if (Date.now() > deadline) {
          child.kill('SIGKILL');
          throw new HaproxyStartError(`HAProxy did not answer on ${api.socketPath} within ${this.#options.readyTimeoutMs ?? 10_000} ms`);
        }
        await sleep(50);
      }
    }
  }

  #scheduleRestart(): void {
    const delay = Math.min(MAX_BACKOFF_MS, 100 * 2 ** this.#failures);
    this.#failures += 1;
    this.#restartTimer = setTimeout(() => {
      if (this.#stopping) return;
      this.#options
        .exclusive(async () => {
          if (this.#stopping) return;
          await this.#options.prepare();
          await this.#spawn();
          await this.#options.loaded?.();
          this.#restarts += 1;
          this.#options.log('info', 'HAProxy is serving again', { pid: this.pid });
        })
        .catch((err: unknown) => {
          this.#options.log('error', 'HAProxy could not be started again', { error: err instanceof Error ? err.message : String(err) });
          if (!this.#stopping) this.#scheduleRestart();
        });
    }, delay);
  }

  /** A pid file naming a live HAProxy started from our configuration: a crashed server's; ended. */
  async #endLeftover(): Promise<void> {
    let pid: number;
    try {
      pid = Number((await fs.readFile(this.#options.pidFile, 'utf8')).trim());
    } catch {
      return;
    }
    if (!Number.isInteger(pid) || pid <= 1) return;
    let cmdline = '';
    try {
      cmdline = (await fs.readFile(`/proc/${pid}/cmdline`, 'utf8')).split('\0').join(' ');
    } catch {
      return;
    }
    if (!cmdline.includes('haproxy') || !cmdline.includes(this.#options.configFile)) return;
    this.#options.log('warn', 'ending the HAProxy a previous server left running', { pid });
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      return;
    }
    const deadline = Date.now() + 5000;
    while (Date.now() < deadline && !(await processEnded(pid))) await sleep(20);
  }
}

/**
 * Whether a process has ended: its /proc entry is gone, or it is a zombie. An orphan (a crashed
 * server's HAProxy) is reaped by whoever adopted it (init, a container's pid 1), which may take a
 * second or more; a zombie holds no port and no socket, so a start need not wait for that.
 */
export async function processEnded(pid: number): Promise<boolean> {
  let stat: string;
  try {
    stat = await fs.readFile(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return true;
  }
  const state = stat.charAt(stat.lastIndexOf(')') + 2);
  return state === 'Z' || state === 'X';
}
