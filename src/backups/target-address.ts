// The private-address rule for outbound targets (decisions §20): an endpoint whose host resolves to a loopback, private, link-local or metadata address is refused unless allowed.
import dns from 'node:dns/promises';
import net from 'node:net';
import { isPrivateAddress } from '../core/private-address.js';

/** Time to resolve a host name. */
const RESOLVE_TIMEOUT_MS = 10_000;

/**
 * Resolves the host of `url` and returns undefined when it may be reached, or why not: a host that
 * does not resolve, or one with any address in a refused range (unless `allowPrivate`:
 * SLIPWAY_ALLOW_PRIVATE_TARGETS). Checked after DNS resolution, at every use.
 */
export async function refusedTarget(url: URL, allowPrivate: boolean): Promise<string | undefined> {
  const host = url.hostname.replace(/^\[|\]$/g, '');
  let addresses: string[];
  if (net.isIP(host) !== 0) addresses = [host];
  else {
    try {
      const found = await Promise.race([
        dns.lookup(host, { all: true, verbatim: true }),
        new Promise<never>((_, reject) => setTimeout(() => reject(new Error('timed out')), RESOLVE_TIMEOUT_MS).unref()),
      ]);
      addresses = found.map((a) => a.address);
    } catch (err) {
      return `the host ${host} does not resolve (${err instanceof Error ? err.message : String(err)})`;
    }
  }
  if (allowPrivate) return undefined;
  const refused = addresses.find((a) => isPrivateAddress(a));
  if (refused !== undefined) {
    return `the host ${host} resolves to ${refused}, a loopback, private, link-local or metadata address (a server that should reach it is started with SLIPWAY_ALLOW_PRIVATE_TARGETS=true)`;
  }
  return undefined;
}
