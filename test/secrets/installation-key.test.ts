// Unit tests of the installation key: AES-256-GCM values bound to their place, the key file, start-up checks, rotation.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, test } from 'node:test';
import { ConfigError, loadConfig } from '../../src/config.js';
import { DbAppConfigStore, readKeyCheck, reencryptAll, writeKeyCheck } from '../../src/db/app-config-store.js';
import { instanceId, openDatabase, type Db } from '../../src/db/database.js';
import { KEY_FILE, NEW_KEY_FILE, writeKeyFile } from '../../src/secrets/installation-key.js';
import { rotateInstallationKey } from '../../src/secrets/rotate-key.js';
import { unlockInstallation, type KeyCheckStore } from '../../src/secrets/unlock.js';
import { DecryptionError, ValueCipher } from '../../src/secrets/value-cipher.js';

const tempDir = (): string => fs.mkdtempSync(path.join(os.tmpdir(), 'slipway-key-'));

/** A key check kept in memory (the database's role). */
function memoryChecks(initial: string | null = null): KeyCheckStore & { value: string | null } {
  const store = {
    value: initial,
    read: async () => store.value,
    write: async (check: string) => {
      store.value = check;
    },
  };
  return store;
}

describe('value cipher', () => {
  const key = crypto.randomBytes(32);
  const cipher = new ValueCipher(key);

  test('round-trips any string; the ciphertext holds no trace of the value and differs every time', () => {
    for (const value of ['', 'postgres://user:pa55@db/app', 'ünïcødé ✓ \n\t', 'x'.repeat(32 * 1024)]) {
      const a = cipher.encrypt(value, 'env:d:KEY');
      const b = cipher.encrypt(value, 'env:d:KEY');
      assert.notEqual(a, b);
      assert.ok(a.startsWith('v1:'));
      if (value.length > 3) assert.ok(!a.includes(value) && !Buffer.from(a.slice(3), 'base64').includes(Buffer.from(value)));
      assert.equal(cipher.decrypt(a, 'env:d:KEY'), value);
    }
  });

  test('a value does not open under another key, in another place, or once tampered with', () => {
    const sealed = cipher.encrypt('s3cret', 'env:dep-1:TOKEN');
    assert.throws(() => new ValueCipher(crypto.randomBytes(32)).decrypt(sealed, 'env:dep-1:TOKEN'), DecryptionError);
    assert.throws(() => cipher.decrypt(sealed, 'env:dep-2:TOKEN'), DecryptionError);
    assert.throws(() => cipher.decrypt(sealed, 'env:dep-1:OTHER'), DecryptionError);
    const raw = Buffer.from(sealed.slice(3), 'base64');
    raw[raw.length - 1] = (raw[raw.length - 1] ?? 0) ^ 1;
    assert.throws(() => cipher.decrypt(`v1:${raw.toString('base64')}`, 'env:dep-1:TOKEN'), DecryptionError);
    assert.throws(() => cipher.decrypt('plain text', 'env:dep-1:TOKEN'), DecryptionError);
    assert.throws(() => cipher.decrypt('v1:AAAA', 'env:dep-1:TOKEN'), DecryptionError);
  });

  test('the key check value matches its own key only; keys are exactly 32 bytes', () => {
    const check = cipher.keyCheck();
    assert.ok(cipher.matchesKeyCheck(check));
    assert.ok(!new ValueCipher(crypto.randomBytes(32)).matchesKeyCheck(check));
    assert.throws(() => new ValueCipher(crypto.randomBytes(16)), TypeError);
  });
});

describe('SLIPWAY_SECRET_KEY parsing', () => {
  test('32 bytes of base64 are accepted; anything else stops the start naming the variable', () => {
    const key = crypto.randomBytes(32);
    assert.deepEqual(loadConfig({ SLIPWAY_SECRET_KEY: key.toString('base64') }).secretKey, key);
    assert.equal(loadConfig({}).secretKey, undefined);
    for (const bad of [crypto.randomBytes(16).toString('base64'), crypto.randomBytes(33).toString('base64'), 'not base64!', 'a'.repeat(44)]) {
      assert.throws(() => loadConfig({ SLIPWAY_SECRET_KEY: bad }), (err: unknown) => err instanceof ConfigError && /SLIPWAY_SECRET_KEY/.test(err.message), bad);
    }
  });
});

describe('unlocking the installation', () => {
  test('first start without SLIPWAY_SECRET_KEY generates <data>/secret.key once, mode 0600, and stores a key check', async () => {
    const dir = tempDir();
    const checks = memoryChecks();
    const first = await unlockInstallation(undefined, dir, checks);
    const file = path.join(dir, KEY_FILE);
    assert.equal(fs.statSync(file).mode & 0o777, 0o600);
    assert.equal(Buffer.from(fs.readFileSync(file, 'utf8').trim(), 'base64').length, 32);
    assert.ok(checks.value !== null && first.cipher.matchesKeyCheck(checks.value));
    const sealed = first.cipher.encrypt('v', 'c');
    const again = await unlockInstallation(undefined, dir, checks);
    assert.equal(again.cipher.decrypt(sealed, 'c'), 'v', 'the second start uses the same key');
    // A key file others can read is tightened.
    fs.chmodSync(file, 0o644);
    await unlockInstallation(undefined, dir, checks);
    assert.equal(fs.statSync(file).mode & 0o777, 0o600);
  });

  test('a configured key is used and no file is written; a different key later stops the start with a clear message', async () => {
    const dir = tempDir();
    const checks = memoryChecks();
    const key = crypto.randomBytes(32);
    const unlocked = await unlockInstallation(key, dir, checks);
    assert.deepEqual(unlocked.source, { kind: 'env' });
    assert.ok(!fs.existsSync(path.join(dir, KEY_FILE)));
    await assert.rejects(unlockInstallation(crypto.randomBytes(32), dir, checks), (err: unknown) => err instanceof ConfigError && /SLIPWAY_SECRET_KEY is not the key/.test(err.message));
    // Unset, with no key file: the file is missing, and none is generated over the encrypted data.
    await assert.rejects(unlockInstallation(undefined, dir, checks), (err: unknown) => err instanceof ConfigError && /is missing/.test(err.message) && /restore/.test(err.message));
    assert.ok(!fs.existsSync(path.join(dir, KEY_FILE)));
  });

  test('a replaced key file stops the start, naming the file', async () => {
    const dir = tempDir();
    const checks = memoryChecks();
    await unlockInstallation(undefined, dir, checks);
    writeKeyFile(path.join(dir, KEY_FILE), crypto.randomBytes(32).toString('base64'));
    await assert.rejects(unlockInstallation(undefined, dir, checks), (err: unknown) => err instanceof ConfigError && err.message.includes(path.join(dir, KEY_FILE)));
  });
});

describe('key rotation', () => {
  async function setup(): Promise<{ dir: string; db: Db; store: DbAppConfigStore; depId: string; buildId: string }> {
    const dir = tempDir();
    const db = await openDatabase({ file: path.join(dir, 'slipway.db') });
    await instanceId(db);
    const unlocked = await unlockInstallation(undefined, dir, { read: () => readKeyCheck(db), write: (c) => writeKeyCheck(db, c) });
    const now = new Date().toISOString();
    await db.insertInto('users').values({ id: 'u1', email: 'u@x', password_hash: 'x', is_admin: 0, created_at: now, updated_at: now }).execute();
    const depId = crypto.randomUUID();
    await db
      .insertInto('deployments')
      .values({
        id: depId, user_id: 'u1', name: 'a', subdomain: 'a', source_type: 'archive', repo_url: null, branch: null, dockerfile_path: 'Dockerfile',
        status: 'pending', upload_id: null, upload_size: null, upload_sha256: null, live_build_id: null, health_check_path: null,
        memory_bytes: null, nano_cpus: null, created_at: now, updated_at: now,
      })
      .execute();
    const buildId = crypto.randomUUID();
    await db.insertInto('builds').values({ id: buildId, deployment_id: depId, status: 'succeeded', commit_sha: 'x', source_ref: 'x', error: null, image_id: null, container_id: null, upstreams: null, started_at: now, finished_at: now }).execute();
    const store = new DbAppConfigStore(db, unlocked.cipher);
    await store.change(depId, { set: new Map([['TOKEN', 'rotate-me-123'], ['PLAIN', 'p']]), unset: [], secret: true }, () => undefined);
    await store.recordForBuild(depId, buildId);
    return { dir, db, store, depId, buildId };
  }

  const unlockDb = (db: Db, dir: string, key?: Buffer) => unlockInstallation(key, dir, { read: () => readKeyCheck(db), write: (c) => writeKeyCheck(db, c) });

  test('with a key file: every value moves to a new key file; the old key no longer opens the database', async () => {
    const { dir, db, depId, buildId } = await setup();
    const oldKey = fs.readFileSync(path.join(dir, KEY_FILE), 'utf8');
    const unlocked = await unlockDb(db, dir);
    const { count } = await rotateInstallationKey({ unlocked, dataDir: dir, newKey: undefined, reencrypt: (a, b) => reencryptAll(db, a, b) });
    assert.equal(count, 3, 'two variables and one build configuration');
    assert.notEqual(fs.readFileSync(path.join(dir, KEY_FILE), 'utf8'), oldKey);
    assert.equal(fs.statSync(path.join(dir, KEY_FILE)).mode & 0o777, 0o600);
    assert.ok(!fs.existsSync(path.join(dir, NEW_KEY_FILE)));
    const store = new DbAppConfigStore(db, (await unlockDb(db, dir)).cipher);
    assert.deepEqual((await store.current(depId)).map((v) => [v.key, v.value]), [['PLAIN', 'p'], ['TOKEN', 'rotate-me-123']]);
    assert.deepEqual((await store.buildConfig(buildId))?.map((v) => v.value), ['p', 'rotate-me-123']);
    await assert.rejects(unlockDb(db, dir, Buffer.from(oldKey.trim(), 'base64')), ConfigError);
    await db.destroy();
  });

  test('a rotation interrupted after the database moved is completed at the next start (secret.key.new adopted)', async () => {
    const { dir, db, depId } = await setup();
    const unlocked = await unlockDb(db, dir);
    const next = crypto.randomBytes(32);
    writeKeyFile(path.join(dir, NEW_KEY_FILE), next.toString('base64'));
    await reencryptAll(db, unlocked.cipher, new ValueCipher(next));
    // (the process died before renaming secret.key.new over secret.key)
    const recovered = await unlockDb(db, dir);
    assert.ok(!fs.existsSync(path.join(dir, NEW_KEY_FILE)));
    assert.deepEqual(Buffer.from(fs.readFileSync(path.join(dir, KEY_FILE), 'utf8').trim(), 'base64'), next);
    assert.equal((await new DbAppConfigStore(db, recovered.cipher).current(depId)).length, 2);
    await db.destroy();
  });

  test('with SLIPWAY_SECRET_KEY, the new key must be given; the database then opens with it only', async () => {
    const dir = tempDir();
    const db = await openDatabase({ file: path.join(dir, 'slipway.db') });
    await instanceId(db);
    const oldKey = crypto.randomBytes(32);
    const unlocked = await unlockDb(db, dir, oldKey);
    await assert.rejects(
      rotateInstallationKey({ unlocked, dataDir: dir, newKey: undefined, reencrypt: (a, b) => reencryptAll(db, a, b) }),
      (err: unknown) => err instanceof ConfigError && /SLIPWAY_NEW_SECRET_KEY/.test(err.message),
    );
    const newKey = crypto.randomBytes(32);
    await rotateInstallationKey({ unlocked, dataDir: dir, newKey, reencrypt: (a, b) => reencryptAll(db, a, b) });
    await assert.rejects(unlockDb(db, dir, oldKey), ConfigError);
    await unlockDb(db, dir, newKey);
    await db.destroy();
  });
});
