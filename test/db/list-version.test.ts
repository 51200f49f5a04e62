// The deployment list version: every write that changes what a user's list shows bumps it, in its own transaction, and only for that user; SQLite, and PostgreSQL when configured.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { after, before, test } from 'node:test';
import type { Principal } from '../../src/core/principal.js';
import type { Db } from '../../src/db/database.js';
import { databaseDeploymentCatalog } from '../../src/db/deployment-catalog.js';
import { databaseDeploymentStore } from '../../src/db/deployment-store.js';
import type { DeploymentCatalog } from '../../src/domain/deployment-catalog.js';
import { createDeployment } from '../../src/domain/deployments.js';
import type { DeploymentStore } from '../../src/deploy/deployment-store.js';
import { openTestDatabase } from '../helpers/server.js';

let db: Db;
let catalog: DeploymentCatalog;
let store: DeploymentStore;
const RUNNER = 'cccccccc-0000-4000-8000-000000000000';
const alice: Principal = { userId: crypto.randomUUID(), isAdmin: false, via: 'session', sessionId: 's', apiKeyId: undefined };
const bob: Principal = { ...alice, userId: crypto.randomUUID() };

let closeDatabase: () => Promise<void>;
before(async () => {
  ({ db, close: closeDatabase } = await openTestDatabase('list-version', [alice.userId, bob.userId]));
  catalog = databaseDeploymentCatalog(db);
  store = databaseDeploymentStore(db, RUNNER);
});
after(() => closeDatabase());

let counter = 0;
const create = async (p: Principal): Promise<string> => {
  counter += 1;
  const subdomain = `lv-${process.pid}-${counter}`;
  const deps = { deployments: catalog, allowPrivateGit: false, checkRepoHost: async () => undefined, limits: { maxMemoryMb: 1024, maxCpus: 2 } };
  return (await createDeployment(deps, p, { name: subdomain, subdomain, source_type: 'archive' })).id;
};

const newBuild = (deploymentId: string) => ({
  id: crypto.randomUUID(),
  deployment_id: deploymentId,
  status: 'building' as const,
  commit_sha: 'c'.repeat(64),
  source_ref: 'upload',
  error: null,
  image_id: null,
  container_id: null,
  upstreams: null,
  started_at: new Date().toISOString(),
  finished_at: null,
  runner: null,
});

/** Runs `write` and asserts it changed alice's list version, and not bob's. */
async function assertBumps(what: string, write: () => Promise<unknown>): Promise<void> {
  const [aliceBefore, bobBefore] = [await catalog.listVersion(alice.userId), await catalog.listVersion(bob.userId)];
  await write();
  assert.notEqual(await catalog.listVersion(alice.userId), aliceBefore, `${what} changes the owner's list version`);
  assert.equal(await catalog.listVersion(bob.userId), bobBefore, `${what} leaves another user's list version alone`);
}

test('every write that changes what the list shows bumps its owner\'s version, and no one else\'s', async () => {
  assert.equal(await catalog.listVersion(alice.userId), 0, 'a new user starts at 0');
  let id = '';
  await assertBumps('create', async () => (id = await create(alice)));
  await assertBumps('a settings edit (rename)', () => catalog.update(id, { name: 'renamed' }));
  await assertBumps('an upload', () => catalog.setUpload(id, { id: 'u1', size: 10, sha256: 's'.repeat(64) }));
  const build = newBuild(id);
  await assertBumps('a build start', () => store.startBuild(build, 'building'));
  await assertBumps('a status change', () => store.setStatus(id, 'failed'));
  await assertBumps('a switch of the live build', () => store.switchLive({ deploymentId: id, buildId: build.id, containerId: 'c1', upstreams: [{ host: '127.0.0.1', port: 40000 }], status: 'running' }));
  await assertBumps('delete', () => store.remove(id));
  assert.deepEqual(await catalog.deployments(alice.userId, [], undefined, 10), []);
});

test('versions only grow, so a version never names two different lists', async () => {
  const seen = [await catalog.listVersion(bob.userId)];
  const id = await create(bob);
  seen.push(await catalog.listVersion(bob.userId));
  await catalog.update(id, { name: 'again' });
  seen.push(await catalog.listVersion(bob.userId));
  await store.remove(id);
  seen.push(await catalog.listVersion(bob.userId));
  for (let i = 1; i < seen.length; i += 1) assert.ok((seen[i] as number) > (seen[i - 1] as number), `versions ${seen.join(', ')}`);
});

test('a failed write leaves the version as it was (the bump is in the write\'s transaction)', async () => {
  const row = await catalog.deployment(await create(alice));
  assert.ok(row !== undefined);
  const before = await catalog.listVersion(alice.userId);
  // The same subdomain again: the claim's primary key refuses it and the transaction rolls back.
  assert.equal(await catalog.create({ ...row, id: crypto.randomUUID() }), 'subdomain_taken');
  assert.equal(await catalog.listVersion(alice.userId), before);
});

test('a user with no row reads version 0 (nothing to list)', async () => {
  assert.equal(await catalog.listVersion(crypto.randomUUID()), 0);
});
