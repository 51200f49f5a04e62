// Upgrades lose nothing (contract §25): the previous release makes a full installation, the current code starts on its data and finds every object, the live app served with its secret.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import { removeEngineObjects, removeInstanceObjects, spawnServerProcess, testDatabase, testEnv, type ServerProcess } from '../helpers/server.js';
import { closeFixture, createFixture, rollingCheck, serverAt, verifyFixture } from './fixture.js';
import { buildRelease, PREVIOUS_RELEASE } from './previous-release.js';
import pg from 'pg';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'slipway-upgrade-'));
const running: ServerProcess[] = [];
let database: Awaited<ReturnType<typeof testDatabase>>;

after(async () => {
  for (const server of running) await server.kill();
  await closeFixture();
  if (database === undefined) await removeEngineObjects(dir);
  else {
    const client = new pg.Client({ connectionString: database.url });
    await client.connect();
    const instance = (await client.query<{ id: string }>('select id from instance').catch(() => ({ rows: [] as Array<{ id: string }> }))).rows[0]?.id;
    await client.end();
    if (instance !== undefined) await removeInstanceObjects(instance);
    await database.drop();
  }
  fs.rmSync(dir, { recursive: true, force: true });
});

test(`an installation made by release ${PREVIOUS_RELEASE} is found whole by the current code (SQLite, or PostgreSQL with SLIPWAY_TEST_DATABASE_URL)`, async () => {
  const release = await buildRelease();
  database = await testDatabase();
  const env = testEnv(dir, database === undefined ? {} : { SLIPWAY_DATABASE_URL: database.url });

  const old = await spawnServerProcess(env, [], { root: release });
  running.push(old);
  const states = await createFixture(serverAt(old.url));

  if (database !== undefined) {
    // A rolling upgrade (several instances on PostgreSQL): the current code starts beside the
    // running previous release, migrates the shared database, and the previous instance keeps serving.
    const key = fs.readFileSync(path.join(dir, 'secret.key'), 'utf8').trim();
    const beside = await spawnServerProcess(testEnv(fs.mkdtempSync(path.join(dir, 'beside-')), { SLIPWAY_DATABASE_URL: database.url, SLIPWAY_SECRET_KEY: key }));
    running.push(beside);
    await rollingCheck(serverAt(old.url), serverAt(beside.url), states);
    await beside.kill();
  }
  await old.kill();

  const current = await spawnServerProcess(env);
  running.push(current);
  await verifyFixture(serverAt(current.url), states);
});
