// API key use-cases: create (shown once), list, revoke.
import crypto from 'node:crypto';
import type { Db } from '../db/database.js';
import { nowIso } from '../db/database.js';
import type { ApiKeysTable } from '../db/schema.js';
import { DomainError } from '../core/errors.js';
import type { Principal } from '../core/principal.js';
import { authorizeOwned } from './policy.js';
import { newApiKey, sha256Hex } from '../core/credentials.js';
import { pageFromRows, type Page, type PageRequest } from '../core/page.js';
import type { KeyUsage } from './key-usage.js';

export interface ApiKeyView {
  id: string;
  name: string;
  key_prefix: string;
  created_at: string;
  last_used_at: string | null;
}

/** Characters of the key kept in clear for identification (decisions §3). */
export const KEY_PREFIX_LENGTH = 12;

const presentKey = (row: Pick<ApiKeysTable, keyof ApiKeyView>): ApiKeyView => ({
  id: row.id,
  name: row.name,
  key_prefix: row.key_prefix,
  created_at: row.created_at,
  last_used_at: row.last_used_at,
});

/** Creates a key for the caller. The full key is in this answer only; only its SHA-256 is stored. */
export async function createApiKey(db: Db, principal: Principal, input: { name: string }): Promise<{ api_key: ApiKeyView; key: string }> {
  const name = input.name.trim();
  if (name.length < 1 || name.length > 100) {
    throw new DomainError('validation_error', 'name must be 1 to 100 characters');
  }
  const key = newApiKey();
  const row: ApiKeysTable = {
    id: crypto.randomUUID(),
    user_id: principal.userId,
    name,
    key_prefix: key.slice(0, KEY_PREFIX_LENGTH),
    key_hash: sha256Hex(key),
    created_at: nowIso(),
    last_used_at: null,
  };
  await db.insertInto('api_keys').values(row).execute();
  return { api_key: presentKey(row), key };
}

/** A position in the list of keys: (created_at, id); the id orders keys created in the same millisecond. */
export type ApiKeyPosition = readonly [createdAt: string, id: string];

/**
 * A page of the caller's keys, newest first (ties in `created_at` by id); `last_used_at` includes
 * uses not yet written. Keyset on (created_at, id): a page starts after the previous one's last key.
 */
export async function listApiKeys(db: Db, keyUsage: KeyUsage, principal: Principal, page: PageRequest<ApiKeyPosition>): Promise<Page<ApiKeyView, ApiKeyPosition>> {
  let query = db
    .selectFrom('api_keys')
    .select(['id', 'name', 'key_prefix', 'created_at', 'last_used_at'])
    .where('user_id', '=', principal.userId);
  const after = page.after;
  if (after !== undefined) {
    const [createdAt, id] = after;
    query = query.where((eb) => eb.or([eb('created_at', '<', createdAt), eb.and([eb('created_at', '=', createdAt), eb('id', '>', id)])]));
  }
  const rows = await query.orderBy('created_at', 'desc').orderBy('id').limit(page.limit + 1).execute();
  const keys = pageFromRows(rows, page.limit, (row) => [row.created_at, row.id] as const);
  return { items: keys.items.map((row) => presentKey({ ...row, last_used_at: keyUsage.unwritten(row.id) ?? row.last_used_at })), next: keys.next };
}

/** Revokes one of the caller's keys; `onRevoked` closes what the key had open (its tunnels). */
export async function deleteApiKey(
  db: Db,
  principal: Principal,
  id: string,
  onRevoked: (apiKeyId: string) => void,
): Promise<void> {
  const row = await db.selectFrom('api_keys').selectAll().where('id', '=', id).executeTakeFirst();
  authorizeOwned(principal, row, 'API key');
  await db.deleteFrom('api_keys').where('id', '=', id).execute();
  onRevoked(id);
}
