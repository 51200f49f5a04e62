// The host side of a confined build: a firewall for build bridges, and a pids-limited cgroup per build.
//
// The classic builder runs each RUN step in a container on the network named by `networkmode`.
// A user-defined bridge alone still routes to the host (its gateway address), to the host's
// private networks and to whatever the host can reach; the rules below drop all of that for every
// bridge whose interface name starts with BUILD_BRIDGE_PREFIX (refused at once, never silently dropped),
// leaving the internet (and DNS to the host's own nameservers) reachable. The builder has no pids limit of its own: each build's RUN
// containers are placed under a parent cgroup whose pids.max bounds them together.
import crypto from 'node:crypto';
import { mkdir, readFile, readdir, rmdir, stat, writeFile } from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { PRIVATE_IPV4_RANGES } from '../../core/private-address.js';
import { removeIdleInternalGuard } from './internal-guard.js';
import { listTable, restoreTable, ruleLine, runIptables } from './iptables-table.js';

/** Linux interface names of build bridges start with this (the rules match `slpb+`). */
export const BUILD_BRIDGE_PREFIX = 'slpb';
/** The chains holding Slipway's build rules: forwarded traffic and traffic to the host itself. */
const FORWARD_CHAIN = 'SLIPWAY-BUILD';
const INPUT_CHAIN = 'SLIPWAY-BUILD-IN';
/** How a build's refused packet is answered (as `iptables -S` prints it). */
const REJECT = ['-j', 'REJECT', '--reject-with', 'icmp-port-unreachable'];

/** The Linux bridge interface of a build network (at most 15 characters, starting `slpb`). */
export function buildBridgeName(networkName: string): string {
  return `${BUILD_BRIDGE_PREFIX}${crypto.createHash('sha256').update(networkName).digest('hex').slice(0, 11)}`;
}

async function must(args: string[]): Promise<void> {
  const result = await runIptables(args);
  if (!result.ok) throw new Error(`iptables ${args.join(' ')}: ${result.stderr}`);
}

/** IPv4 nameservers of the host (resolv.conf), which the engine's DNS forwards build lookups to. */
async function hostNameservers(): Promise<string[]> {
  const text = await readFile('/etc/resolv.conf', 'utf8').catch(() => '');
  const found = [...text.matchAll(/^\s*nameserver\s+(\S+)/gm)].map((m) => m[1] ?? '');
  return found.filter((a) => net.isIPv4(a) && !a.startsWith('127.'));
}

/**
 * Installs (idempotently) the rules that confine every build bridge: nothing from a `slpb*`
 * interface reaches the host itself or a loopback/private/link-local/CGNAT/reserved IPv4
 * destination (refused with an ICMP error, so the RUN step fails at once), except DNS to the
 * host's nameservers. Throws when iptables cannot be run (not root,
 * not installed): the caller fails the build rather than build unconfined.
 */
export async function ensureBuildFirewall(): Promise<void> {
  const nameservers = await hostNameservers();
  const bridges = `${BUILD_BRIDGE_PREFIX}+`;
  // One listing per chain; a rule is present when its `-S` line is (the rules below are written
  // in the form iptables prints them). Checking costs four processes when nothing is missing.
  const forward = await listChain(FORWARD_CHAIN, true);
  const input = await listChain(INPUT_CHAIN, true);
  // Rules are only ever added, never flushed and rewritten, so no build sees the chains empty.
  // The DNS exceptions go first, the drops after them.
  const dns: string[][] = nameservers.flatMap((ns) =>
    ['udp', 'tcp'].map((proto) => ['-d', `${ns}/32`, '-p', proto, '-m', proto, '--dport', '53', '-j', 'RETURN']),
  );
  for (const [chain, present] of [[FORWARD_CHAIN, forward], [INPUT_CHAIN, input]] as const) {
    for (const rule of dns) if (!present.has(ruleLine(chain, rule))) await must(['-I', chain, '1', ...rule]);
  }
  // Refused with an ICMP error, not dropped: a RUN step's connection fails at once ("Connection
  // refused") instead of after the kernel's 2 min 15 s of SYN retries. The DROP rules an older
  // Slipway appended are removed once their REJECT follows them, so no moment is unconfined.
  for (const [address, prefix] of PRIVATE_IPV4_RANGES) {
    const match = ['-d', `${address}/${prefix}`];
    if (!forward.has(ruleLine(FORWARD_CHAIN, [...match, ...REJECT]))) await must(['-A', FORWARD_CHAIN, ...match, ...REJECT]);
    if (forward.has(ruleLine(FORWARD_CHAIN, [...match, '-j', 'DROP']))) await runIptables(['-D', FORWARD_CHAIN, ...match, '-j', 'DROP']);
  }
  if (!input.has(ruleLine(INPUT_CHAIN, REJECT))) await must(['-A', INPUT_CHAIN, ...REJECT]);
  if (input.has(ruleLine(INPUT_CHAIN, ['-j', 'DROP']))) await runIptables(['-D', INPUT_CHAIN, '-j', 'DROP']);
  // DOCKER-USER is where the engine lets operators filter forwarded container traffic; it exists
  // once the engine has started with iptables enabled.
  for (const [chain, target] of [['DOCKER-USER', FORWARD_CHAIN], ['INPUT', INPUT_CHAIN]] as const) {
    const jump = ['-i', bridges, '-j', target];
    if (!(await listChain(chain, false)).has(ruleLine(chain, jump))) await must(['-I', chain, '1', ...jump]);
  }
}

/** Link-local addresses: cloud metadata services (169.254.169.254) answer there. */
const LINK_LOCAL = '169.254.0.0/16';

/** The chains every app bridge's own chains hang from: one jump each from DOCKER-USER and INPUT. */
const APPS_FORWARD_CHAIN = 'SLIPWAY-APPS';
const APPS_INPUT_CHAIN = 'SLIPWAY-APPS-IN';
/** Interface names of user-defined bridges: the engine names them `br-<network id>`. */
const APP_BRIDGES = 'br-+';

/** The per-bridge chains of an app bridge (their names carry a hash of the interface name). */
function appChains(bridge: string): { forward: string; input: string } {
  const tag = crypto.createHash('sha256').update(bridge).digest('hex').slice(0, 10);
  return { forward: `SLIPWAY-APP-${tag}`, input: `SLIPWAY-APP-${tag}-IN` };
}

/**
 * Installs (idempotently) the rules that confine the app network on bridge interface `bridge`: its
 * containers keep the internet and the host's networks (a database on the LAN), but reach no
 * link-local address (cloud metadata and its credentials) and open no connection to the host
 * itself, except DNS and `hostPorts` (the edge's public ports: apps call each other and the API by
 * their public URLs). Replies to connections the host opened (the edge reaching the app, health
 * checks) pass. Rules match the interface, never the subnet: the engine hands a removed network's
 * subnet to the next network it creates, while a bridge's name carries its network's id. When the
 * wanted rules differ from a chain's (other ports after a restart), the chain is rewritten.
 *
 * The bridge's chains hang from SLIPWAY-APPS(-IN), which DOCKER-USER and INPUT enter with one rule
 * for all `br-*` interfaces: every other packet the host receives (all loopback traffic: the
 * edge, tunnels) passes one rule, not one per app network. Rules of bridges that no longer exist
 * are removed (see pruneAppFirewalls).
 */
export function ensureAppFirewall(bridge: string, hostPorts: readonly number[]): Promise<void> {
  // One at a time in this process: two new networks at once would both find a dispatch jump missing.
  const turn = appFirewallQueue.then(() => installAppFirewall(bridge, hostPorts));
  appFirewallQueue = turn.catch(() => undefined);
  return turn;
}

let appFirewallQueue: Promise<unknown> = Promise.resolve();

/**
 * One listing of the filter table, then whatever is missing written in one `iptables-restore`
 * transaction (two processes for a new network, not a score: a new database's network is on the
 * path to its first login). A chain whose rules differ is declared again, which empties it within
 * the same transaction before its rules are appended.
 */
async function installAppFirewall(bridge: string, hostPorts: readonly number[]): Promise<void> {
  pruned ??= pruneAppFirewalls().catch(() => undefined);
  await pruned;
  // Chains of their own per bridge: installations on one host (other ports) never rewrite each other's.
  const { forward: forwardChain, input: inputChain } = appChains(bridge);
  const replies = ['-m', 'conntrack', '--ctstate', 'RELATED,ESTABLISHED', '-j', 'RETURN'];
  const forward = [replies, ['-d', LINK_LOCAL, '-j', 'DROP']];
  const input = [
    replies,
    ...['udp', 'tcp'].map((proto) => ['-p', proto, '-m', proto, '--dport', '53', '-j', 'RETURN']),
    ...[...new Set(hostPorts)].filter((p) => p > 0).map((port) => ['-p', 'tcp', '-m', 'tcp', '--dport', String(port), '-j', 'RETURN']),
    ['-j', 'DROP'],
  ];
  const table = await listTable('filter');
  const script: string[] = [];
  for (const [chain, rules] of [[forwardChain, forward], [inputChain, input]] as const) {
    const present = table.rules.get(chain) ?? [];
    const wanted = rules.map((rule) => ruleLine(chain, rule));
    if (table.chains.has(chain) && present.length === wanted.length && present.every((line, i) => line === wanted[i])) continue;
    script.push(`:${chain} - [0:0]`, ...wanted);
  }
  // SLIPWAY-APPS(-IN), entered from DOCKER-USER and INPUT by every packet from a `br-*` interface.
  for (const [parent, chain] of [['DOCKER-USER', APPS_FORWARD_CHAIN], ['INPUT', APPS_INPUT_CHAIN]] as const) {
    if (!table.chains.has(parent)) throw new Error(`iptables: no chain ${parent} in the filter table`);
    if (!table.chains.has(chain)) script.push(`:${chain} - [0:0]`);
    const jump = ['-i', APP_BRIDGES, '-j', chain];
    if (!(table.rules.get(parent) ?? []).includes(ruleLine(parent, jump))) script.push(`-I ${parent} 1 ${jump.join(' ')}`);
  }
  for (const [chain, target] of [[APPS_FORWARD_CHAIN, forwardChain], [APPS_INPUT_CHAIN, inputChain]] as const) {
    const jump = ruleLine(chain, ['-i', bridge, '-j', target]);
    if (!(table.rules.get(chain) ?? []).includes(jump)) script.push(jump);
  }
  if (script.length > 0) await restoreTable('filter', script);
}

/** SLIPWAY-APPS(-IN), entered from DOCKER-USER and INPUT by every packet from a `br-*` interface. */
async function ensureAppDispatch(): Promise<void> {
  for (const [parent, chain] of [['DOCKER-USER', APPS_FORWARD_CHAIN], ['INPUT', APPS_INPUT_CHAIN]] as const) {
    await listChain(chain, true);
    const jump = ['-i', APP_BRIDGES, '-j', chain];
    if (!(await listChain(parent, false)).has(ruleLine(parent, jump))) await must(['-I', parent, '1', ...jump]);
  }
}

/** Removes the app firewall of bridge `bridge` (its network is being removed): its jumps, then its chains. */
export async function removeAppFirewall(bridge: string): Promise<void> {
  const { forward, input } = appChains(bridge);
  for (const [chain, target] of [[APPS_FORWARD_CHAIN, forward], [APPS_INPUT_CHAIN, input]] as const) {
    await runIptables(['-D', chain, '-i', bridge, '-j', target]);
  }
  for (const chain of [forward, input]) {
    await runIptables(['-F', chain]);
    await runIptables(['-X', chain]);
  }
}

/** The prune of this process (ensureAppFirewall runs it once). */
let pruned: Promise<void> | undefined;

/**
 * Removes the rules and chains of app bridges that no longer exist (networks removed while
 * no Slipway ran, or by an installation that was deleted), and moves jumps an older Slipway put
 * straight into DOCKER-USER and INPUT (one per bridge, walked by every packet) into the dispatch
 * chains. Only `br-*` jumps into `SLIPWAY-APP-*` chains are touched: never another program's rules.
 */
export async function pruneAppFirewalls(): Promise<void> {
  const jumpLine = /^-A (DOCKER-USER|INPUT|SLIPWAY-APPS|SLIPWAY-APPS-IN) -i (br-[A-Za-z0-9]+) -j (SLIPWAY-APP-[0-9a-f]{10}(?:-IN)?)$/;
  // The chains of gone bridges, as their jumps name them.
  const stale = new Set<string>();
  const bridges = await liveBridges();
  let dispatch: Promise<void> | undefined;
  for (const parent of ['DOCKER-USER', 'INPUT', APPS_FORWARD_CHAIN, APPS_INPUT_CHAIN]) {
    const lines = await listChain(parent, false).catch(() => new Set<string>());
    for (const line of lines) {
      const match = jumpLine.exec(line);
      if (match === null) continue;
      const [, chain, bridge, target] = match as unknown as [string, string, string, string];
      const gone = !bridges.has(bridge);
      if (gone) stale.add(target);
      const old = chain === 'DOCKER-USER' || chain === 'INPUT';
      if (old && !gone) {
        await (dispatch ??= ensureAppDispatch());
        const into = chain === 'INPUT' ? APPS_INPUT_CHAIN : APPS_FORWARD_CHAIN;
        if (!(await listChain(into, false)).has(ruleLine(into, ['-i', bridge, '-j', target]))) await must(['-A', into, '-i', bridge, '-j', target]);
      }
      if (old || gone) await runIptables(['-D', chain, '-i', bridge, '-j', target]);
    }
  }
  // Chains no jump names any more (an older Slipway removed jumps, never chains): those whose tag is
  // no live bridge's. A bridge being confined right now exists already, so its chains are kept.
  const live = new Set([...(await liveBridges())].map((name) => appChains(name).forward));
  const all = (await runIptables(['-S'])).stdout;
  for (const [, chain, forward] of all.matchAll(/^-N ((SLIPWAY-APP-[0-9a-f]{10})(?:-IN)?)$/gm)) {
    if (chain !== undefined && forward !== undefined && !live.has(forward)) stale.add(chain);
  }
  for (const chain of stale) {
    await runIptables(['-F', chain]);
    await runIptables(['-X', chain]);
  }
}

/** The `br-*` interfaces that exist now. */
async function liveBridges(): Promise<Set<string>> {
  return new Set((await readdirSafe('/sys/class/net')).filter((name) => name.startsWith('br-')));
}


/** The `-S` lines of a chain; with `create`, a missing chain is created (and is empty). */
async function listChain(chain: string, create: boolean): Promise<Set<string>> {
  const listing = await runIptables(['-S', chain]);
  if (listing.ok) return new Set(listing.stdout.split('\n').map((l) => l.trim()));
  if (!create) throw new Error(`iptables -S ${chain}: ${listing.stderr}`);
  const created = await runIptables(['-N', chain]);
  if (!created.ok && !/exists/i.test(created.stderr)) throw new Error(`iptables -N ${chain}: ${created.stderr}`);
  return create && created.ok ? new Set() : listChain(chain, false);
}

/** Where the cgroup filesystem is mounted. */
const CGROUP_ROOT = '/sys/fs/cgroup';

/**
 * A parent cgroup for one build (cgroupfs driver): the engine creates each RUN container's cgroup
 * below it, and its pids.max bounds them all. `cgroupParent` is what the build API takes.
 */
export interface BuildCgroup {
  readonly cgroupParent: string;
  remove(): Promise<void>;
}

/**
 * Creates `/slipway-builds/<name>` with pids.max = `pidsLimit` in the pids hierarchy (cgroup v1:
 * /sys/fs/cgroup/pids/…; v2: /sys/fs/cgroup/…). Throws when the cgroup filesystem is not
 * writable here (not root, or the engine on another machine).
 */
export async function createBuildCgroup(name: string, pidsLimit: number, cgroupVersion: '1' | '2'): Promise<BuildCgroup> {
  const relative = path.posix.join('/slipway-builds', name);
  const pidsRoot = cgroupVersion === '1' ? path.join(CGROUP_ROOT, 'pids') : CGROUP_ROOT;
  if (cgroupVersion === '2') {
    // The parent must hand the pids controller down to its children.
    await mkdir(path.join(CGROUP_ROOT, 'slipway-builds'), { recursive: true });
    await writeFile(path.join(CGROUP_ROOT, 'slipway-builds', 'cgroup.subtree_control'), '+pids').catch(() => undefined);
  }
  const dir = path.join(pidsRoot, relative);
  await mkdir(dir, { recursive: true });
  await writeFile(path.join(dir, 'pids.max'), String(pidsLimit));
  return {
    cgroupParent: relative,
    async remove() {
      // The engine made the same path in every hierarchy (v1); each goes once its containers have.
      const roots = cgroupVersion === '1' ? (await readdirSafe(CGROUP_ROOT)).map((h) => path.join(CGROUP_ROOT, h)) : [CGROUP_ROOT];
      for (const root of roots) await removeWhenEmpty(path.join(root, relative));
    },
  };
}

async function readdirSafe(dir: string): Promise<string[]> {
  return readdir(dir).catch(() => []);
}

/** How long a leftover build cgroup must have existed before a later build sweeps it away. */
const STALE_CGROUP_MS = 25 * 3600_000; // longer than the longest build time limit (24 h)

/**
 * rmdir, retried while the engine is still removing the build's last container: a few times at
 * once, then in the background for a minute (a cancelled build's container can take that long).
 */
async function removeWhenEmpty(dir: string): Promise<void> {
  const attempt = async (): Promise<'done' | 'busy'> => {
    try {
      await rmdir(dir);
      return 'done';
    } catch (err) {
      return (err as NodeJS.ErrnoException).code === 'EBUSY' ? 'busy' : 'done';
    }
  };
  for (let i = 0; i < 10; i++) {
    if ((await attempt()) === 'done') return;
    await sleep(100);
  }
  let left = 60;
  const retry = (): void => {
    void attempt().then((result) => {
      if (result === 'busy' && --left > 0) setTimeout(retry, 1000).unref();
    });
  };
  setTimeout(retry, 1000).unref();
}

/**
 * Removes build cgroups left behind (a crash, or a container the engine removed after the last
 * retry). Only empty ones older than any build go: the kernel refuses to remove a cgroup
 * that still holds processes or children, and the age keeps a build that has not started its
 * first RUN step yet from losing its limit.
 */
export async function sweepBuildCgroups(cgroupVersion: '1' | '2'): Promise<void> {
  const roots = cgroupVersion === '1' ? (await readdirSafe(CGROUP_ROOT)).map((h) => path.join(CGROUP_ROOT, h)) : [CGROUP_ROOT];
  for (const root of roots) {
    const parent = path.join(root, 'slipway-builds');
    for (const name of await readdirSafe(parent)) {
      if (!/^[0-9a-f]{16}$/.test(name)) continue;
      const dir = path.join(parent, name);
      const info = await stat(dir).catch(() => null);
      if (info === null || !info.isDirectory() || Date.now() - info.ctimeMs < STALE_CGROUP_MS) continue;
      await rmdir(dir).catch(() => undefined);
    }
  }
}

/**
 * Removes Slipway's host-wide chains when nothing on this host uses them any more: the app
 * dispatch chains (SLIPWAY-APPS, SLIPWAY-APPS-IN) once no app bridge has chains of its own, the
 * build chains (SLIPWAY-BUILD, SLIPWAY-BUILD-IN) once no build bridge (`slpb*`) exists. Chains of
 * app bridges that are gone are removed first. Resolves with the chains removed. Used by
 * `slipway server cleanup`, never by a running server: another installation on the host may be
 * about to use them.
 */
export async function removeIdleHostFirewall(): Promise<string[]> {
  await pruneAppFirewalls();
  const removed: string[] = [];
  const all = (await runIptables(['-S'])).stdout;
  const exists = (chain: string): boolean => new RegExp(`^-N ${chain}$`, 'm').test(all);
  const drop = async (pairs: readonly (readonly [string, string, string])[]): Promise<void> => {
    for (const [parent, match, chain] of pairs) {
      if (!exists(chain)) continue;
      // Every copy of the jump (a rule inserted twice by racing starts included).
      while ((await runIptables(['-D', parent, '-i', match, '-j', chain])).ok);
      await runIptables(['-F', chain]);
      if ((await runIptables(['-X', chain])).ok) removed.push(chain);
    }
  };
  if (!/^-N SLIPWAY-APP-[0-9a-f]{10}/m.test(all)) {
    await drop([['DOCKER-USER', APP_BRIDGES, APPS_FORWARD_CHAIN], ['INPUT', APP_BRIDGES, APPS_INPUT_CHAIN]]);
  }
  const buildBridges = (await readdirSafe('/sys/class/net')).filter((name) => name.startsWith(BUILD_BRIDGE_PREFIX));
  if (buildBridges.length === 0) {
    await drop([['DOCKER-USER', `${BUILD_BRIDGE_PREFIX}+`, FORWARD_CHAIN], ['INPUT', `${BUILD_BRIDGE_PREFIX}+`, INPUT_CHAIN]]);
  }
  removed.push(...(await removeIdleInternalGuard()));
  return removed;
}
