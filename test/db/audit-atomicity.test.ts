// Store tests: an audit entry and the change it records commit together — a failed entry leaves no change, a failed change no entry; retention.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { after, before, test } from 'node:test';
import { PostgresAdapter, sql } from 'kysely';
import type { Db } from '../../src/db/database.js';
import type { Principal } from '../../src/core/principal.js';
import { databaseDeploymentCatalog } from '../../src/db/deployment-catalog.js';
import { addMember, createTeam } from '../../src/domain/teams.js';
import { createApiKey } from '../../src/domain/api-keys.js';
import { databaseApiKeyStore } from '../../src/db/api-key-store.js';
import { deploymentRecord } from '../../src/domain/audit.js';
import { pruneAudit } from '../../src/db/audit-log.js';
import { databaseTeamStore } from '../../src/db/team-store.js';
import { openTestDatabase } from '../helpers/server.js';

const ann = crypto.randomUUID();
const ben = crypto.randomUUID();
const principal: Principal = { userId: ann, isAdmin: false, via: 'session', sessionId: 's', apiKeyId: undefined, ip: '127.0.0.1' };
let db: Db;
let close: () => Promise<void>;

before(async () => {
  ({ db, close } = await openTestDatabase('audit', [ann, ben]));
});
after(async () => {
  await close();
});

const count = async (table: 'audit_log' | 'teams' | 'api_keys' | 'deployments'): Promise<number> =>
  Number((await db.selectFrom(table).select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow()).n);

/** Makes every insert into the audit log fail (as a full disk or a lost connection would), until the returned function runs. */
async function breakAuditLog(): Promise<() => Promise<void>> {
  if (db.getExecutor().adapter instanceof PostgresAdapter) {
    await sql`CREATE FUNCTION audit_down() RETURNS trigger AS $$ BEGIN RAISE EXCEPTION 'audit log unavailable'; END $$ LANGUAGE plpgsql`.execute(db);
    await sql`CREATE TRIGGER audit_down BEFORE INSERT ON audit_log FOR EACH ROW EXECUTE FUNCTION audit_down()`.execute(db);
    return async () => {
      await sql`DROP TRIGGER audit_down ON audit_log`.execute(db);
      await sql`DROP FUNCTION audit_down()`.execute(db);
    };
  }
  await sql`CREATE TRIGGER audit_down BEFORE INSERT ON audit_log BEGIN SELECT RAISE(ABORT, 'audit log unavailable'); END`.execute(db);
  return async () => {
    await sql`DROP TRIGGER audit_down`.execute(db);
  };
}

const newDeployment = (subdomain: string): Parameters<ReturnType<typeof databaseDeploymentCatalog>['create']>[0] => ({
  id: crypto.randomUUID(),
  user_id: ann,
  team_id: null,
  name: subdomain,
  subdomain,
  source_type: 'archive',
  repo_url: null,
  branch: null,
  dockerfile_path: 'Dockerfile',
  status: 'pending',
  upload_id: null,
  upload_size: null,
  upload_sha256: null,
  live_build_id: null,
  health_check_path: null,
  memory_bytes: null,
  nano_cpus: null,
  created_at: new Date().toISOString(),
  updated_at: new Date().toISOString(),
}) as Parameters<ReturnType<typeof databaseDeploymentCatalog>['create']>[0];

test('an entry that cannot be written takes its change with it', async () => {
  const catalog = databaseDeploymentCatalog(db);
  const repair = await breakAuditLog();
  try {
    await assert.rejects(createTeam(databaseTeamStore(db), principal, { name: 'Never' }), /audit log unavailable/);
    await assert.rejects(createApiKey(databaseApiKeyStore(db), principal, { name: 'never' }), /audit log unavailable/);
    const dep = newDeployment(`never-${process.pid}`);
    await assert.rejects(catalog.create(dep, deploymentRecord(principal, dep, 'deployment.create')), /audit log unavailable/);
  } finally {
    await repair();
  }
  assert.equal(await count('teams'), 0);
  assert.equal(await count('api_keys'), 0);
  assert.equal(await count('deployments'), 0);
  assert.equal(await count('audit_log'), 0);
  // With the log back, the same changes are made and recorded, one entry each.
  await createTeam(databaseTeamStore(db), principal, { name: 'Now' });
  const dep = newDeployment(`now-${process.pid}`);
  assert.equal(await catalog.create(dep, deploymentRecord(principal, dep, 'deployment.create')), 'created');
  assert.equal(await count('teams'), 1);
  assert.equal(await count('deployments'), 1);
  assert.equal(await count('audit_log'), 2);
});

test('a change that fails leaves no entry', async () => {
  const catalog = databaseDeploymentCatalog(db);
  const before = await count('audit_log');
  const taken = newDeployment(`now-${process.pid}`);
  assert.equal(await catalog.create(taken, deploymentRecord(principal, taken, 'deployment.create')), 'subdomain_taken');
  const team = await createTeam(databaseTeamStore(db), principal, { name: 'Twice' });
  await db.updateTable('users').set({ email: 'ben@example.test' }).where('id', '=', ben).execute();
  await addMember(databaseTeamStore(db), { ...principal, teams: new Map([[team.id, 'owner']]) }, team.id, { email: 'ben@example.test', role: 'viewer' });
  await assert.rejects(addMember(databaseTeamStore(db), { ...principal, teams: new Map([[team.id, 'owner']]) }, team.id, { email: 'ben@example.test', role: 'viewer' }), /already a member/);
  const actions = (await db.selectFrom('audit_log').select('action').orderBy('seq').execute()).map((r) => r.action).slice(before);
  assert.deepEqual(actions, ['team.create', 'team.member.add']);
});

test('entries older than the retention are dropped, newer ones kept', async () => {
  const now = Date.now();
  const at = (days: number): string => new Date(now - days * 86_400_000).toISOString();
  for (const [days, id] of [[400, 'old'], [366, 'older-than-a-year'], [364, 'recent']] as const) {
    await db
      .insertInto('audit_log')
      .values({ id: `${id}-${crypto.randomUUID()}`, at: at(days), actor_id: ann, actor_email: null, via: 'session', action: 'test', target_type: 'test', target_id: id, team_id: null, ip: null, outcome: 'success' })
      .execute();
  }
  assert.equal(await pruneAudit(db, 365, now), 2);
  const left = await db.selectFrom('audit_log').select('target_id').where('action', '=', 'test').execute();
  assert.deepEqual(left.map((r) => r.target_id), ['recent']);
});
