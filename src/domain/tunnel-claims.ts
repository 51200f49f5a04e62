// Tunnel authority backed by the database: API-key authentication and subdomain claims.
import type { Db } from '../db/database.js';
import { isUniqueViolation, nowIso } from '../db/database.js';
import { authenticateBearer } from './accounts.js';
import type { KeyUsage } from './key-usage.js';
import { normalizeSubdomain } from '../core/dns-label.js';
import { DomainError } from '../core/errors.js';
import { API_KEY_PATTERN } from '../core/credentials.js';

export interface TunnelOwner {
  userId: string;
  apiKeyId: string;
}

/** Authenticates a tunnel client: API keys only (session tokens are refused). Sets last_used_at. */
export async function authenticateTunnelKey(db: Db, keyUsage: KeyUsage, key: string): Promise<TunnelOwner | null> {
  if (!API_KEY_PATTERN.test(key)) return null;
  try {
    const principal = await authenticateBearer(db, keyUsage, key);
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
  db: Db,
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
  try {
    return await db.transaction().execute(async (trx) => {
      // One table of claims holds deployments and tunnels; its primary key settles races.
      const held = await trx.selectFrom('subdomain_claims').select(['kind', 'owner_id', 'user_id']).where('subdomain', '=', label).executeTakeFirst();
      if (held !== undefined && (held.kind !== 'tunnel' || held.user_id !== owner.userId)) return 'taken' as const;
      if (held !== undefined) {
        await trx.deleteFrom('subdomain_claims').where('subdomain', '=', label).execute();
        await trx.deleteFrom('tunnels').where('id', '=', held.owner_id).execute();
      }
      const now = nowIso();
      await trx
        .insertInto('subdomain_claims')
        .values({ subdomain: label, kind: 'tunnel', owner_id: tunnelId, user_id: owner.userId, created_at: now })
        .execute();
      await trx
        .insertInto('tunnels')
        .values({ id: tunnelId, user_id: owner.userId, api_key_id: owner.apiKeyId, subdomain: label, connected_at: now, runner })
        .execute();
      return 'ok' as const;
    });
  } catch (err) {
    if (isUniqueViolation(err)) return 'taken';
    throw err;
  }
}

/** Releases a tunnel's claim, if it still holds it. */
export async function releaseTunnelSubdomain(db: Db, subdomain: string, tunnelId: string): Promise<void> {
  await db.transaction().execute(async (trx) => {
    await trx.deleteFrom('subdomain_claims').where('subdomain', '=', subdomain.toLowerCase()).where('kind', '=', 'tunnel').where('owner_id', '=', tunnelId).execute();
    await trx.deleteFrom('tunnels').where('subdomain', '=', subdomain.toLowerCase()).where('id', '=', tunnelId).execute();
  });
}

/**
 * Start-up: the tunnels this instance held before it stopped are released (a tunnel never outlives
 * its connection); another instance's live tunnels are not touched.
 */
export async function releaseTunnelsOf(db: Db, runner: string): Promise<void> {
  await db.transaction().execute(async (trx) => {
    const mine = trx
      .selectFrom('tunnels')
      .select('id')
      .where((eb) => eb.or([eb('runner', '=', runner), eb('runner', 'is', null)]));
    await trx.deleteFrom('subdomain_claims').where('kind', '=', 'tunnel').where('owner_id', 'in', mine).execute();
    await trx.deleteFrom('tunnels').where((eb) => eb.or([eb('runner', '=', runner), eb('runner', 'is', null)])).execute();
  });
}
