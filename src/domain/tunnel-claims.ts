// Tunnel authority: API-key authentication and subdomain claims, over a claim store.
import type { Principal } from '../core/principal.js';
import { normalizeSubdomain } from '../core/dns-label.js';
import { DomainError } from '../core/errors.js';
import { API_KEY_PATTERN } from '../core/credentials.js';

export interface TunnelOwner {
  userId: string;
  apiKeyId: string;
}

/** A live tunnel's claim on a subdomain. */
export interface TunnelClaim {
  /** The subdomain, a valid lower-case label. */
  subdomain: string;
  tunnelId: string;
  owner: TunnelOwner;
  /** The control-plane instance the tunnel is connected to. */
  runner: string;
}

/** Where a live tunnel is held: the instance its client is connected to (`runner`). */
export interface TunnelHolder {
  readonly subdomain: string;
  readonly tunnelId: string;
  readonly runner: string | null;
  readonly userId: string;
  readonly apiKeyId: string;
  readonly connectedAt: string;
}

/**
 * Tunnels and the subdomains they hold; implemented over the database in src/db/tunnel-claim-store.ts.
 * Deployments and tunnels share one set of subdomain claims, so a subdomain has one holder.
 */
export interface TunnelClaimStore {
  /**
   * Records the claim in one transaction: `taken` if a deployment or another user's tunnel holds the
   * subdomain (or wins a race for it); the same user's earlier tunnel of that name is replaced (reconnect).
   */
  claim(claim: TunnelClaim): Promise<'ok' | 'taken'>;
  /** Drops the tunnel's claim on `subdomain` (lower case), if it still holds it. */
  release(subdomain: string, tunnelId: string): Promise<void>;
  /** Drops every tunnel connected to `runner` (and any whose instance was never recorded). */
  releaseRunner(runner: string): Promise<void>;
  /** Where each live tunnel is held (only `subdomain`'s when given). */
  holders(subdomain?: string): Promise<TunnelHolder[]>;
  /** Drops every tunnel held by an instance not in `live` (lost); returns their subdomains. */
  releaseHeldOutside(live: readonly string[]): Promise<string[]>;
  /** Of the tunnels `runner` holds: the API keys deleted since they connected, and the users disabled since. */
  revokedOwners(runner: string): Promise<{ apiKeyIds: string[]; userIds: string[] }>;
}

/** Authenticates a tunnel client: API keys only (session tokens are refused). Sets last_used_at. */
export async function authenticateTunnelKey(authenticate: (bearer: string) => Promise<Principal>, key: string): Promise<TunnelOwner | null> {
  if (!API_KEY_PATTERN.test(key)) return null;
  try {
    const principal = await authenticate(key);
    return principal.apiKeyId === undefined ? null : { userId: principal.userId, apiKeyId: principal.apiKeyId };
  } catch (err) {
    if (err instanceof DomainError && err.code === 'unauthorized') return null;
    throw err;
  }
}

/**
 * Claims a subdomain for a tunnel. A deployment's subdomain, or another user's live tunnel, makes
 * it 'taken'; the same user's earlier tunnel of that name is replaced (reconnect).
 */
export async function claimTunnelSubdomain(
  claims: TunnelClaimStore,
  runner: string,
  subdomain: string,
  owner: TunnelOwner,
  tunnelId: string,
): Promise<'ok' | 'taken' | 'invalid'> {
  let label: string;
  try {
    label = normalizeSubdomain(subdomain);
  } catch {
    return 'invalid';
  }
  return claims.claim({ subdomain: label, tunnelId, owner, runner });
}

/** Releases a tunnel's claim, if it still holds it. */
export async function releaseTunnelSubdomain(claims: TunnelClaimStore, subdomain: string, tunnelId: string): Promise<void> {
  await claims.release(subdomain.toLowerCase(), tunnelId);
}

/**
 * Start-up: the tunnels this instance held before it stopped are released (a tunnel never outlives
 * its connection); another instance's live tunnels are not touched.
 */
export async function releaseTunnelsOf(claims: TunnelClaimStore, runner: string): Promise<void> {
  await claims.releaseRunner(runner);
}
