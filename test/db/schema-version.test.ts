// The version guard (contract §25): each version that runs is recorded; a database migrated by a newer Slipway is refused at start, naming both versions, and left as it was.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import Database from 'better-sqlite3';
import pg from 'pg';
import { openDatabase } from '../../src/db/database.js';
import { VERSION } from '../../src/version.js';
import { cli } from '../helpers/cli.js';
import { testDatabase, testEnv } from '../helpers/server.js';

/** One statement on the database without Slipway's migrations (they would refuse it). */
async function rawExecute(target: { file: string; url: string | undefined }, statement: string): Promise<void> {
  if (target.url === undefined) {
    const sqlite = new Database(target.file);
    sqlite.exec(statement);
    sqlite.close();
    return;
  }
  const client = new pg.Client({ connectionString: target.url });
  await client.connect();
  await client.query(statement);
  await client.end();
}

const FUTURE = '2099-01-01-001-future-table';

test('a database migrated by a newer version is refused (server exit 2, not restarted), naming both versions; the same version opens it again', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'slipway-schema-version-'));
  const pgDatabase = await testDatabase();
  const target = { file: path.join(dir, 'slipway.db'), url: pgDatabase?.url };
  try {
    const db = await openDatabase(target);
    const recorded = await db.selectFrom('slipway_versions').selectAll().execute();
    assert.equal(recorded.length, 1);
    assert.equal(recorded[0]?.version, VERSION);
    assert.match(recorded[0]?.schema ?? '', /^2026-11-28-100-schema-version$|^\d{4}-\d\d-\d\d-/);
    const ourSchema = recorded[0]?.schema ?? '';
    // A later Slipway, 9.0.0, ran one more migration.
    await db.insertInto('slipway_versions').values({ version: '9.0.0', schema: FUTURE, first_started_at: new Date().toISOString() }).execute();
    await db.insertInto('kysely_migration' as never).values({ name: FUTURE, timestamp: new Date().toISOString() } as never).execute();
    await db.destroy();

    const message = new RegExp(`migrated by Slipway 9\\.0\\.0 \\(schema ${FUTURE}\\); this is Slipway ${VERSION.replace(/\./g, '\\.')} \\(schema ${ourSchema}\\)`);
    await assert.rejects(openDatabase(target), (err: Error & { code?: string }) => {
      assert.equal(err.code, 'DATABASE_TOO_NEW');
      assert.match(err.message, message);
      return true;
    });
    // The server says the same and stops for good (the supervisor does not restart it).
    const env = testEnv(dir, pgDatabase === undefined ? {} : { SLIPWAY_DATABASE_URL: pgDatabase.url });
    const started = await cli(['server'], { home: dir, env });
    assert.equal(started.code, 2, started.stderr);
    assert.match(started.stderr, message);
    assert.doesNotMatch(started.stderr, /restarting in/);

    // Once that migration is gone again (as after restoring a backup taken before), this version opens it.
    await rawExecute(target, `delete from kysely_migration where name = '${FUTURE}'`);
    const again = await openDatabase(target);
    assert.deepEqual((await again.selectFrom('slipway_versions').select('version').orderBy('version').execute()).map((r) => r.version), [VERSION, '9.0.0'].sort());
    await again.destroy();
  } finally {
    await pgDatabase?.drop();
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
