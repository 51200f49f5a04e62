// Uploads kept in the database (several instances, decisions §15): chunked in, streamed back byte for byte, pruned, gone with their deployment.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import type { Principal } from '../../src/core/principal.js';
import type { Db } from '../../src/db/database.js';
import { databaseDeploymentCatalog } from '../../src/db/deployment-catalog.js';
import { databaseSharedUploads } from '../../src/db/upload-archives.js';
import { createDeployment } from '../../src/domain/deployments.js';
import { openTestDatabase } from '../helpers/server.js';

let db: Db;
let closeDatabase: () => Promise<void>;
const alice: Principal = { userId: crypto.randomUUID(), isAdmin: false, via: 'session', sessionId: 's', apiKeyId: undefined };
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'slipway-upload-archives-'));
before(async () => {
  ({ db, close: closeDatabase } = await openTestDatabase('uploads', [alice.userId]));
});
after(async () => {
  await closeDatabase();
  fs.rmSync(dir, { recursive: true, force: true });
});

test('an archive is kept in chunks and read back byte for byte; pruned ones and a deleted deployment\'s are gone', async () => {
  const deps = { deployments: databaseDeploymentCatalog(db), allowPrivateGit: false, checkRepoHost: async () => undefined, limits: { maxMemoryMb: 1024, maxCpus: 2 } };
  const dep = await createDeployment(deps, alice, { name: 'kept', subdomain: `kept-${process.pid}`, source_type: 'archive' });
  const shared = databaseSharedUploads(db);
  // Two and a half chunks.
  const bytes = crypto.randomBytes(2.5 * 1024 * 1024);
  const file = path.join(dir, 'in.tar.gz');
  fs.writeFileSync(file, bytes);
  const first = crypto.randomUUID();
  const second = crypto.randomUUID();
  await shared.save(dep.id, first, file, 'FROM scratch\n');
  await shared.save(dep.id, second, file, undefined);
  assert.equal((await db.selectFrom('upload_chunks').select('seq').where('upload_id', '=', first).execute()).length, 3);

  const out = path.join(dir, 'out.tar.gz');
  assert.deepEqual(await shared.load(first, out), { dockerfile: 'FROM scratch\n' });
  assert.ok(fs.readFileSync(out).equals(bytes));
  assert.equal(await shared.load(crypto.randomUUID(), out), undefined, 'an upload not kept');

  await shared.prune(dep.id, new Set([second]));
  assert.equal(await shared.load(first, out), undefined, 'pruned');
  assert.deepEqual(await shared.load(second, out), { dockerfile: null });

  await db.deleteFrom('subdomain_claims').where('subdomain', '=', dep.subdomain).execute();
  await db.deleteFrom('deployments').where('id', '=', dep.id).execute();
  assert.equal(await shared.load(second, out), undefined, 'gone with its deployment');
  assert.equal((await db.selectFrom('upload_chunks').select('seq').execute()).length, 0);
});
