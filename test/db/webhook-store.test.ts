// The webhook store on the database: the secret encrypted and bound to its deployment, key rotation, the delivery-id claim, pruning; SQLite, and PostgreSQL when configured.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { after, before, test } from 'node:test';
import type { Principal } from '../../src/core/principal.js';
import { reencryptAll } from '../../src/db/app-config-store.js';
import type { Db } from '../../src/db/database.js';
import { databaseWebhookStore } from '../../src/db/webhook-store.js';
import { createDeployment } from '../../src/domain/deployments.js';
import { databaseDeploymentCatalog } from '../../src/db/deployment-catalog.js';
import type { DeliveryRecord } from '../../src/domain/webhook-store.js';
import { ValueCipher } from '../../src/secrets/value-cipher.js';
import { openTestDatabase } from '../helpers/server.js';

let db: Db;
const alice: Principal = { userId: crypto.randomUUID(), isAdmin: false, via: 'session', sessionId: 's', apiKeyId: undefined };
const cipher = new ValueCipher(crypto.randomBytes(32));
let counter = 0;

let closeDatabase: () => Promise<void>;
before(async () => {
  ({ db, close: closeDatabase } = await openTestDatabase('webhook-store', [alice.userId]));
});
after(() => closeDatabase());

async function gitDeployment(): Promise<string> {
  counter += 1;
  const deps = { deployments: databaseDeploymentCatalog(db), allowPrivateGit: true, checkRepoHost: async () => undefined, limits: { maxMemoryMb: 1024, maxCpus: 2 } };
  const row = await createDeployment(deps, alice, { name: 'w', subdomain: `w-${counter}`, repo_url: 'https://git.example.test/w.git', branch: 'main' });
  return row.id;
}

function delivery(outcome: DeliveryRecord['outcome'], deliveryId: string | null = null): DeliveryRecord {
  return {
    id: crypto.randomUUID(),
    received_at: new Date().toISOString(),
    provider: 'github',
    event: 'push',
    delivery_id: deliveryId,
    ref: 'refs/heads/main',
    commit_sha: 'a'.repeat(40),
    outcome,
    build_id: null,
    reason: outcome,
  };
}

test('the secret is stored encrypted and bound to its deployment; key rotation moves it to the new key', async () => {
  const store = databaseWebhookStore(db, cipher);
  const [a, b] = [await gitDeployment(), await gitDeployment()];
  assert.equal(await store.target(a), undefined, 'no webhook yet');
  await store.setSecret(a, 'slw_wh_secret-of-a');
  const target = await store.target(a);
  assert.equal(target?.secret, 'slw_wh_secret-of-a');
  assert.equal(target?.branch, 'main');
  assert.equal(target?.userId, alice.userId);
  const row = await db.selectFrom('webhooks').select('secret').where('deployment_id', '=', a).executeTakeFirstOrThrow();
  assert.match(row.secret, /^v1:/);
  assert.ok(!row.secret.includes('secret-of-a'));
  // Copied to another deployment's row, it does not decrypt.
  await db.insertInto('webhooks').values({ deployment_id: b, secret: row.secret, created_at: 't' }).execute();
  await assert.rejects(store.target(b));
  await db.deleteFrom('webhooks').where('deployment_id', '=', b).execute();

  const next = new ValueCipher(crypto.randomBytes(32));
  await reencryptAll(db, cipher, next);
  assert.equal((await databaseWebhookStore(db, next).target(a))?.secret, 'slw_wh_secret-of-a');
  await assert.rejects(store.target(a), 'the old key no longer opens it');
});

test('a delivery id is claimed once (also by copies arriving at once) until its 24 hours pass', async () => {
  const store = databaseWebhookStore(db, cipher);
  const id = await gitDeployment();
  const results = await Promise.all(Array.from({ length: 5 }, () => store.record(id, delivery('deployed', 'd-1'), 'd-1')));
  assert.deepEqual(results.sort(), ['duplicate', 'duplicate', 'duplicate', 'duplicate', 'recorded']);
  assert.equal(await store.record(id, delivery('deployed', 'd-1'), 'd-1'), 'duplicate');
  // Another deployment's delivery with the same id is its own.
  assert.equal(await store.record(await gitDeployment(), delivery('deployed', 'd-1'), 'd-1'), 'recorded');
  // A day later the id no longer blocks.
  const dayAgo = new Date(Date.now() - 24 * 3600_000 - 1000).toISOString();
  await db.updateTable('webhook_deliveries').set({ received_at: dayAgo }).where('deployment_id', '=', id).execute();
  assert.equal(await store.record(id, delivery('deployed', 'd-1'), 'd-1'), 'recorded');
  // A released claim (the deploy was refused) no longer blocks either.
  const refused = delivery('deployed', 'd-2');
  assert.equal(await store.record(id, refused, 'd-2'), 'recorded');
  await store.settle(refused.id, { outcome: 'rejected', reason: 'refused', buildId: null, releaseKey: true });
  assert.equal(await store.record(id, delivery('deployed', 'd-2'), 'd-2'), 'recorded');
});

test('each deployment keeps the newest 100 accepted and 20 rejected deliveries; the list is the newest 100', async () => {
  const store = databaseWebhookStore(db, cipher);
  const id = await gitDeployment();
  const first = delivery('ignored');
  await store.record(id, first);
  for (let i = 0; i < 120; i += 1) await store.record(id, delivery('ignored'));
  for (let i = 0; i < 30; i += 1) await store.record(id, delivery('rejected'));
  const counts = await db
    .selectFrom('webhook_deliveries')
    .select(['outcome', db.fn.countAll<number>().as('n')])
    .where('deployment_id', '=', id)
    .groupBy('outcome')
    .execute();
  assert.deepEqual(Object.fromEntries(counts.map((c) => [c.outcome, Number(c.n)])), { ignored: 100, rejected: 20 });
  const listed = await store.deliveries(id);
  assert.equal(listed.length, 100);
  assert.deepEqual(listed.slice(0, 20).map((d) => d.outcome), Array(20).fill('rejected'), 'newest first');
  assert.ok(!listed.some((d) => d.id === first.id));
});

test('lastDeployed is the newest delivery that deployed, kept even when 100 ignored ones follow it', async () => {
  const store = databaseWebhookStore(db, cipher);
  const id = await gitDeployment();
  assert.equal(await store.lastDeployed(id), undefined);
  await store.record(id, { ...delivery('deployed', 'd-old'), commit_sha: 'b'.repeat(40) }, 'd-old');
  const newest = { ...delivery('deployed', 'd-new'), commit_sha: 'c'.repeat(40) };
  await store.record(id, newest, 'd-new');
  await store.settle(newest.id, { outcome: 'deployed', reason: 'deploying', buildId: 'build-1', releaseKey: false });
  const refused = { ...delivery('deployed', 'd-refused'), commit_sha: 'd'.repeat(40) };
  await store.record(id, refused, 'd-refused');
  await store.settle(refused.id, { outcome: 'rejected', reason: 'refused', buildId: null, releaseKey: true });
  for (let i = 0; i < 110; i += 1) await store.record(id, delivery('ignored'));
  assert.deepEqual(await store.lastDeployed(id), { delivery_id: 'd-new', commit_sha: 'c'.repeat(40), build_id: 'build-1' });
});
