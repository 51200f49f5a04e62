// wrk for the bench scripts: one way to run it (argv array, never a shell) and one parser of its report.
import { execFile, spawn } from 'node:child_process';
import { promisify } from 'node:util';

const run = promisify(execFile);

export interface WrkOptions {
  readonly connections: number | string;
  readonly seconds: number | string;
  /** wrk threads (default 2). */
  readonly threads?: number;
  /** Extra request headers, `Name: value`. */
  readonly headers?: readonly string[];
  /** wrk's per-request timeout in seconds (wrk's default: 2); a request slower than this counts as a timeout error. */
  readonly timeoutSeconds?: number;
  /** Stops wrk early (SIGINT: wrk still prints its report for the time it ran). */
  readonly signal?: AbortSignal;
}

export interface WrkResult {
  /** Requests completed (the "N requests in …" line). */
  readonly requests: number;
  readonly rps: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly mibPerSec: number;
  /** Responses outside 2xx/3xx. */
  readonly non2xx: number;
  readonly socketErrors: { readonly connect: number; readonly read: number; readonly write: number; readonly timeout: number };
  /** non2xx plus every socket error: the failed requests. */
  readonly errors: number;
  /** wrk's own error lines, for printing ('' when none). */
  readonly errorText: string;
}

/** wrk's latency ("1.23ms", "850.00us", "1.02s", "2.00m") in ms. */
export function wrkMs(text: string): number {
  const match = /^([\d.]+)(us|ms|s|m)$/.exec(text.trim());
  if (match === null) return Number.NaN;
  const value = Number(match[1]);
  const unit = match[2];
  return unit === 'us' ? value / 1000 : unit === 's' ? value * 1000 : unit === 'm' ? value * 60_000 : value;
}

const TRANSFER_FACTOR: Readonly<Record<string, number>> = { B: 1 / 1024 / 1024, KB: 1 / 1024, MB: 1, GB: 1024 };

/** Parses wrk's report (run with --latency for p50/p99). */
export function parseWrk(stdout: string): WrkResult {
  const requests = Number(/^\s*(\d+) requests in /m.exec(stdout)?.[1] ?? Number.NaN);
  const rps = Number(/Requests\/sec:\s+([\d.]+)/.exec(stdout)?.[1] ?? Number.NaN);
  // The latency distribution's lines only: the Latency line's "+/- Stdev" column (e.g. 87.99%) also ends in 99%.
  const p50Ms = wrkMs(/^\s+50%\s+(\S+)/m.exec(stdout)?.[1] ?? '');
  const p99Ms = wrkMs(/^\s+99%\s+(\S+)/m.exec(stdout)?.[1] ?? '');
  const transfer = /Transfer\/sec:\s+([\d.]+)(\w+)/.exec(stdout);
  const mibPerSec = transfer === null ? Number.NaN : Number(transfer[1]) * (TRANSFER_FACTOR[transfer[2] ?? 'MB'] ?? 1);
  const non2xx = Number(/Non-2xx or 3xx responses:\s+(\d+)/.exec(stdout)?.[1] ?? '0');
  const socket = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(stdout);
  const socketErrors = {
    connect: Number(socket?.[1] ?? 0),
    read: Number(socket?.[2] ?? 0),
    write: Number(socket?.[3] ?? 0),
    timeout: Number(socket?.[4] ?? 0),
  };
  const errors = non2xx + socketErrors.connect + socketErrors.read + socketErrors.write + socketErrors.timeout;
  const errorText = [...stdout.matchAll(/^\s*(Socket errors:.*|Non-2xx.*)$/gm)].map((m) => m[1]).join('; ');
  return { requests, rps, p50Ms, p99Ms, mibPerSec, non2xx, socketErrors, errors, errorText };
}

/** Runs wrk against `url` and parses its report. */
export async function wrk(url: string, options: WrkOptions): Promise<WrkResult> {
  const args = [`-t${options.threads ?? 2}`, `-c${options.connections}`, `-d${options.seconds}s`, '--latency'];
  if (options.timeoutSeconds !== undefined) args.push('--timeout', `${options.timeoutSeconds}s`);
  for (const header of options.headers ?? []) args.push('-H', header);
  args.push('--', url);
  const child = spawn('wrk', args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  const stop = (): void => void child.kill('SIGINT');
  options.signal?.addEventListener('abort', stop, { once: true });
  // wrk ends by itself after `seconds`; the bound only guards against a wrk that hangs.
  const bound = setTimeout(() => child.kill('SIGKILL'), (Number(options.seconds) + 60) * 1000);
  try {
    const code = await new Promise<number | null>((resolve, reject) => {
      child.once('error', reject);
      child.once('close', (exitCode) => resolve(exitCode));
    });
    if (code !== 0 && !/Requests\/sec:/.test(stdout)) throw new Error(`wrk exited with ${code}: ${stderr.trim() || stdout.trim()}`);
  } finally {
    clearTimeout(bound);
    options.signal?.removeEventListener('abort', stop);
  }
  return parseWrk(stdout);
}

/** Whether a wrk binary is installed. */
export async function hasWrk(): Promise<boolean> {
  try {
    await run('wrk', ['--version']);
    return true;
  } catch (err) {
    // wrk prints its version and exits 1; only a missing binary is "not installed".
    return (err as NodeJS.ErrnoException).code !== 'ENOENT';
  }
}
