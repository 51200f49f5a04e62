// API tests: API key use (`last_used_at`) is recorded off the request path, shown at once, and written on close.
// SQLite only (it reads the database file after the server is gone); the coalescing itself is unit-tested in test/domain/key-usage.test.ts.
import assert from 'node:assert/strict';
import path from 'node:path';
import { test } from 'node:test';
import Database from 'better-sqlite3';
import { startTestServer } from '../helpers/server.js';

test('the last use of a key is shown at once and is what the database holds after the server closes', async () => {
  const s = await startTestServer();
  let closed = false;
  try {
    const user = await s.newUser('keyuse');
    const keyId = (await s.request('GET', '/api/v1/api-keys', { token: user.token })).json[0].id as string;
    assert.equal((await s.request('GET', '/api/v1/users/me', { token: user.apiKey })).status, 200);
    const beforeLast = new Date().toISOString();
    assert.equal((await s.request('GET', '/api/v1/deployments', { token: user.apiKey })).status, 200);
    const afterLast = new Date().toISOString();

    const shown = (await s.request('GET', '/api/v1/api-keys', { token: user.token })).json.find((k: { id: string }) => k.id === keyId).last_used_at;
    assert.ok(typeof shown === 'string' && shown >= beforeLast && shown <= afterLast, `${beforeLast} ≤ ${shown} ≤ ${afterLast}: the second use, not the first`);

    await s.close();
    closed = true;
    const sqlite = new Database(path.join(s.dataDir, 'slipway.db'), { readonly: true });
    try {
      const stored = sqlite.prepare('select last_used_at from api_keys where id = ?').get(keyId) as { last_used_at: string | null };
      assert.equal(stored.last_used_at, shown, 'closing the server wrote the latest use');
    } finally {
      sqlite.close();
    }
  } finally {
    if (!closed) await s.close();
  }
});
