// Two real instances on one PostgreSQL: a database whose creating instance is killed mid-creation is finished by the leader, once.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { eventually } from '../helpers/apps.js';
import { STAND_IN_IMAGES, databaseContainer, docker, runIn } from '../helpers/databases.js';
import { startCluster, type Cluster, type Instance } from '../helpers/instances.js';
import { LABEL_SERVICE } from '../../src/runtime/service.js';
import { dropClusterDatabase, loginAs, testDatabase } from '../helpers/server.js';

describe('a database left half-created by a killed instance', async () => {
  const database = await testDatabase();
  // The SQLite pass has no PostgreSQL: scripts/test.mjs runs test/ha in its PostgreSQL pass only.
  if (database === undefined) return;
  let cluster: Cluster;
  before(async () => {
    // An instance silent 10 s is lost (30 s by default: test/api/config): the killed one's database is taken over sooner.
    cluster = await startCluster(database.url, 2, { ...STAND_IN_IMAGES, SLIPWAY_INSTANCE_LOST_SECONDS: '10' });
  });
  after(async () => {
    await cluster?.close();
    await dropClusterDatabase(database);
  });

  test('kill -9 of the instance creating it: the leader finishes it (running, one container, its credentials work)', async () => {
    const [leader, worker] = cluster.instances as [Instance, Instance];
    const email = `takeover-${process.pid}@test.local`;
    const password = 'password-takeover-1';
    assert.equal((await leader.request('POST', '/api/v1/users', { token: cluster.adminToken, body: { email, password } })).status, 201);
    const token = await loginAs(worker.url, email, password);
    const created = await worker.request('POST', '/api/v1/databases', { token, body: { name: 'orphan', engine: 'postgres' } });
    assert.equal(created.status, 201, created.text);
    assert.equal(created.json.status, 'creating');
    const id = created.json.id as string;
    // Killed at once: a PostgreSQL's first start (initdb) takes seconds, so the creation is cut short.
    await cluster.kill(worker);
    assert.equal((await leader.request('GET', `/api/v1/databases/${id}`, { token })).json.status, 'creating');

    // The worker's heartbeat goes stale after 10 s; the leader looks every 1.7 s.
    const finished = await eventually(async () => {
      const res = await leader.request('GET', `/api/v1/databases/${id}`, { token });
      return res.json.status === 'creating' ? undefined : res.json;
    }, 150_000, 'the leader to finish the database');
    assert.equal(finished.status, 'running', finished.error ?? '');
    const containers = await docker.listContainers({ all: true, filters: { label: [`${LABEL_SERVICE}=${id}`] } });
    assert.equal(containers.length, 1, 'one container for the database, not one per instance');
    const credentials = (await leader.request('GET', `/api/v1/databases/${id}/credentials`, { token })).json;
    const container = await databaseContainer(id);
    assert.ok(container !== undefined);
    const answer = await runIn(container.Id, ['psql', '-h', '127.0.0.1', '-U', credentials.username, '-d', credentials.database, '-Atc', 'select 40 + 2'], { PGPASSWORD: credentials.password });
    assert.equal(answer.trim(), '42');
    const removed = await leader.request('DELETE', `/api/v1/databases/${id}`, { token });
    assert.equal(removed.status, 204, `${removed.text}\n${leader.process?.output().slice(-3000)}`);
  });
});
