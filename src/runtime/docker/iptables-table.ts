// A whole iptables table read in one process and changes written to it in one transaction: two processes where one per rule would be a score.
import { execFile } from 'node:child_process';

const IPTABLES_TIMEOUT_MS = 15_000;

/** What one iptables run said. */
export interface IptablesRun {
  readonly ok: boolean;
  readonly stdout: string;
  readonly stderr: string;
}

/** One iptables run on `table` (`-w`: waits for the xtables lock the engine and other installations share). Never throws. */
export function runIptables(args: readonly string[], table: 'filter' | 'mangle' = 'filter'): Promise<IptablesRun> {
  return new Promise((resolve) => {
    execFile('iptables', ['-w', '5', '-t', table, ...args], { timeout: IPTABLES_TIMEOUT_MS }, (err, stdout, stderr) => {
      resolve({ ok: err === null, stdout: String(stdout), stderr: String(stderr).trim() || (err?.message ?? '') });
    });
  });
}

/** A rule of `chain` as `iptables -S` prints it. */
export function ruleLine(chain: string, rule: readonly string[]): string {
  return `-A ${chain} ${rule.join(' ')}`;
}

/** A table as `iptables -S` prints it: its chains, and each chain's `-A` lines in order. */
export interface TableListing {
  readonly chains: ReadonlySet<string>;
  readonly rules: ReadonlyMap<string, readonly string[]>;
}

/** Lists `table` (`-w`: waits for the xtables lock the engine and other installations share). */
export async function listTable(table: 'filter' | 'mangle'): Promise<TableListing> {
  const listing = await new Promise<string>((resolve, reject) =>
    execFile('iptables', ['-w', '5', '-t', table, '-S'], { timeout: IPTABLES_TIMEOUT_MS, maxBuffer: 64 * 1024 * 1024 }, (err, stdout, stderr) =>
      err === null ? resolve(String(stdout)) : reject(new Error(`iptables -t ${table} -S: ${String(stderr).trim() || err.message}`)),
    ),
  );
  const chains = new Set<string>();
  const rules = new Map<string, string[]>();
  for (const line of listing.split('\n').map((l) => l.trim())) {
    const declared = /^-[NP] (\S+)/.exec(line);
    if (declared?.[1] !== undefined) chains.add(declared[1]);
    const appended = /^-A (\S+) /.exec(line);
    if (appended?.[1] !== undefined) rules.set(appended[1], [...(rules.get(appended[1]) ?? []), line]);
  }
  return { chains, rules };
}

/**
 * Applies `lines` (`-A`/`-I` rules, `:CHAIN - [0:0]` declarations) to `table` in one transaction
 * (`iptables-restore --noflush`): all of them or none. Declaring a chain that exists empties it.
 */
export function restoreTable(table: 'filter' | 'mangle', lines: readonly string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = execFile('iptables-restore', ['-w', '5', '--noflush'], { timeout: IPTABLES_TIMEOUT_MS }, (err, _stdout, stderr) =>
      err === null ? resolve() : reject(new Error(`iptables-restore (${table}): ${String(stderr).trim() || err.message}`)),
    );
    child.stdin?.end([`*${table}`, ...lines, 'COMMIT', ''].join('\n'));
  });
}
