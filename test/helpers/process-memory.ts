// Test helper: the resident memory of another process (the server's worker), sampled while work runs.
import fs from 'node:fs';

const MiB = 1024 * 1024;

/** Resident set size of `pid` in bytes (VmRSS), or undefined once the process is gone. */
export function rssOf(pid: number): number | undefined {
  try {
    const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
    const kib = /^VmRSS:\s+(\d+) kB$/m.exec(status)?.[1];
    return kib === undefined ? undefined : Number(kib) * 1024;
  } catch {
    return undefined;
  }
}

/** The pids whose parent is `pid` (e.g. the server worker a `slipway server` supervisor started). */
export function childPids(pid: number): number[] {
  const out: number[] = [];
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      // Field 4 of /proc/PID/stat is the parent pid; the command name (field 2) may hold spaces, so split after its ')'.
      const stat = fs.readFileSync(`/proc/${entry}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (Number(fields[1]) === pid) out.push(Number(entry));
    } catch {
      // The process ended while we looked.
    }
  }
  return out;
}

/**
 * Samples a process's RSS every 25 ms from now on: `peakGrowth()` is the largest RSS seen minus the
 * RSS when sampling began. `stop()` ends the sampling.
 */
export function sampleRss(pid: number): { readonly start: number; peakGrowth(): number; current(): number; stop(): void } {
  const start = rssOf(pid);
  if (start === undefined) throw new Error(`no process ${pid}`);
  let peak = start;
  let last = start;
  const sample = (): void => {
    const now = rssOf(pid);
    if (now === undefined) return;
    last = now;
    if (now > peak) peak = now;
  };
  const timer = setInterval(sample, 25);
  return {
    start,
    peakGrowth: () => {
      sample();
      return peak - start;
    },
    current: () => {
      sample();
      return last;
    },
    stop: () => clearInterval(timer),
  };
}

/** `bytes` as MiB with one decimal, for messages. */
export function mib(bytes: number): string {
  return `${(bytes / MiB).toFixed(1)} MiB`;
}
