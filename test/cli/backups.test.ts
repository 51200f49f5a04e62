// End-to-end test of the backup commands (`slipway destinations …`, `slipway db backup-schedule|backup|backups|restore`) against a real server, s3rver and the redis stand-in.
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { cli } from '../helpers/cli.js';
import { STAND_IN_IMAGES, databaseContainer, runIn, waitForStatus } from '../helpers/databases.js';
import { S3_ACCESS_KEY, S3_SECRET_KEY, startS3, type TestS3 } from '../helpers/s3.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

describe('slipway backup commands', () => {
  let server: TestServer;
  let s3: TestS3;
  let home: string;
  let user: Awaited<ReturnType<TestServer['newUser']>>;
  let dbId: string;
  const run = (args: string[], input?: string) => cli(args, { home, env: { SLIPWAY_URL: server.url, SLIPWAY_API_KEY: user.apiKey }, ...(input === undefined ? {} : { input }) });
  const keys = async (): Promise<string[]> => {
    const password = (await server.request('GET', `/api/v1/databases/${dbId}/credentials`, { token: user.token })).json.password as string;
    const out = await runIn((await databaseContainer(dbId))!.Id, ['redis-cli', '--no-auth-warning', 'keys', '*'], { REDISCLI_AUTH: password });
    return out.split('\n').map((k) => k.trim()).filter(Boolean).sort();
  };

  before(async () => {
    home = await mkdtemp(path.join(os.tmpdir(), 'slipway-backup-cli-'));
    s3 = await startS3();
    server = await startTestServer({ ...STAND_IN_IMAGES, SLIPWAY_ALLOW_PRIVATE_TARGETS: 'true' });
    user = await server.newUser('backupcli');
    const created = await server.request('POST', '/api/v1/databases', { token: user.token, body: { name: 'cache', engine: 'redis' } });
    dbId = created.json.id;
    assert.equal((await waitForStatus(server, user.token, dbId)).status, 'running');
  });
  after(async () => {
    await server?.close();
    await s3?.close();
    await rm(home, { recursive: true, force: true });
  });

  test('destinations: add (the S3 secret from stdin, never an argument), test, list; a wrong secret names the failing step', async () => {
    const added = await run(['destinations', 'add', 'offsite', '--type', 's3', '--endpoint', s3.endpoint, '--bucket', s3.bucket, '--access-key-id', S3_ACCESS_KEY, '--path-style'], `${S3_SECRET_KEY}\n`);
    assert.equal(added.code, 0, added.stderr);
    assert.match(added.stdout, /Added destination offsite \(s3\)/);
    const tested = await run(['destinations', 'test', 'offsite']);
    assert.equal(tested.code, 0, tested.stderr);
    assert.match(tested.stdout, /works/);
    // s3rver checks the access key id, not v4 signatures: a wrong key id is the wrong credentials.
    // A name with a space and capitals (contract §20 gives no rule) is one argv element, kept as given.
    const wrong = await run(['destinations', 'add', 'Wrong Key', '--type', 's3', '--endpoint', s3.endpoint, '--bucket', s3.bucket, '--access-key-id', 'NOT-A-KEY', '--path-style'], 'not-the-secret\n');
    assert.equal(wrong.code, 0, wrong.stderr);
    assert.match(wrong.stdout, /Added destination Wrong Key \(s3\)\. Check it with `slipway destinations test 'Wrong Key'`/);
    const failed = await run(['destinations', 'test', 'Wrong Key']);
    assert.equal(failed.code, 1);
    assert.match(failed.stderr, /destination Wrong Key failed at auth/);
    assert.equal((await run(['destinations', 'rm', 'Wrong Key', '--yes'])).code, 0);
    const list = await run(['destinations', 'ls']);
    assert.match(list.stdout, /offsite\s+s3/);
    assert.doesNotMatch(list.stdout, /Wrong Key/);
  });

  test('schedule, backup now (waits until verified), list, restore with a confirmation naming what is replaced', async () => {
    const scheduled = await run(['db', 'backup-schedule', 'cache', '--schedule', '0 3 * * *', '--destination', 'offsite', '--keep', '5']);
    assert.equal(scheduled.code, 0, scheduled.stderr);
    assert.match(scheduled.stdout, /0 3 \* \* \* \(UTC\)[\s\S]*offsite[\s\S]*5 verified backups/);
    const refusedRemoval = await run(['destinations', 'rm', 'offsite', '--yes']);
    assert.equal(refusedRemoval.code, 1);
    assert.match(refusedRemoval.stderr, /cache/, 'a destination a schedule uses is not removed, and the database is named');

    const password = (await server.request('GET', `/api/v1/databases/${dbId}/credentials`, { token: user.token })).json.password as string;
    await runIn((await databaseContainer(dbId))!.Id, ['redis-cli', '--no-auth-warning', 'mset', 'a', '1', 'b', '2'], { REDISCLI_AUTH: password });
    const backup = await run(['db', 'backup', 'cache']);
    assert.equal(backup.code, 0, backup.stderr);
    assert.match(backup.stderr, /verifying by a restore/);
    assert.match(backup.stdout, /Backup ([0-9a-f]{8}) of cache is verified/);
    const id = /Backup ([0-9a-f]{8})/.exec(backup.stdout)![1]!;
    const listed = await run(['db', 'backups', 'cache']);
    assert.match(listed.stdout, new RegExp(`${id}\\s+verified\\s+manual`));

    await runIn((await databaseContainer(dbId))!.Id, ['redis-cli', '--no-auth-warning', 'set', 'c', '3'], { REDISCLI_AUTH: password });
    const declined = await run(['db', 'restore', 'cache', '--backup', id], 'n\n');
    assert.equal(declined.code, 1);
    assert.match(declined.stderr, new RegExp(`Replace ALL the data of database cache with backup ${id} taken `));
    assert.match(declined.stderr, /not restored/);
    assert.deepEqual(await keys(), ['a', 'b', 'c'], 'nothing replaced');
    const restored = await run(['db', 'restore', 'cache', '--backup', id, '--yes']);
    assert.equal(restored.code, 0, restored.stderr);
    assert.match(restored.stdout, new RegExp(`Restored backup ${id} into cache \\(the data before it is in backup [0-9a-f]{8}\\)`));
    assert.deepEqual(await keys(), ['a', 'b']);

    // Point in time needs a moment and a new database, and is PostgreSQL's only (this one is Redis).
    const neither = await run(['db', 'restore', 'cache', '--yes']);
    assert.equal(neither.code, 1);
    assert.match(neither.stderr, /--backup ID, or --at TIME --into NEW/);
    const noInto = await run(['db', 'restore', 'cache', '--at', '2026-11-28T21:00:00Z', '--yes']);
    assert.match(noInto.stderr, /goes into a new database: add --into NAME/);
    const notPostgres = await run(['db', 'restore', 'cache', '--at', '2026-11-28T21:00:00Z', '--into', 'cache-then', '--yes']);
    assert.equal(notPostgres.code, 1);
    assert.match(notPostgres.stderr, /restore|point/i);
    assert.equal((await server.request('GET', '/api/v1/databases', { token: user.token })).json.some((d: { name: string }) => d.name === 'cache-then'), false, 'no database created');
    const pitrOnRedis = await run(['db', 'backup-schedule', 'cache', '--schedule', '0 3 * * *', '--destination', 'offsite', '--pitr']);
    assert.equal(pitrOnRedis.code, 1);
    assert.match(pitrOnRedis.stderr, /pitr|point/i);

    const off = await run(['db', 'backup-schedule', 'cache', '--off']);
    assert.match(off.stdout, /no backup schedule now/);
    const missing = await run(['db', 'restore', 'cache', '--backup', 'ffffffff', '--yes']);
    assert.equal(missing.code, 1);
    assert.match(missing.stderr, /no backup "ffffffff" of database cache/);
  });
});
