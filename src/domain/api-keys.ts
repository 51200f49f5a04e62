// API key use-cases: create (shown once), list, revoke.
import { actorOf, type AuditEvent, type AuditRecord } from './audit.js';
import crypto from 'node:crypto';
import { nowIso } from '../core/now.js';
import { DomainError } from '../core/errors.js';
import type { Principal } from '../core/principal.js';
import { authorizeOwned } from './policy.js';
import { newApiKey, sha256Hex } from '../core/credentials.js';
import { pageFromRows, type Page, type PageRequest } from '../core/page.js';
import type { KeyUsage, KeyUseWriter } from './key-usage.js';

/** An API key's record: only the key's SHA-256 is kept, and its prefix for identification. */
export interface ApiKeyRow {
  id: string;
  user_id: string;
  name: string;
  key_prefix: string;
  key_hash: string;
  created_at: string;
  last_used_at: string | null;
}

/** A position in the list of keys: (created_at, id); the id orders keys created in the same millisecond. */
export type ApiKeyPosition = readonly [createdAt: string, id: string];

/** The API keys' records; implemented over the database in src/db/api-key-store.ts. */
export interface ApiKeyStore extends KeyUseWriter {
  /** With `audit`, its entry is appended in the same transaction (as for `remove`). */
  create(row: ApiKeyRow, audit?: AuditRecord): Promise<void>;
  /** Up to `limit` of the user's keys after `after`, newest first (ties in `created_at` by id). */
  page(userId: string, after: ApiKeyPosition | undefined, limit: number): Promise<Array<Omit<ApiKeyRow, 'user_id' | 'key_hash'>>>;
  /** Who owns key `id`, if it exists. */
  owner(id: string): Promise<{ user_id: string } | undefined>;
  remove(id: string, audit?: AuditRecord): Promise<void>;
}

export interface ApiKeyView {
  id: string;
  name: string;
  key_prefix: string;
  created_at: string;
  last_used_at: string | null;
}

/** Characters of the key kept in clear for identification (decisions §3). */
export const KEY_PREFIX_LENGTH = 12;

const presentKey = (row: Pick<ApiKeyRow, keyof ApiKeyView>): ApiKeyView => ({
  id: row.id,
  name: row.name,
  key_prefix: row.key_prefix,
  created_at: row.created_at,
  last_used_at: row.last_used_at,
});

/** Creates a key for the caller. The full key is in this answer only; only its SHA-256 is stored. */
export async function createApiKey(keys: ApiKeyStore, principal: Principal, input: { name: string }): Promise<{ api_key: ApiKeyView; key: string }> {
  const name = input.name.trim();
  if (name.length < 1 || name.length > 100) {
    throw new DomainError('validation_error', 'name must be 1 to 100 characters');
  }
  const key = newApiKey();
  const row: ApiKeyRow = {
    id: crypto.randomUUID(),
    user_id: principal.userId,
    name,
    key_prefix: key.slice(0, KEY_PREFIX_LENGTH),
    key_hash: sha256Hex(key),
    created_at: nowIso(),
    last_used_at: null,
  };
  await keys.create(row, { actor: actorOf(principal), event: keyEvent('key.create', row.id) });
  return { api_key: presentKey(row), key };
}

/** The entry of a key's creation or revocation: the key's id, never the key. */
const keyEvent = (action: string, id: string): AuditEvent => ({ action, targetType: 'api_key', targetId: id, teamId: null });

/**
 * A page of the caller's keys, newest first (ties in `created_at` by id); `last_used_at` includes
 * uses not yet written. Keyset on (created_at, id): a page starts after the previous one's last key.
 */
export async function listApiKeys(keys: ApiKeyStore, keyUsage: KeyUsage, principal: Principal, page: PageRequest<ApiKeyPosition>): Promise<Page<ApiKeyView, ApiKeyPosition>> {
  const rows = await keys.page(principal.userId, page.after, page.limit + 1);
  const found = pageFromRows(rows, page.limit, (row) => [row.created_at, row.id] as const);
  return { items: found.items.map((row) => presentKey({ ...row, last_used_at: keyUsage.unwritten(row.id) ?? row.last_used_at })), next: found.next };
}

/** Revokes one of the caller's keys; `onRevoked` closes what the key had open (its tunnels). */
export async function deleteApiKey(
  keys: ApiKeyStore,
  principal: Principal,
  id: string,
  onRevoked: (apiKeyId: string) => void,
): Promise<void> {
  authorizeOwned(principal, await keys.owner(id), 'API key');
  await keys.remove(id, { actor: actorOf(principal), event: keyEvent('key.delete', id) });
  onRevoked(id);
}
