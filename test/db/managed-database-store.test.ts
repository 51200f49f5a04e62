// Contract of the managed-database store (src/db/managed-database-store.ts), run on SQLite and (with SLIPWAY_TEST_DATABASE_URL) PostgreSQL: names per owner, lists, encrypted credentials, links.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { sql } from 'kysely';
import type { Db } from '../../src/db/database.js';
import { databaseManagedDatabaseStore, reencryptDatabaseCredentials } from '../../src/db/managed-database-store.js';
import type { DatabaseStore, NewDatabase } from '../../src/databases/database-store.js';
import type { AuditRecord } from '../../src/domain/audit.js';
import { ValueCipher } from '../../src/secrets/value-cipher.js';
import { openTestDatabase } from '../helpers/server.js';

const alice = crypto.randomUUID();
const bob = crypto.randomUUID();
const audit = (action: string, targetId: string | null = null): AuditRecord => ({
  actor: { userId: alice, via: 'session', ip: null },
  event: { action, targetType: 'database', targetId, teamId: null },
});

let seq = 0;
function newRow(user: string, name: string, teamId: string | null = null): NewDatabase {
  seq += 1;
  const at = new Date(Date.UTC(2026, 10, 28, 0, 0, seq)).toISOString();
  return {
    id: crypto.randomUUID(),
    name,
    engine: 'postgres',
    image: 'postgres:16-alpine',
    worker_instance: null,
    status: 'creating',
    error: null,
    user_id: user,
    team_id: teamId,
    memory_bytes: null,
    nano_cpus: null,
    container_id: null,
    size_bytes: 0,
    created_at: at,
    updated_at: at,
  };
}

const credentials = { username: 'app', password: 'p'.repeat(16) + 'SECRETVALUE12345', database: 'main' };

describe('managed database store', () => {
  let db: Db;
  let close: () => Promise<void>;
  let cipher: ValueCipher;
  let store: DatabaseStore;
  let teamId: string;

  before(async () => {
    ({ db, close } = await openTestDatabase('databases', [alice, bob]));
    cipher = new ValueCipher(crypto.randomBytes(32));
    store = databaseManagedDatabaseStore(db, cipher);
    teamId = crypto.randomUUID();
    const now = new Date().toISOString();
    await db.insertInto('teams').values({ id: teamId, name: 't', created_at: now, updated_at: now }).execute();
  });
  after(async () => {
    await close?.();
  });

  const newDeployment = async (user: string): Promise<string> => {
    const id = crypto.randomUUID();
    const now = new Date().toISOString();
    await db
      .insertInto('deployments')
      .values({ id, user_id: user, name: id, subdomain: `d${id.slice(0, 8)}`, source_type: 'archive', dockerfile_path: 'Dockerfile', status: 'pending', upload_id: null, upload_size: null, upload_sha256: null, live_build_id: null, health_check_path: null, memory_bytes: null, nano_cpus: null, team_id: null, repo_url: null, branch: null, created_at: now, updated_at: now })
      .execute();
    return id;
  };

  test('names are unique per owner: a user, another user, a team', async () => {
    const first = newRow(alice, 'main');
    assert.equal(await store.create(first, credentials, audit('database.create', first.id)), 'created');
    assert.equal(await store.create(newRow(alice, 'main'), credentials, audit('database.create')), 'name_taken');
    assert.equal(await store.create(newRow(bob, 'main'), credentials, audit('database.create')), 'created');
    assert.equal(await store.create(newRow(alice, 'main', teamId), credentials, audit('database.create')), 'created');
    assert.equal(await store.create(newRow(bob, 'main', teamId), credentials, audit('database.create')), 'name_taken', "the team's name space");
    const got = await store.get(first.id);
    assert.deepEqual(got, { ...first, seq: got?.seq });
    assert.equal(await store.get(crypto.randomUUID()), undefined);
  });

  test("lists: a user's own and their teams', newest first, by pages", async () => {
    const own = await store.list(alice, [], undefined, 100);
    assert.deepEqual(own.map((r) => [r.name, r.team_id]), [['main', null]]);
    const withTeam = await store.list(alice, [teamId], undefined, 100);
    assert.equal(withTeam.length, 2);
    assert.ok(withTeam[0]!.seq > withTeam[1]!.seq, 'newest first');
    const second = await store.list(alice, [teamId], withTeam[0]!.seq, 1);
    assert.deepEqual(second.map((r) => r.id), [withTeam[1]!.id]);
    assert.equal((await store.list(bob, [], undefined, 100)).length, 1);
  });

  test('credentials are encrypted at rest, bound to their row, and a read can be audited', async () => {
    const row = newRow(alice, 'secretive');
    await store.create(row, credentials, audit('database.create', row.id));
    const raw = await db.selectFrom('managed_databases').select('credentials').where('id', '=', row.id).executeTakeFirstOrThrow();
    assert.ok(!raw.credentials.includes('SECRETVALUE'), 'no plain text in the table');
    const dump = await sql<{ t: string }>`select credentials as t from managed_databases`.execute(db);
    assert.ok(dump.rows.every((r) => !r.t.includes(credentials.password)));
    const before = await db.selectFrom('audit_log').select('id').where('action', '=', 'database.credentials.read').execute();
    assert.deepEqual(await store.credentials(row.id, audit('database.credentials.read', row.id)), credentials);
    const afterRead = await db.selectFrom('audit_log').select('id').where('action', '=', 'database.credentials.read').execute();
    assert.equal(afterRead.length, before.length + 1);
    assert.deepEqual(await store.credentials(row.id), credentials, 'the system reads without an entry');
    assert.equal(afterRead.length, (await db.selectFrom('audit_log').select('id').where('action', '=', 'database.credentials.read').execute()).length);
    // Moved to another row, the ciphertext does not open.
    const other = newRow(alice, 'other-row');
    await store.create(other, { ...credentials, password: 'x' }, audit('database.create'));
    await db.updateTable('managed_databases').set({ credentials: raw.credentials }).where('id', '=', other.id).execute();
    await assert.rejects(store.credentials(other.id));
    await store.remove(other.id, audit('database.delete', other.id));
    // A key rotation re-encrypts them.
    const next = new ValueCipher(crypto.randomBytes(32));
    await db.transaction().execute(async (trx) => {
      assert.ok((await reencryptDatabaseCredentials(trx, cipher, next)) >= 1);
    });
    assert.deepEqual(await databaseManagedDatabaseStore(db, next).credentials(row.id), credentials);
    await db.transaction().execute((trx) => reencryptDatabaseCredentials(trx, next, cipher));
  });

  test('updates: status and size; a row gone is said so', async () => {
    const [row] = await store.list(alice, [], undefined, 1);
    assert.equal(await store.update(row!.id, { status: 'running', container_id: 'c1', size_bytes: 5_000_000_000 }), 'updated');
    const got = await store.get(row!.id);
    assert.deepEqual([got?.status, got?.container_id, got?.size_bytes], ['running', 'c1', 5_000_000_000]);
    assert.ok(got!.updated_at >= row!.updated_at);
    assert.equal(await store.update(crypto.randomUUID(), { status: 'failed' }), 'gone');
  });

  test('links: one per database and deployment, one database per variable; they go with the deployment or the database', async () => {
    const dep = await newDeployment(alice);
    const a = newRow(alice, 'link-a');
    const b = newRow(alice, 'link-b');
    await store.create(a, credentials, audit('database.create'));
    await store.create(b, credentials, audit('database.create'));
    const link = (databaseId: string, env: string) => store.link({ database_id: databaseId, deployment_id: dep, env, created_at: new Date().toISOString() }, audit('deployment.database.link'));
    assert.equal(await link(a.id, 'DATABASE_URL'), 'linked');
    assert.equal(await link(a.id, 'OTHER_URL'), 'already_linked');
    assert.equal(await link(b.id, 'DATABASE_URL'), 'env_taken');
    assert.equal(await link(b.id, 'CACHE_URL'), 'linked');
    assert.deepEqual((await store.linksOfDeployment(dep)).map((l) => [l.database_id, l.env]).sort(), [[a.id, 'DATABASE_URL'], [b.id, 'CACHE_URL']].sort());
    assert.deepEqual((await store.linksOfDatabase(a.id)).map((l) => [l.deployment_id, l.deployment_name]), [[dep, dep]]);
    assert.equal(await store.unlink(a.id, dep, audit('deployment.database.unlink')), true);
    assert.equal(await store.unlink(a.id, dep, audit('deployment.database.unlink')), false);
    await store.remove(b.id, audit('database.delete', b.id));
    assert.deepEqual(await store.linksOfDeployment(dep), []);
    assert.equal(await link(a.id, 'DATABASE_URL'), 'linked');
    await db.deleteFrom('deployments').where('id', '=', dep).execute();
    assert.deepEqual(await store.linksOfDatabase(a.id), [], 'a deleted deployment takes its links');
  });
});
