// The node guard (decisions §16): a global service whose task, in each node's network namespace, keeps containers off the node's published ports.
import crypto from 'node:crypto';
import net from 'node:net';
import type { ServiceSpec } from './swarm-service.js';

/** The guard's service name: one per swarm, shared by every Slipway instance on it. */
export const GUARD_SERVICE = 'slipway-guard';
/** Marks the guard's service and its tasks' containers (never LABEL_MANAGED nor LABEL_INSTANCE: no sweep, no replica count). */
export const LABEL_GUARD = 'dev.slipway.guard';
/** The hash of the guard's spec as Slipway wrote it: equal means nothing to update. */
export const LABEL_GUARD_SPEC = 'dev.slipway.guard.spec';
/** Where the image holds busybox and iptables (xtables-nft-multi, the nft backend Debian's dockerd uses). */
export const GUARD_BUSYBOX = '/bin/busybox';
export const GUARD_IPTABLES = '/sbin/xtables-nft-multi';
/** Where the image holds the xtables extension modules the rules use (XTABLES_LIBDIR). */
export const GUARD_XTABLES_DIR = '/usr/lib/xtables';
/** How often each task checks its rules again (dockerd rewrites its chains when it restarts or adds a network). */
export const GUARD_EVERY_SECONDS = 15;

const SECOND_NS = 1_000_000_000;

/**
 * The task's program (a fixed text: every value comes from the environment, checked here before use).
 * In the node's namespace it keeps, in chains of its own (`SLWG-<id>` jumped to from DOCKER-USER for
 * what a container sends to another node, `SLWG-<id>-in` from INPUT for what it sends to its own
 * node; `<id>` drawn at random by each task, so two tasks on a node never share one), a DROP of
 * every new TCP connection from docker_gwbridge (the containers' way out) to the node's ephemeral
 * range, where host-mode tasks are published; the forwarded one only towards the swarm's nodes
 * (GUARD_NODES), so apps still reach outside servers on high ports; the same for the ports in
 * GUARD_PORTS (an engine's TCP API, the registry nodes pull from). Once its rules are in, other
 * (older) tasks' chains go; its own go on SIGTERM. Checked again every GUARD_EVERY seconds.
 */
export const GUARD_SCRIPT = `set -f
IPT="\${GUARD_IPTABLES:-${GUARD_IPTABLES}}"
ipt() { "$IPT" iptables "$@"; }
fail() { echo "slipway-guard: $1" >&2; exit 2; }
case "$GUARD_EVERY" in ''|*[!0-9]*) fail 'GUARD_EVERY is not a number';; esac
for a in $GUARD_NODES; do case "$a" in *[!0-9.]*) fail "not an IPv4 address: $a";; esac; done
for p in $GUARD_PORTS; do case "$p" in ''|*[!0-9]*) fail "not a port: $p";; esac; done
# cat, not read: a sysctl file read a byte at a time ends after its first byte.
RANGE=$(cat "\${GUARD_RANGE_FILE:-/proc/sys/net/ipv4/ip_local_port_range}") || fail 'no port range'
set -- $RANGE
LO="\${1:-}"; HI="\${2:-}"
case "$LO" in ''|*[!0-9]*) fail 'bad port range';; esac
case "$HI" in ''|*[!0-9]*) fail 'bad port range';; esac
ID=$(cat /proc/sys/kernel/random/uuid | tr -d '-' | cut -c1-12)
case "$ID" in ''|*[!0-9a-f]*) fail 'no random id';; esac
FWD="SLWG-$ID"
drop_chains() {
  while ipt -D DOCKER-USER -j "$1" 2>/dev/null; do :; done
  while ipt -D INPUT -j "$1-in" 2>/dev/null; do :; done
  ipt -F "$1" 2>/dev/null; ipt -X "$1" 2>/dev/null
  ipt -F "$1-in" 2>/dev/null; ipt -X "$1-in" 2>/dev/null
}
rule() { c="$1"; shift; ipt -C "$c" "$@" 2>/dev/null || { echo "slipway-guard: adding to $c: $*"; ipt -A "$c" "$@"; }; }
jump() { ipt -C "$1" -j "$2" 2>/dev/null || { echo "slipway-guard: $1 jumps to $2"; ipt -I "$1" -j "$2"; }; }
apply() {
  ipt -N "$FWD" 2>/dev/null; ipt -N "$FWD-in" 2>/dev/null
  for p in "$LO:$HI" $GUARD_PORTS; do
    if [ -n "$GUARD_NODES" ]; then
      for a in $GUARD_NODES; do rule "$FWD" -d "$a" -i docker_gwbridge -p tcp --dport "$p" -m conntrack --ctstate NEW -j DROP; done
    else
      rule "$FWD" -i docker_gwbridge -p tcp --dport "$p" -m conntrack --ctstate NEW -j DROP
    fi
    rule "$FWD-in" -i docker_gwbridge -p tcp --dport "$p" -m conntrack --ctstate NEW -j DROP
  done
  jump DOCKER-USER "$FWD"
  jump INPUT "$FWD-in"
}
stop() { drop_chains "$FWD"; echo 'slipway-guard: rules removed'; exit 0; }
trap stop TERM INT
apply
for c in $(ipt -S 2>/dev/null | awk '$1 == "-N" && $2 ~ /^SLWG-[0-9a-f]+$/ { print $2 }'); do
  [ "$c" = "$FWD" ] || { echo "slipway-guard: removing another guard's $c"; drop_chains "$c"; }
done
echo "slipway-guard: containers kept off ports $LO-$HI \${GUARD_PORTS} (nodes: \${GUARD_NODES:-any})"
while :; do
  sleep "$GUARD_EVERY" & wait $!
  apply
done
`;

/** The swarm nodes' addresses the forwarded rule names: IPv4 only (the rules are iptables'), sorted, each once. */
export function guardAddresses(addresses: readonly string[]): string[] {
  return [...new Set(addresses.filter((a) => net.isIPv4(a)))].sort();
}

export interface GuardSpecInputs {
  /** The guard image as nodes pull it (`<registry>/slipway-guard:<content hash>`). */
  readonly image: string;
  /** The swarm's nodes' addresses (guardAddresses). */
  readonly nodes: readonly string[];
  /** More TCP ports of the nodes kept from containers (guardPorts). */
  readonly ports: readonly number[];
}

/** Engine API ports (plain and TLS): root on a node, never for an app. */
export const ENGINE_PORTS: readonly number[] = [2375, 2376];

/**
 * The nodes' ports kept from containers besides the ephemeral range: the engine's TCP API and the
 * port of the registry (where nodes pull every tenant's image from) when its address names one.
 * Privileged ports (below 1024) stay open: the edge's own may be among them.
 */
export function guardPorts(registryAddress: string): number[] {
  const host = registryAddress.split('/')[0] ?? '';
  const port = /:(\d+)$/.exec(host)?.[1];
  const registry = port === undefined ? [] : [Number(port)];
  return [...new Set([...ENGINE_PORTS, ...registry])].filter((p) => Number.isInteger(p) && p >= 1024 && p <= 65535).sort((a, b) => a - b);
}

const sha256 = (text: string): string => crypto.createHash('sha256').update(text).digest('hex');

/**
 * The guard's service spec: one task per node (Mode Global) in the node's own network namespace
 * (the predefined `host` network), with NET_ADMIN and NET_RAW only, restarted whatever ends it,
 * start-first updates (a new task's rules are in before the old one removes its own). Labelled
 * with the hash of everything else in it.
 */
export function guardServiceSpec(inputs: GuardSpecInputs): ServiceSpec {
  for (const address of inputs.nodes) if (!net.isIPv4(address)) throw new Error(`not an IPv4 address: ${address}`);
  for (const port of inputs.ports) if (!Number.isInteger(port) || port < 1 || port > 65535) throw new Error(`not a port: ${port}`);
  const nodes = guardAddresses(inputs.nodes);
  const spec: ServiceSpec = {
    Name: GUARD_SERVICE,
    Labels: { [LABEL_GUARD]: 'true' },
    TaskTemplate: {
      ContainerSpec: {
        Image: inputs.image,
        Labels: { [LABEL_GUARD]: 'true' },
        Command: [GUARD_BUSYBOX, 'sh', '-c', GUARD_SCRIPT],
        Env: [`GUARD_NODES=${nodes.join(' ')}`, `GUARD_PORTS=${[...new Set(inputs.ports)].sort((a, b) => a - b).join(' ')}`, `GUARD_EVERY=${GUARD_EVERY_SECONDS}`, `XTABLES_LIBDIR=${GUARD_XTABLES_DIR}`],
        CapabilityDrop: ['ALL'],
        CapabilityAdd: ['CAP_NET_ADMIN', 'CAP_NET_RAW'],
        StopGracePeriod: 10 * SECOND_NS,
      },
      Networks: [{ Target: 'host' }],
      Resources: { Limits: { MemoryBytes: 64 * 1024 * 1024, Pids: 64 } },
      RestartPolicy: { Condition: 'any', Delay: 2 * SECOND_NS, MaxAttempts: 0 },
      LogDriver: { Name: 'json-file', Options: { 'max-size': '1m', 'max-file': '2' } },
    },
    Mode: { Global: {} },
    UpdateConfig: { Parallelism: 0, Delay: 0, FailureAction: 'continue', Monitor: 5 * SECOND_NS, MaxFailureRatio: 0, Order: 'start-first' },
  };
  return { ...spec, Labels: { ...spec.Labels, [LABEL_GUARD_SPEC]: guardSpecHash(spec) } };
}

/** The hash a guard spec is labelled with: everything in it but that label. */
export function guardSpecHash(spec: ServiceSpec): string {
  const { [LABEL_GUARD_SPEC]: _left, ...labels } = spec.Labels ?? {};
  return sha256(JSON.stringify({ ...spec, Labels: labels })).slice(0, 16);
}
