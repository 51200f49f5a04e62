// Queries compiled once and run with new parameters: the same rows as the query built each time, and a wrong parameter count refused.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { openDatabase } from '../../src/db/database.js';
import { preparedQuery } from '../../src/db/prepared-query.js';

test('a prepared query returns what the Kysely query with those values returns', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'slipway-prepared-'));
  const db = await openDatabase({ file: path.join(dir, 'slipway.db') });
  try {
    for (const [id, email] of [['u1', 'a@x'], ['u2', 'b@x'], ['u3', 'c@x']]) {
      await db.insertInto('users').values({ id: id as string, email: email as string, password_hash: 'h', is_admin: 0, created_at: id as string, updated_at: 't' }).execute();
    }
    const byEmail = preparedQuery(db, db.selectFrom('users').select(['id', 'email']).where('email', '=', '').orderBy('id').limit(1));
    const after = preparedQuery(db, db.selectFrom('users').select('id').where('created_at', '>', '').orderBy('id', 'desc').limit(1));
    for (const email of ['a@x', 'b@x', 'nobody']) {
      assert.deepEqual(await byEmail(email, 5), await db.selectFrom('users').select(['id', 'email']).where('email', '=', email).orderBy('id').limit(5).execute());
    }
    assert.deepEqual(await after('u1', 10), [{ id: 'u3' }, { id: 'u2' }]);
    assert.deepEqual(await after('u1', 1), [{ id: 'u3' }], 'the limit is a parameter too');
    await assert.rejects(byEmail('a@x'), /2 parameter\(s\) expected, 1 given/);
  } finally {
    await db.destroy();
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
