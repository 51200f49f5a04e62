// One contract suite for every AppConfigStore: the database store (encrypting) and the in-memory fake.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import { DbAppConfigStore } from '../../src/db/app-config-store.js';
import { openDatabase, type Db } from '../../src/db/database.js';
import type { AppConfigStore, EnvChange } from '../../src/domain/app-config.js';
import { ValueCipher } from '../../src/secrets/value-cipher.js';
import { MemoryConfigStore } from '../helpers/memory-config-store.js';

interface Subject {
  readonly store: AppConfigStore;
  newDeployment(): Promise<string>;
  newBuild(deploymentId: string): Promise<string>;
}

const change = (set: Record<string, string>, unset: string[] = [], secret = false): EnvChange => ({ set: new Map(Object.entries(set)), unset, secret });
const pairs = (vars: ReadonlyArray<{ key: string; value: string; secret: boolean }>): Array<[string, string, boolean]> => vars.map((v) => [v.key, v.value, v.secret]);

function contract(name: string, make: () => Promise<Subject>): void {
  describe(`AppConfigStore contract: ${name}`, () => {
    test('changes set and remove keys together; lists are sorted by key (code units); other deployments are untouched', async () => {
      const { store, newDeployment } = await make();
      const a = await newDeployment();
      const b = await newDeployment();
      assert.deepEqual(await store.current(a), []);
      await store.change(a, change({ b_low: '1', Zed: '2', A: '3', _x: '4' }), () => undefined);
      await store.change(b, change({ OTHER: 'b' }, [], true), () => undefined);
      const result = await store.change(a, change({ Zed: 'two' }, ['A', 'MISSING']), () => undefined);
      assert.deepEqual(pairs(result), [['Zed', 'two', false], ['_x', '4', false], ['b_low', '1', false]]);
      assert.deepEqual(pairs(await store.current(a)), pairs(result));
      assert.deepEqual(pairs(await store.current(b)), [['OTHER', 'b', true]]);
    });

    test('a check that throws aborts the whole change', async () => {
      const { store, newDeployment } = await make();
      const a = await newDeployment();
      await store.change(a, change({ KEEP: 'k' }), () => undefined);
      await assert.rejects(
        store.change(a, change({ NEW: 'n' }, ['KEEP']), (vars) => {
          assert.deepEqual(vars.map((v) => v.key), ['NEW'], 'the check sees the result');
          throw new Error('over the limit');
        }),
        /over the limit/,
      );
      assert.deepEqual(pairs(await store.current(a)), [['KEEP', 'k', false]]);
    });

    test("a build's configuration is a snapshot: later changes do not touch it; it can be replaced and restored as current", async () => {
      const { store, newDeployment, newBuild } = await make();
      const a = await newDeployment();
      const build = await newBuild(a);
      assert.equal(await store.buildConfig(build), undefined, 'nothing recorded yet');
      await store.change(a, change({ V: 'one' }), () => undefined);
      await store.change(a, change({ S: 'secret' }, [], true), () => undefined);
      assert.deepEqual(pairs(await store.recordForBuild(a, build)), [['S', 'secret', true], ['V', 'one', false]]);
      await store.change(a, change({ V: 'two', W: 'w' }), () => undefined);
      assert.deepEqual(pairs((await store.buildConfig(build)) ?? []), [['S', 'secret', true], ['V', 'one', false]]);
      const recorded = (await store.buildConfig(build)) ?? [];
      await store.replace(a, recorded);
      assert.deepEqual(await store.current(a), recorded, 'values, flags and times restored as they were');
      await store.setBuildConfig(build, []);
      assert.deepEqual(await store.buildConfig(build), []);
    });
  });
}

const dirs: string[] = [];
const dbs: Db[] = [];
after(async () => {
  for (const db of dbs) await db.destroy();
  for (const dir of dirs) fs.rmSync(dir, { recursive: true, force: true });
});

contract('database (SQLite, encrypted)', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'slipway-config-store-'));
  dirs.push(dir);
  const db = await openDatabase({ file: path.join(dir, 'slipway.db') });
  dbs.push(db);
  const now = new Date().toISOString();
  const userId = crypto.randomUUID();
  await db.insertInto('users').values({ id: userId, email: `${userId}@x`, password_hash: 'x', is_admin: 0, created_at: now, updated_at: now }).execute();
  return {
    store: new DbAppConfigStore(db, new ValueCipher(crypto.randomBytes(32))),
    async newDeployment() {
      const id = crypto.randomUUID();
      await db
        .insertInto('deployments')
        .values({
          id, user_id: userId, name: 'n', subdomain: id, source_type: 'archive', repo_url: null, branch: null, dockerfile_path: 'Dockerfile',
          status: 'pending', upload_id: null, upload_size: null, upload_sha256: null, live_build_id: null, health_check_path: null,
          memory_bytes: null, nano_cpus: null, created_at: now, updated_at: now,
        })
        .execute();
      return id;
    },
    async newBuild(deploymentId) {
      const id = crypto.randomUUID();
      await db
        .insertInto('builds')
        .values({ id, deployment_id: deploymentId, status: 'building', commit_sha: 'x', source_ref: 'x', error: null, image_id: null, container_id: null, upstreams: null, started_at: now, finished_at: null })
        .execute();
      return id;
    },
  };
});

contract('in memory (test fake)', async () => ({
  store: new MemoryConfigStore(),
  newDeployment: async () => crypto.randomUUID(),
  newBuild: async () => crypto.randomUUID(),
}));
