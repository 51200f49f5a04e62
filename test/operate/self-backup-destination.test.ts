// Self-backups in a §20 backup destination (contract §25) against a real S3-protocol server on loopback: backup by name, restore over the installation, restore onto a new host from the destination's settings; bad input writes nothing.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { openDatabase } from '../../src/db/database.js';
import { MAGIC } from '../../src/operate/backup-format.js';
import { cli } from '../helpers/cli.js';
import { S3_ACCESS_KEY, S3_SECRET_KEY, startS3, type TestS3 } from '../helpers/s3.js';
import { startTestServer, testDatabase, testEnv, type TestServer } from '../helpers/server.js';

describe('self-backups in a backup destination', () => {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'slipway-self-dest-'));
  const drops: Array<() => Promise<void>> = [];
  let s3: TestS3;
  let s: TestServer | undefined;
  let dataDir = '';
  let url: string | undefined;
  let email = '';
  let name = '';
  /** A destination name with a space and capitals (contract §20 gives no rule): one argv element, matched as given. */
  const DEST = 'Offsite S3';

  const run = (dir: string, args: string[], databaseUrl = url) =>
    cli(['server', ...args], { home: root, env: testEnv(dir, { SLIPWAY_ALLOW_PRIVATE_TARGETS: 'true', ...(databaseUrl === undefined ? {} : { SLIPWAY_DATABASE_URL: databaseUrl }) }) });
  const settings = (overrides: Record<string, unknown> = {}) => ({
    type: 's3',
    endpoint: s3.endpoint,
    region: 'us-east-1',
    bucket: s3.bucket,
    prefix: 'slipway',
    access_key_id: S3_ACCESS_KEY,
    secret_access_key: S3_SECRET_KEY,
    force_path_style: true,
    ...overrides,
  });

  before(async () => {
    s3 = await startS3();
    const database = await testDatabase();
    if (database !== undefined) drops.push(database.drop);
    url = database?.url;
    s = await startTestServer({ SLIPWAY_ALLOW_PRIVATE_TARGETS: 'true', ...(url === undefined ? {} : { SLIPWAY_DATABASE_URL: url }) });
    dataDir = s.dataDir;
    const user = await s.newUser('operator');
    email = user.email;
    const created = await s.request('POST', '/api/v1/backup-destinations', { token: user.token, body: { name: DEST, ...settings() } });
    assert.equal(created.status, 201, created.text);
  });
  after(async () => {
    await s?.close();
    for (const drop of drops) await drop();
    await s3?.close();
    fs.rmSync(root, { recursive: true, force: true });
    if (dataDir !== '') fs.rmSync(dataDir, { recursive: true, force: true });
  });

  test('backup --destination NAME while serving: one encrypted object, named on stdout; an unknown destination or two targets are refused', async () => {
    const backedUp = await run(dataDir, ['backup', '--destination', DEST]);
    assert.equal(backedUp.code, 0, backedUp.stderr);
    name = backedUp.stdout.trim();
    assert.match(name, /^slipway-self-backup-\d{4}-.*\.slipway-backup$/);
    assert.match(backedUp.stderr, /restore --destination 'Offsite S3' --backup/, 'the command to copy quotes the name');
    const objects = await s3.objectFiles();
    assert.equal(objects.length, 1);
    assert.ok(objects[0]?.startsWith(`slipway/slipway-self-backups/${name}`), objects[0]);
    const stored = fs.readFileSync(path.join(s3.directory, s3.bucket, objects[0] ?? ''));
    assert.ok(stored.subarray(0, MAGIC.length).equals(MAGIC), 'a self-backup file');
    assert.equal(stored.indexOf(Buffer.from(email)), -1, 'encrypted');

    const unknown = await run(dataDir, ['backup', '--destination', 'nowhere']);
    assert.equal(unknown.code, 1);
    assert.match(unknown.stderr, /no backup destination "nowhere"/);
    assert.equal((await run(dataDir, ['backup', '--destination', DEST, '--file', path.join(root, 'x')])).code, 2);
    assert.equal((await s3.objectFiles()).length, 1, 'nothing more written');
  });

  test('restore from the destination: over the installation with --force, and onto a new host from its settings; bad input writes nothing', async () => {
    assert.ok(name !== '', 'the backup test ran');
    await s?.close();
    s = undefined;

    // A name is matched as given, then regardless of case (names stored before they kept their case are lower case).
    const refused = await run(dataDir, ['restore', '--destination', 'offsite s3', '--backup', name]);
    assert.match(refused.stderr, /holds (an )?installation.*--force.*Nothing was written/);
    const missing = await run(dataDir, ['restore', '--destination', 'offsite s3', '--backup', 'slipway-self-backup-none.slipway-backup', '--force']);
    assert.equal(missing.code, 1);
    assert.match(missing.stderr, new RegExp(`holds no self-backup.*the newest: ${name.replace(/\./g, '\\.')}.*Nothing was written`));
    const over = await run(dataDir, ['restore', '--destination', DEST, '--backup', name, '--force']);
    assert.equal(over.code, 0, over.stderr);

    // A new host: the key copied, nothing else.
    const fresh = path.join(root, 'new-host');
    fs.mkdirSync(fresh, { mode: 0o700 });
    fs.copyFileSync(path.join(dataDir, 'secret.key'), path.join(fresh, 'secret.key'));
    const freshDatabase = await testDatabase();
    if (freshDatabase !== undefined) drops.push(freshDatabase.drop);
    const onFresh = (args: string[]) => run(fresh, args, freshDatabase?.url);
    const noInstallation = await onFresh(['restore', '--destination', DEST, '--backup', name]);
    assert.equal(noInstallation.code, 2);
    assert.match(noInstallation.stderr, /holds no installation to look backup destination "Offsite S3" up in.*--destination-settings/);
    const wrongFile = path.join(root, 'wrong.json');
    fs.writeFileSync(wrongFile, JSON.stringify(settings({ access_key_id: 'NOT-A-KEY' })));
    const denied = await onFresh(['restore', '--destination-settings', wrongFile, '--backup', name]);
    assert.equal(denied.code, 1);
    assert.match(denied.stderr, /refused the credentials.*Nothing was written/);
    assert.deepEqual(fs.readdirSync(fresh), ['secret.key'], 'the data directory as it was: no lock, no staging');

    const goodFile = path.join(root, 'offsite.json');
    fs.writeFileSync(goodFile, JSON.stringify(settings()));
    const restored = await onFresh(['restore', '--destination-settings', goodFile, '--backup', name]);
    assert.equal(restored.code, 0, restored.stderr);
    const db = await openDatabase({ file: path.join(fresh, 'slipway.db'), url: freshDatabase?.url });
    try {
      assert.equal((await db.selectFrom('users').select('email').where('email', '=', email).executeTakeFirst())?.email, email);
      assert.equal((await db.selectFrom('backup_destinations').select('name').executeTakeFirst())?.name, DEST);
    } finally {
      await db.destroy();
    }
  });
});
