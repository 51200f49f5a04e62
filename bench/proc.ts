// What /proc says about CPU use: of one process, of a process tree, and of the whole host.
import fs from 'node:fs';

/** A process and its descendants, with their command names (e.g. the server is a child of `bin/slipway.js`; HAProxy is the server's child). */
export function processTree(pid: number): Array<{ pid: number; name: string }> {
  let children: number[] = [];
  try {
    children = fs.readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
  } catch {
    children = [];
  }
  // A child that ended between the two reads is left out; the process asked for must exist.
  const descendants = children.flatMap((child) => {
    try {
      return processTree(child);
    } catch {
      return [];
    }
  });
  return [{ pid, name: fs.readFileSync(`/proc/${pid}/comm`, 'utf8').trim() }, ...descendants];
}

/**
 * CPU time (user + system) a process has used, in µs (from /proc/<pid>/stat, in clock ticks of
 * 10 ms). With `reaped`, also what its children that it has waited for used (cutime, cstime).
 */
export function cpuMicros(pid: number, options: { reaped?: boolean } = {}): number {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  // The command name may hold spaces and parentheses: the fields start after its last ')'.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const ticks = (options.reaped === true ? [11, 12, 13, 14] : [11, 12]).reduce((sum, i) => sum + Number(fields[i] ?? 0), 0);
  return ticks * 10_000;
}

/** The host's CPU time so far, in clock ticks summed over all CPUs: all of it, and the part not idle. */
export function hostCpuTicks(): { total: number; busy: number } {
  const line = fs.readFileSync('/proc/stat', 'utf8').split('\n')[0] ?? '';
  // cpu user nice system idle iowait irq softirq steal (guest time is already inside user).
  const [user, nice, system, idle, iowait, irq, softirq, steal] = line.trim().split(/\s+/).slice(1, 9).map(Number) as number[];
  const busy = (user ?? 0) + (nice ?? 0) + (system ?? 0) + (irq ?? 0) + (softirq ?? 0) + (steal ?? 0);
  return { total: busy + (idle ?? 0) + (iowait ?? 0), busy };
}
