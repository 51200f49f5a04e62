// End to end, point-in-time recovery (decisions §20, `pitr`) with a stand-in PostgreSQL and a local destination: the log streamed by a companion, a base backup, then restore {at, into}: row A there, row B not.
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, test } from 'node:test';
import { eventually } from '../helpers/apps.js';
import { assertError } from '../helpers/api-assert.js';
import { STAND_IN_IMAGES, databaseContainer, docker, psql, waitForStatus } from '../helpers/databases.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { LABEL_COMPANION_OF } from '../../src/runtime/service.js';

type User = Awaited<ReturnType<TestServer['newUser']>>;

describe('point-in-time recovery (PostgreSQL)', () => {
  let s: TestServer;
  let alice: User;
  let dbId: string;
  let destinationId: string;
  let creds: { username: string; password: string; database: string };
  let containerId: string;

  before(async () => {
    s = await startTestServer({ ...STAND_IN_IMAGES, SLIPWAY_PITR_ROUND_SECONDS: '2' }, undefined, { log: (level, message, detail) => process.env['PITR_DEBUG'] === undefined || process.stderr.write(`[${level}] ${message} ${JSON.stringify(detail ?? {})}\n`) });
    alice = await s.newUser('alice');
    destinationId = (await s.request('POST', '/api/v1/backup-destinations', { token: alice.token, body: { name: 'here', type: 'local' } })).json.id;
    const created = await s.request('POST', '/api/v1/databases', { token: alice.token, body: { name: 'ledger', engine: 'postgres' } });
    assert.equal(created.status, 201, created.text);
    dbId = created.json.id;
    assert.equal((await waitForStatus(s, alice.token, dbId)).status, 'running');
    creds = (await s.request('GET', `/api/v1/databases/${dbId}/credentials`, { token: alice.token })).json;
    containerId = (await databaseContainer(dbId))!.Id;
  });
  after(async () => {
    await s?.close();
  });

  const receivers = () => docker.listContainers({ all: true, filters: { label: [`${LABEL_COMPANION_OF}=${dbId}`] } });
  const windowOf = async (id: string) => (await s.request('GET', `/api/v1/databases/${id}/recovery-window`, { token: alice.token })).json;
  const restore = (id: string, body: object) => s.request('POST', `/api/v1/databases/${id}/restore`, { token: alice.token, body });

  test('pitr: true streams the log through a companion; restore {at, into} recovers to that moment; pitr off removes the companion and the slot', async () => {
    assertError(await restore(dbId, { at: new Date().toISOString(), into: 'early' }), 409, 'invalid_state', 'not a pitr database yet');
    const set = await s.request('PATCH', `/api/v1/databases/${dbId}`, { token: alice.token, body: { backup: { schedule: '0 3 * * *', destination_id: destinationId, keep: 2, pitr: true } } });
    assert.equal(set.status, 200, set.text);
    assert.equal(set.json.backup.pitr, true);

    const first = await eventually(async () => {
      const w = await windowOf(dbId);
      return w.from !== null ? w : undefined;
    }, 150_000, 'the first base backup and archived log');
    assert.equal(first.pitr, true);
    assert.equal(first.base_backups, 1);
    const [receiver] = await receivers();
    assert.ok(receiver !== undefined && receiver.State === 'running', 'a receiver companion runs');
    assert.deepEqual(receiver.Ports.filter((p) => p.PublicPort !== undefined), [], 'the receiver publishes no port');

    await psql(containerId, creds, "create table entries (name text); insert into entries values ('A')");
    await sleep(1100);
    const at = new Date().toISOString();
    await sleep(1100);
    await psql(containerId, creds, "insert into entries values ('B')");
    const window = await eventually(async () => {
      const w = await windowOf(dbId);
      return w.until !== null && w.until > at ? w : undefined;
    }, 60_000, 'the log up to the chosen time to be archived');

    // Refusals change nothing.
    assertError(await restore(dbId, { at }), 400, 'validation_error', 'at without into');
    const early = await restore(dbId, { at: new Date(Date.parse(window.from) - 3_600_000).toISOString(), into: 'too-early' });
    assertError(early, 400, 'validation_error', 'before the window');
    assert.ok(early.json.message.includes(window.from), `the message names the window: ${early.json.message}`);
    assertError(await restore(dbId, { at: 'yesterday', into: 'bad-time' }), 400, 'validation_error');

    const started = await restore(dbId, { at, into: 'ledger-then' });
    assert.equal(started.status, 202, started.text);
    const targetId = started.json.target_database_id;
    const done = await eventually(async () => {
      const r = await s.request('GET', `/api/v1/databases/${dbId}/restores/${started.json.id}`, { token: alice.token });
      return r.json.status === 'running' ? undefined : r.json;
    }, 240_000, 'the point-in-time restore to end');
    assert.equal(done.status, 'succeeded', done.error);
    assert.equal((await waitForStatus(s, alice.token, targetId)).status, 'running');
    const copyCreds = (await s.request('GET', `/api/v1/databases/${targetId}/credentials`, { token: alice.token })).json;
    assert.notEqual(copyCreds.password, creds.password);
    const copy = (await databaseContainer(targetId))!.Id;
    assert.equal((await psql(copy, copyCreds, 'select name from entries order by name')).trim(), 'A', 'row A is there, row B is not');
    assert.equal((await psql(containerId, creds, 'select count(*) from entries')).trim(), '2', 'the source is untouched');
    assertError(await restore(targetId, { at, into: 'again' }), 409, 'invalid_state', 'the copy has no pitr');

    const off = await s.request('PATCH', `/api/v1/databases/${dbId}`, { token: alice.token, body: { backup: { schedule: '0 3 * * *', destination_id: destinationId, pitr: false } } });
    assert.equal(off.status, 200, off.text);
    await eventually(async () => ((await receivers()).length === 0 ? true : undefined), 30_000, 'the receiver to be removed');
    await eventually(async () => ((await psql(containerId, creds, 'select count(*) from pg_replication_slots')).trim() === '0' ? true : undefined), 30_000, 'the slot to be dropped');
  });
});
