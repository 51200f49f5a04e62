// Scheduled jobs across instances (decisions §15, §22): two instances on PostgreSQL run a job due every 2 s; each due time runs exactly once.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import { busyboxArchive, createArchiveApp, deployAndWait, eventually } from '../helpers/apps.js';
import { startCluster, type Cluster, type Instance } from '../helpers/instances.js';
import { dropClusterDatabase, testDatabase } from '../helpers/server.js';

/** Due times the test waits for (at least 30, decisions §22's test). */
const DUE_TIMES = 30;

describe('jobs across instances', async () => {
  const database = await testDatabase();
  // The SQLite pass has no PostgreSQL: scripts/test.mjs runs test/ha in its PostgreSQL pass only.
  if (database === undefined) return;
  let cluster: Cluster;
  let token: string;

  before(async () => {
    cluster = await startCluster(database.url, 2);
    const [a] = cluster.instances as [Instance];
    const email = `ha-jobs-${process.pid}@example.test`;
    assert.equal((await a.request('POST', '/api/v1/users', { token: cluster.adminToken, body: { email, password: 'ha-password-1' } })).status, 201);
    token = (await a.request('POST', '/api/v1/auth/login', { body: { email, password: 'ha-password-1' } })).json.token as string;
  });
  after(async () => {
    await cluster?.close();
    await dropClusterDatabase(database);
  });

  test(`a job due every 2 s on two instances: ${DUE_TIMES} due times, ${DUE_TIMES} runs, none twice, none missed`, async () => {
    const [a, b] = cluster.instances as [Instance, Instance];
    const { archive } = await busyboxArchive();
    const app = await createArchiveApp(a, token, archive);
    assert.equal((await deployAndWait(a, token, app.id)).status, 200);
    const created = await b.request('POST', `/api/v1/deployments/${app.id}/jobs`, { token, body: { name: 'every-2s', schedule: '*/2 * * * * *', command: ['true'], concurrency: 'allow' } });
    assert.equal(created.status, 201, created.text);
    const runsPath = `/api/v1/deployments/${app.id}/jobs/${created.json.id}/runs`;
    type Run = { id: string; status: string; trigger: string; due_at: string };
    await eventually(async () => {
      const runs = (await a.request('GET', runsPath, { token })).json as Run[];
      return runs.filter((r) => r.status !== 'running').length >= DUE_TIMES + 1 ? true : undefined;
    }, (DUE_TIMES + 20) * 2000, `${DUE_TIMES} runs`);
    // Stopped before counting: no due time comes any more.
    assert.equal((await a.request('PATCH', `/api/v1/deployments/${app.id}/jobs/${created.json.id}`, { token, body: { schedule: '@monthly' } })).status, 200);
    const runs = await eventually(async () => {
      const list = (await b.request('GET', runsPath, { token })).json as Run[];
      return list.every((r) => r.status !== 'running') ? list : undefined;
    }, 20_000, 'every run ended');

    const due = runs.map((r) => Date.parse(r.due_at)).sort((x, y) => x - y);
    const first = due[0] as number;
    const last = due.at(-1) as number;
    const expected = (last - first) / 2000 + 1;
    assert.ok(expected >= DUE_TIMES, `${expected} due times`);
    assert.equal(new Set(due).size, due.length, 'no due time ran twice');
    assert.equal(due.length, expected, 'every due time between the first and the last ran');
    assert.ok(due.every((t) => t % 2000 === 0), 'runs are for due times only');
    assert.deepEqual([...new Set(runs.map((r) => r.status))], ['succeeded'], 'each run really ran');
    assert.ok(runs.every((r) => r.trigger === 'schedule'));

    // The database holds these runs and no other (whichever instance claimed each).
    const client = new pg.Client({ connectionString: database.url });
    await client.connect();
    try {
      const byInstance = await client.query<{ instance: string; n: string }>('select instance, count(*) as n from job_runs where job_id = $1 group by instance', [created.json.id]);
      assert.equal(byInstance.rows.reduce((sum, row) => sum + Number(row.n), 0), due.length);
    } finally {
      await client.end();
    }
  });
});
