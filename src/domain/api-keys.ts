// API key use-cases: create (shown once), list, revoke.
import crypto from 'node:crypto';
import type { Db } from '../db/database.js';
import { nowIso } from '../db/database.js';
import type { ApiKeysTable } from '../db/schema.js';
import { DomainError } from '../core/errors.js';
import { authorizeOwned, type Principal } from '../core/principal.js';
import { newApiKey, sha256Hex } from '../core/credentials.js';
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

const presentKey = (row: ApiKeysTable): ApiKeyView => ({
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

/** The caller's keys, newest first; `last_used_at` includes uses not yet written. */
export async function listApiKeys(db: Db, keyUsage: KeyUsage, principal: Principal): Promise<ApiKeyView[]> {
  const rows = await db
    .selectFrom('api_keys')
    .selectAll()
    .where('user_id', '=', principal.userId)
    .orderBy('created_at', 'desc')
    .orderBy('id')
    .execute();
  return rows.map((row) => presentKey({ ...row, last_used_at: keyUsage.unwritten(row.id) ?? row.last_used_at }));
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
