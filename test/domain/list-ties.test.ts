// Keyset pages over real SQLite when many items share a creation time (the same millisecond).
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { openDatabase, type Db } from '../../src/db/database.js';
import { listApiKeys, type ApiKeyPosition } from '../../src/domain/api-keys.js';
import { KeyUsage } from '../../src/domain/key-usage.js';
import { databaseApiKeyStore } from '../../src/db/api-key-store.js';
import type { Principal } from '../../src/core/principal.js';

let db: Db;
let dir: string;
const userId = '00000000-0000-4000-8000-000000000001';
const principal: Principal = { userId, isAdmin: false, via: 'session', sessionId: 's', apiKeyId: undefined };
const SAME = '2026-11-22T10:00:00.000Z';

before(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'slipway-ties-'));
  db = await openDatabase({ file: path.join(dir, 'slipway.db') });
  await db.insertInto('users').values({ id: userId, email: 'u@example.test', password_hash: 'x', is_admin: 0, created_at: SAME, updated_at: SAME }).execute();
  // Seven keys in the same millisecond, ids deliberately out of insertion order, between an older and a newer key.
  const keys: Array<[string, string]> = [
    ['k-old', '2026-11-22T09:59:59.999Z'],
    ...['k5', 'k1', 'k7', 'k3', 'k2', 'k6', 'k4'].map((id): [string, string] => [id, SAME]),
    ['k-new', '2026-11-22T10:00:00.001Z'],
  ];
  for (const [id, created_at] of keys) {
    await db.insertInto('api_keys').values({ id, user_id: userId, name: id, key_prefix: 'slw_k1_x', key_hash: id, created_at, last_used_at: null }).execute();
  }
});
after(async () => {
  await db.destroy();
  fs.rmSync(dir, { recursive: true, force: true });
});

test('keys created in the same millisecond are each listed once, in id order, whatever the page size', async () => {
  const usage = new KeyUsage(databaseApiKeyStore(db));
  const expected = ['k-new', 'k1', 'k2', 'k3', 'k4', 'k5', 'k6', 'k7', 'k-old'];
  for (const limit of [1, 2, 3, 4, 8, 9, 100]) {
    const seen: string[] = [];
    let after: ApiKeyPosition | undefined;
    do {
      const page = await listApiKeys(databaseApiKeyStore(db), usage, principal, { limit, after });
      assert.ok(page.items.length <= limit);
      seen.push(...page.items.map((k) => k.id));
      after = page.next;
    } while (after !== undefined);
    assert.deepEqual(seen, expected, `limit ${limit}`);
  }
  await usage.close();
});

test('a key deleted at the page boundary (tied with the ones after it) skips none of them', async () => {
  const usage = new KeyUsage(databaseApiKeyStore(db));
  const first = await listApiKeys(databaseApiKeyStore(db), usage, principal, { limit: 3, after: undefined });
  assert.deepEqual(first.items.map((k) => k.id), ['k-new', 'k1', 'k2']);
  await db.deleteFrom('api_keys').where('id', '=', 'k2').execute();
  const second = await listApiKeys(databaseApiKeyStore(db), usage, principal, { limit: 100, after: first.next });
  assert.deepEqual(second.items.map((k) => k.id), ['k3', 'k4', 'k5', 'k6', 'k7', 'k-old']);
  await usage.close();
});
