// The guard of internal networks (compose sets, databases): nothing is forwarded into or out of their bridge from another interface, by rules the engine never reorders.
//
// The engine isolates an internal network by DROP rules in its DOCKER-ISOLATION-STAGE-1 chain, which
// FORWARD enters by one jump. Each time it creates a network (any network, of any program on the
// host) dockerd moves that jump back to the top of FORWARD by deleting it and inserting it again, in
// two separate iptables runs: in between, FORWARD has no isolation at all, and a container of the
// apps network (whose bridge's `-i br ! -o br -j ACCEPT` rule then matches) reaches any address of an
// internal network: another tenant's compose service or database. Under load that gap lasts long
// enough for a whole HTTP exchange (seen by test/e2e/compose-isolation.test.ts, reproduced on a bare
// engine; docs/decisions.md "Compose isolation and the engine's rule shuffle").
//
// The same isolation is therefore kept in the `mangle` table, which the engine never touches: its
// FORWARD jumps (once) to SLIPWAY-INTERNAL, which holds per internal bridge a DROP for packets from
// another interface into it and from it to another interface. Packets between the bridge's own
// containers, and the host's own traffic to and from them (INPUT/OUTPUT), never pass these rules.
// Rules match the interface (`br-<network id>`), never the subnet: a removed network's subnet goes to the next one.
import { readdir } from 'node:fs/promises';
import { type IptablesRun, listTable, restoreTable, ruleLine, runIptables } from './iptables-table.js';

/** The mangle chain holding every internal bridge's rules. */
export const INTERNAL_GUARD_CHAIN = 'SLIPWAY-INTERNAL';
const JUMP = ['FORWARD', '-j', INTERNAL_GUARD_CHAIN];

/** iptables on the mangle table. */
const mangle = (args: readonly string[]): Promise<IptablesRun> => runIptables(args, 'mangle');

/** The two rules of `bridge`, as `iptables -S` prints them (without `-A chain`). */
export function internalGuardRules(bridge: string): string[][] {
  return [
    ['!', '-i', bridge, '-o', bridge, '-j', 'DROP'],
    ['-i', bridge, '!', '-o', bridge, '-j', 'DROP'],
  ];
}

/** The prune of this process (the first guard runs it). */
let pruned: Promise<void> | undefined;

/**
 * Guards internal bridge `bridge` (idempotent): its rules in SLIPWAY-INTERNAL, the chain entered from
 * mangle FORWARD, whatever is missing written in one transaction after one listing of the table.
 * Throws when iptables cannot be run (the caller warns that apps are unconfined).
 */
export async function ensureInternalGuard(bridge: string): Promise<void> {
  pruned ??= pruneInternalGuards().catch(() => undefined);
  await pruned;
  // Twice at most: `slipway server cleanup --host-firewall` may remove the empty chain between the listing and the write.
  for (let attempt = 0; ; attempt++) {
    const table = await listTable('mangle');
    const present = table.rules.get(INTERNAL_GUARD_CHAIN) ?? [];
    const script: string[] = [];
    if (!table.chains.has(INTERNAL_GUARD_CHAIN)) script.push(`:${INTERNAL_GUARD_CHAIN} - [0:0]`);
    for (const rule of internalGuardRules(bridge)) {
      if (!present.includes(ruleLine(INTERNAL_GUARD_CHAIN, rule))) script.push(ruleLine(INTERNAL_GUARD_CHAIN, rule));
    }
    if (!(table.rules.get('FORWARD') ?? []).includes(ruleLine('FORWARD', ['-j', INTERNAL_GUARD_CHAIN]))) script.push(`-I FORWARD 1 -j ${INTERNAL_GUARD_CHAIN}`);
    try {
      if (script.length > 0) await restoreTable('mangle', script);
      return;
    } catch (err) {
      if (attempt > 0) throw err;
    }
  }
}

/** Removes the rules of `bridge` (its network was removed): every copy (racing installs may have added two). */
export async function removeInternalGuard(bridge: string): Promise<void> {
  for (const rule of internalGuardRules(bridge)) {
    while ((await mangle(['-D', INTERNAL_GUARD_CHAIN, ...rule])).ok);
  }
}

/** The rules of bridges that no longer exist (networks removed while no Slipway ran). Rules are read before bridges: a bridge is made before its rules. */
export async function pruneInternalGuards(): Promise<void> {
  const listed = await mangle(['-S', INTERNAL_GUARD_CHAIN]);
  if (!listed.ok) return;
  const bridges = new Set((await readdir('/sys/class/net').catch(() => [] as string[])).filter((n) => n.startsWith('br-')));
  const rule = new RegExp(`^-A ${INTERNAL_GUARD_CHAIN} (.*\\b(br-[A-Za-z0-9]+)\\b.*)$`);
  for (const text of listed.stdout.split('\n')) {
    const match = rule.exec(text.trim());
    if (match === null || bridges.has(match[2] ?? '')) continue;
    await mangle(['-D', INTERNAL_GUARD_CHAIN, ...(match[1] ?? '').split(' ')]);
  }
}

/** Removes the chain and its jump once no bridge has rules in it (`slipway server cleanup`): the chain's name when removed. */
export async function removeIdleInternalGuard(): Promise<string[]> {
  await pruneInternalGuards();
  const listed = await mangle(['-S', INTERNAL_GUARD_CHAIN]);
  if (!listed.ok || listed.stdout.split('\n').some((l) => l.startsWith('-A '))) return [];
  while ((await mangle(['-D', ...JUMP])).ok);
  if ((await mangle(['-X', INTERNAL_GUARD_CHAIN])).ok) return [INTERNAL_GUARD_CHAIN];
  // A bridge was guarded meanwhile (its rules keep the chain): its jump back.
  await mangle(['-I', 'FORWARD', '1', '-j', INTERNAL_GUARD_CHAIN]);
  return [];
}
