// Which IP addresses are off limits for fetches made on a user's behalf (git hosts, image registries).
import net from 'node:net';

/** IPv4 ranges no user-directed fetch may reach: [network, prefix length]. */
export const PRIVATE_IPV4_RANGES: readonly (readonly [string, number])[] = [
  ['0.0.0.0', 8], // "this" network, unspecified
  ['10.0.0.0', 8],
  ['100.64.0.0', 10], // CGNAT
  ['127.0.0.0', 8],
  ['169.254.0.0', 16], // link-local, cloud metadata
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.0.2.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['198.51.100.0', 24],
  ['203.0.113.0', 24],
  ['224.0.0.0', 4], // multicast
  ['240.0.0.0', 4], // reserved, broadcast
];

const BLOCKED = new net.BlockList();
for (const [address, prefix] of PRIVATE_IPV4_RANGES) BLOCKED.addSubnet(address, prefix, 'ipv4');
for (const [address, prefix] of [
  ['::', 128], // unspecified
  ['::1', 128],
  ['::', 96], // IPv4-compatible (deprecated)
  ['100::', 64], // discard
  ['2001:db8::', 32], // documentation
  ['fc00::', 7], // unique local
  ['fe80::', 10], // link-local
  ['fec0::', 10], // site-local (deprecated)
  ['ff00::', 8], // multicast
] as const) {
  BLOCKED.addSubnet(address, prefix, 'ipv6');
}

/** The IPv4 address embedded in an IPv4-mapped (::ffff:0:0/96) or NAT64 (64:ff9b::/96) address, if any. */
function embeddedIpv4(address: string): string | undefined {
  const match = /^(?:::ffff:|64:ff9b::)(?:(\d+\.\d+\.\d+\.\d+)|([0-9a-f]{1,4}):([0-9a-f]{1,4}))$/i.exec(address);
  if (match === null) return undefined;
  if (match[1] !== undefined) return match[1];
  const high = Number.parseInt(match[2] ?? '0', 16);
  const low = Number.parseInt(match[3] ?? '0', 16);
  return [high >> 8, high & 255, low >> 8, low & 255].join('.');
}

/** True for loopback, private, link-local, unique-local, CGNAT, unspecified, multicast and reserved addresses. */
export function isPrivateAddress(address: string): boolean {
  const family = net.isIP(address);
  if (family === 4) return BLOCKED.check(address, 'ipv4');
  if (family !== 6) return true; // not an address at all: refuse rather than guess
  const v4 = embeddedIpv4(address);
  if (v4 !== undefined) return BLOCKED.check(v4, 'ipv4');
  return BLOCKED.check(address, 'ipv6');
}
