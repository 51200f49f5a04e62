// Subdomain claims (deployments and tunnels in one table, one key) and start-up recovery scoped to its own instance; SQLite, and PostgreSQL when configured.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { after, before, test } from 'node:test';
import { DomainError } from '../../src/core/errors.js';
import type { Principal } from '../../src/core/principal.js';
import type { Db } from '../../src/db/database.js';
import { databaseDeploymentStore } from '../../src/db/deployment-store.js';
import { createDeployment } from '../../src/domain/deployments.js';
import { databaseDeploymentCatalog } from '../../src/db/deployment-catalog.js';
import { claimTunnelSubdomain, releaseTunnelSubdomain, releaseTunnelsOf } from '../../src/domain/tunnel-claims.js';
import { databaseTunnelClaimStore } from '../../src/db/tunnel-claim-store.js';
import { openTestDatabase } from '../helpers/server.js';

let db: Db;
const alice: Principal = { userId: crypto.randomUUID(), isAdmin: false, via: 'session', sessionId: 's', apiKeyId: undefined };
const bob: Principal = { ...alice, userId: crypto.randomUUID() };
const RUNNER_A = 'aaaaaaaa-0000-4000-8000-000000000000';
const RUNNER_B = 'bbbbbbbb-0000-4000-8000-000000000000';
const deps = () => ({ deployments: databaseDeploymentCatalog(db), allowPrivateGit: false, checkRepoHost: async () => undefined, limits: { maxMemoryMb: 1024, maxCpus: 2 } });
const claims = () => databaseTunnelClaimStore(db);
const owner = (p: Principal) => ({ userId: p.userId, apiKeyId: 'key' });

let closeDatabase: () => Promise<void>;
before(async () => {
  ({ db, close: closeDatabase } = await openTestDatabase('claims', [alice.userId, bob.userId]));
});
after(() => closeDatabase());

const create = (p: Principal, subdomain: string) => createDeployment(deps(), p, { name: subdomain, subdomain, source_type: 'archive' });

async function taken(promise: Promise<unknown>): Promise<void> {
  await assert.rejects(promise, (err: unknown) => err instanceof DomainError && err.code === 'subdomain_taken');
}

test('a deployment and a tunnel never hold one subdomain, whichever claims first', async () => {
  await create(alice, 'claim-dep');
  assert.equal(await claimTunnelSubdomain(claims(), RUNNER_A, 'claim-dep', owner(alice), crypto.randomUUID()), 'taken');
  assert.equal(await claimTunnelSubdomain(claims(), RUNNER_A, 'claim-tun', owner(alice), crypto.randomUUID()), 'ok');
  await taken(create(alice, 'claim-tun'));
  await taken(create(bob, 'claim-dep'));
  assert.equal(await claimTunnelSubdomain(claims(), RUNNER_B, 'claim-tun', owner(bob), crypto.randomUUID()), 'taken', "another user's live tunnel");
  const again = crypto.randomUUID();
  assert.equal(await claimTunnelSubdomain(claims(), RUNNER_B, 'claim-tun', owner(alice), again), 'ok', 'the same user reconnects');
  await releaseTunnelSubdomain(claims(), 'claim-tun', again);
  await create(bob, 'claim-tun');
});

test('concurrent creates of one subdomain: exactly one wins', async () => {
  const results = await Promise.allSettled(Array.from({ length: 8 }, (_, i) => create(i % 2 === 0 ? alice : bob, 'claim-race')));
  assert.equal(results.filter((r) => r.status === 'fulfilled').length, 1);
  for (const r of results) if (r.status === 'rejected') assert.equal((r.reason as DomainError).code, 'subdomain_taken');
});

test('deleting a deployment frees its subdomain', async () => {
  const row = await create(alice, 'claim-free');
  await databaseDeploymentStore(db, RUNNER_A).remove(row.id);
  assert.equal(await claimTunnelSubdomain(claims(), RUNNER_A, 'claim-free', owner(bob), crypto.randomUUID()), 'ok');
});

test("start-up recovery touches only its own instance's tunnels and builds", async () => {
  assert.equal(await claimTunnelSubdomain(claims(), RUNNER_A, 'claim-a', owner(alice), crypto.randomUUID()), 'ok');
  assert.equal(await claimTunnelSubdomain(claims(), RUNNER_B, 'claim-b', owner(alice), crypto.randomUUID()), 'ok');
  await releaseTunnelsOf(claims(), RUNNER_A);
  const left = await db.selectFrom('tunnels').select('subdomain').where('subdomain', 'in', ['claim-a', 'claim-b']).execute();
  assert.deepEqual(left.map((t) => t.subdomain), ['claim-b']);
  await taken(create(bob, 'claim-b'));
  await create(bob, 'claim-a');

  const depA = await create(alice, 'claim-build-a');
  const depB = await create(alice, 'claim-build-b');
  const build = (deploymentId: string) => ({
    id: crypto.randomUUID(),
    deployment_id: deploymentId,
    status: 'building' as const,
    commit_sha: 'x',
    source_ref: 'x',
    error: null,
    image_id: null,
    container_id: null,
    upstreams: null,
    started_at: new Date().toISOString(),
    finished_at: null,
  });
  const a = build(depA.id);
  const b = build(depB.id);
  await databaseDeploymentStore(db, RUNNER_A).startBuild(a, 'building');
  await databaseDeploymentStore(db, RUNNER_B).startBuild(b, 'building');
  // Only its own builds are interrupted (queued again by the lifecycle); nothing about them changes here.
  assert.deepEqual(await databaseDeploymentStore(db, RUNNER_A).interruptedBuilds(), [{ buildId: a.id, deploymentId: depA.id, runner: RUNNER_A }]);
  const status = async (id: string) => (await db.selectFrom('builds').select('status').where('id', '=', id).executeTakeFirstOrThrow()).status;
  assert.equal(await status(a.id), 'building');
  assert.equal(await status(b.id), 'building', "another instance's build runs on");
  const depStatus = async (id: string) => (await db.selectFrom('deployments').select('status').where('id', '=', id).executeTakeFirstOrThrow()).status;
  assert.equal(await depStatus(depA.id), 'building');
  assert.equal(await depStatus(depB.id), 'building');
});

test('where each tunnel is held is on its row; a reconnect elsewhere moves it; a lost instance\'s tunnels are freed', async () => {
  const first = crypto.randomUUID();
  assert.equal(await claimTunnelSubdomain(claims(), RUNNER_A, 'held-x', owner(alice), first), 'ok');
  assert.equal(await claimTunnelSubdomain(claims(), RUNNER_A, 'held-y', owner(bob), crypto.randomUUID()), 'ok');
  const [x] = await claims().holders('held-x');
  assert.deepEqual([x?.tunnelId, x?.runner, x?.userId, x?.apiKeyId], [first, RUNNER_A, alice.userId, 'key']);
  // The client reconnects to another instance: the row (and its holder) is the new connection's.
  const second = crypto.randomUUID();
  assert.equal(await claimTunnelSubdomain(claims(), RUNNER_B, 'held-x', owner(alice), second), 'ok');
  assert.deepEqual((await claims().holders('held-x')).map((h) => [h.tunnelId, h.runner]), [[second, RUNNER_B]]);
  // Instance A is lost: its tunnels go (names free again), B's stay.
  const freed = await claims().releaseHeldOutside([RUNNER_B]);
  assert.ok(freed.includes('held-y') && !freed.includes('held-x'), JSON.stringify(freed));
  assert.deepEqual((await claims().holders('held-y')), []);
  assert.equal(await claimTunnelSubdomain(claims(), RUNNER_B, 'held-y', owner(alice), crypto.randomUUID()), 'ok', 'the name is free');
  assert.equal((await claims().holders('held-x')).length, 1);
});

test("of an instance's tunnels, the API keys deleted and the users disabled since they connected", async () => {
  const live = crypto.randomUUID();
  await db.insertInto('api_keys').values({ id: live, user_id: alice.userId, name: 'live', key_prefix: 'sw_live', key_hash: crypto.randomUUID(), created_at: new Date().toISOString() }).execute();
  const runner = crypto.randomUUID();
  assert.equal(await claimTunnelSubdomain(claims(), runner, 'revoked-a', { userId: alice.userId, apiKeyId: live }, crypto.randomUUID()), 'ok');
  assert.equal(await claimTunnelSubdomain(claims(), runner, 'revoked-b', { userId: alice.userId, apiKeyId: 'deleted-key' }, crypto.randomUUID()), 'ok');
  assert.equal(await claimTunnelSubdomain(claims(), runner, 'revoked-c', { userId: bob.userId, apiKeyId: live }, crypto.randomUUID()), 'ok');
  assert.equal(await claimTunnelSubdomain(claims(), RUNNER_B, 'revoked-d', { userId: alice.userId, apiKeyId: 'other-deleted' }, crypto.randomUUID()), 'ok');
  assert.deepEqual(await claims().revokedOwners(runner), { apiKeyIds: ['deleted-key'], userIds: [] });
  await db.updateTable('users').set({ disabled: 1 }).where('id', '=', bob.userId).execute();
  try {
    assert.deepEqual(await claims().revokedOwners(runner), { apiKeyIds: ['deleted-key'], userIds: [bob.userId] });
  } finally {
    await db.updateTable('users').set({ disabled: 0 }).where('id', '=', bob.userId).execute();
  }
});
