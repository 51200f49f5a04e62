// Unit tests of API key use recording: shown at once, written at most once per interval, flushed on close.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { openDatabase, type Db } from '../../src/db/database.js';
import { KeyUsage } from '../../src/domain/key-usage.js';
import { databaseApiKeyStore } from '../../src/db/api-key-store.js';

let db: Db;
let dir: string;
const userId = '00000000-0000-4000-8000-000000000001';

before(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'slipway-key-usage-'));
  db = await openDatabase({ file: path.join(dir, 'slipway.db') });
  await db.insertInto('users').values({ id: userId, email: 'u@example.test', password_hash: 'x', is_admin: 0, created_at: 't', updated_at: 't' }).execute();
  for (const id of ['k1', 'k2']) {
    await db
      .insertInto('api_keys')
      .values({ id, user_id: userId, name: id, key_prefix: 'slw_k1_x', key_hash: id, created_at: 't', last_used_at: null })
      .execute();
  }
});
after(async () => {
  await db.destroy();
  fs.rmSync(dir, { recursive: true, force: true });
});

const stored = async (id: string): Promise<string | null> =>
  (await db.selectFrom('api_keys').select('last_used_at').where('id', '=', id).executeTakeFirstOrThrow()).last_used_at;

test('uses are visible at once, written together after the interval, and only the latest one per key', async () => {
  const usage = new KeyUsage(databaseApiKeyStore(db), { intervalMs: 50 });
  usage.record('k1', '2026-01-01T00:00:00.000Z');
  usage.record('k1', '2026-01-01T00:00:00.500Z');
  usage.record('k2', '2026-01-01T00:00:00.700Z');
  assert.equal(usage.unwritten('k1'), '2026-01-01T00:00:00.500Z');
  assert.equal(await stored('k1'), null, 'nothing is written on use');
  await new Promise((resolve) => setTimeout(resolve, 200));
  assert.equal(await stored('k1'), '2026-01-01T00:00:00.500Z');
  assert.equal(await stored('k2'), '2026-01-01T00:00:00.700Z');
  assert.equal(usage.unwritten('k1'), undefined);
  await usage.close();
});

test('close writes what is pending without waiting for the interval', async () => {
  const usage = new KeyUsage(databaseApiKeyStore(db), { intervalMs: 60_000 });
  usage.record('k2', '2026-01-02T00:00:00.000Z');
  await usage.close();
  assert.equal(await stored('k2'), '2026-01-02T00:00:00.000Z');
});

test('a busy key costs one write per interval, not one per use', async () => {
  let writes = 0;
  const counting = db.withPlugin({
    transformQuery: (args) => {
      if (args.node.kind === 'UpdateQueryNode') writes += 1;
      return args.node;
    },
    transformResult: async (args) => args.result,
  });
  const usage = new KeyUsage(databaseApiKeyStore(counting), { intervalMs: 100 });
  for (let i = 0; i < 500; i += 1) usage.record('k1');
  await usage.flush();
  for (let i = 0; i < 500; i += 1) usage.record('k1');
  await usage.close();
  assert.equal(writes, 2);
});

test('a use stays visible while its write is in flight (a read never sees the older stored value)', async () => {
  let release: () => void = () => undefined;
  const gate = new Promise<void>((resolve) => (release = resolve));
  const written: Array<ReadonlyMap<string, string>> = [];
  const usage = new KeyUsage(
    {
      recordUses: async (uses) => {
        await gate;
        written.push(uses);
      },
    },
    { intervalMs: 60_000 },
  );
  usage.record('k1', '2026-01-03T00:00:00.000Z');
  const flushing = usage.flush();
  await new Promise((resolve) => setImmediate(resolve));
  assert.equal(written.length, 0, 'the write is still in flight');
  assert.equal(usage.unwritten('k1'), '2026-01-03T00:00:00.000Z');
  release();
  await flushing;
  assert.equal(written.length, 1);
  assert.equal(usage.unwritten('k1'), undefined);
  await usage.close();
});
