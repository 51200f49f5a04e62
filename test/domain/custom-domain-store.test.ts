// One contract suite for every CustomDomainStore: the database store (SQLite, or PostgreSQL when configured) and the in-memory fake.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { after, describe, test } from 'node:test';
import { databaseCustomDomainStore } from '../../src/db/custom-domain-store.js';
import type { CustomDomainRow, CustomDomainStore } from '../../src/domain/custom-domains.js';
import { openTestDatabase } from '../helpers/server.js';
import { MemoryDomainStore } from '../helpers/memory-domain-store.js';

interface Subject {
  readonly store: CustomDomainStore;
  newDeployment(): Promise<string>;
}

const domain = (deploymentId: string, hostname: string, createdAt = new Date().toISOString()): CustomDomainRow => ({
  id: crypto.randomUUID(),
  deployment_id: deploymentId,
  hostname,
  created_at: createdAt,
});

function contract(name: string, make: () => Promise<Subject>): void {
  describe(`CustomDomainStore contract: ${name}`, () => {
    test('a hostname has one holder across deployments; a deployment holds at most `max`; a missing deployment holds none', async () => {
      const { store, newDeployment } = await make();
      const a = await newDeployment();
      const b = await newDeployment();
      const host = `${crypto.randomUUID().slice(0, 8)}.example.com`;
      assert.equal(await store.add(domain(a, host), 2), 'added');
      assert.equal(await store.add(domain(a, host), 2), 'taken', 'the same deployment again');
      assert.equal(await store.add(domain(b, host), 2), 'taken', 'another deployment');
      assert.equal(await store.add(domain(a, `x.${host}`), 2), 'added');
      assert.equal(await store.add(domain(a, `y.${host}`), 2), 'full');
      assert.equal(await store.add(domain(crypto.randomUUID(), `z.${host}`), 2), 'gone');
      assert.deepEqual((await store.list(a)).map((r) => r.hostname).sort(), [host, `x.${host}`].sort());
      assert.deepEqual(await store.list(b), []);
    });

    test('lists oldest first, ties by hostname; removes only the deployment\'s own domain', async () => {
      const { store, newDeployment } = await make();
      const a = await newDeployment();
      const b = await newDeployment();
      const tag = crypto.randomUUID().slice(0, 8);
      const late = domain(a, `a-${tag}.example.org`, '2026-01-02T00:00:00.000Z');
      const tieB = domain(a, `b-${tag}.example.org`, '2026-01-01T00:00:00.000Z');
      const tieA = domain(a, `c-${tag}.example.net`, '2026-01-01T00:00:00.000Z');
      for (const row of [late, tieB, tieA]) assert.equal(await store.add(row, 20), 'added');
      assert.deepEqual((await store.list(a)).map((r) => r.hostname), [tieB.hostname, tieA.hostname, late.hostname]);
      assert.equal(await store.remove(b, late.id), undefined, "another deployment's domain");
      assert.deepEqual(await store.remove(a, late.id), late);
      assert.equal(await store.remove(a, late.id), undefined, 'already removed');
      assert.equal(await store.add(domain(b, late.hostname), 20), 'added', 'a removed hostname is free again');
    });
  });
}

contract('in memory', async () => {
  const store = new MemoryDomainStore();
  return {
    store,
    newDeployment: async () => {
      const id = crypto.randomUUID();
      store.deployments.add(id);
      return id;
    },
  };
});

const owner = crypto.randomUUID();
const opened = openTestDatabase('domain-store', [owner]);
after(async () => (await opened).close());

contract('database', async () => {
  const { db } = await opened;
  return {
    store: databaseCustomDomainStore(db),
    newDeployment: async () => {
      const id = crypto.randomUUID();
      const now = new Date().toISOString();
      await db
        .insertInto('deployments')
        .values({ id, user_id: owner, name: id, subdomain: `d${id.slice(0, 8)}`, source_type: 'archive', dockerfile_path: 'Dockerfile', status: 'pending', upload_id: null, upload_size: null, upload_sha256: null, live_build_id: null, health_check_path: null, memory_bytes: null, nano_cpus: null, team_id: null, repo_url: null, branch: null, created_at: now, updated_at: now })
        .execute();
      return id;
    },
  };
});
