// API tests: accounts — admin bootstrap, login/logout, bearer authentication, users, password change, rate limits, storage.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import SQLite from 'better-sqlite3';
import { loadConfig } from '../../src/config.js';
import { startServer } from '../../src/main.js';
import { assertError, assertNoLeak, assertUnauthorized } from '../helpers/api-assert.js';
import { ADMIN_EMAIL, ADMIN_PASSWORD, loginAs, request, startTestServer, testEnv, type TestServer } from '../helpers/server.js';

const sha256 = (value: string): string => crypto.createHash('sha256').update(value).digest('hex');

/** Runs `fn` on a read-write handle to the server's SQLite file (WAL: safe beside the server). */
function withDb<T>(dataDir: string, fn: (db: SQLite.Database) => T): T {
  const db = new SQLite(path.join(dataDir, 'slipway.db'));
  try {
    return fn(db);
  } finally {
    db.close();
  }
}

/** The bytes of the database file and its write-ahead log, as text, to search for secrets. */
function databaseBytes(dataDir: string): string {
  return ['slipway.db', 'slipway.db-wal']
    .map((f) => path.join(dataDir, f))
    .filter((f) => fs.existsSync(f))
    .map((f) => fs.readFileSync(f).toString('latin1'))
    .join('\n');
}

describe('admin bootstrap', () => {
  test('SLIPWAY_ADMIN_* creates that admin, who can create users', async () => {
    const s = await startTestServer();
    try {
      assert.equal(s.server.generatedAdmin, undefined);
      const me = await s.request('GET', '/api/v1/users/me', { token: s.adminToken });
      assert.equal(me.status, 200);
      assert.equal(me.json.email, ADMIN_EMAIL);
      const created = await s.request('POST', '/api/v1/users', { token: s.adminToken, body: { email: 'someone@test.local', password: 'long-enough-1' } });
      assert.equal(created.status, 201, created.text);
    } finally {
      await s.close();
    }
  });

  test('without SLIPWAY_ADMIN_* the first start creates admin@localhost with a generated password, once', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'slipway-test-'));
    const env = testEnv(dir, { SLIPWAY_ADMIN_EMAIL: '', SLIPWAY_ADMIN_PASSWORD: '' });
    const first = await startServer(loadConfig(env), { log: () => undefined });
    let password: string;
    try {
      assert.ok(first.generatedAdmin !== undefined);
      assert.equal(first.generatedAdmin.email, 'admin@localhost');
      password = first.generatedAdmin.password;
      assert.ok(password.length >= 16, 'a generated password is long');
      const token = await loginAs(first.url, 'admin@localhost', password);
      const made = await request(first.url, 'POST', '/api/v1/users', { token, body: { email: 'u@test.local', password: 'long-enough-1' } });
      assert.equal(made.status, 201, 'the generated admin is an administrator');
    } finally {
      await first.close();
    }
    const second = await startServer(loadConfig(env), { log: () => undefined });
    try {
      assert.equal(second.generatedAdmin, undefined, 'a second start generates nothing');
      await loginAs(second.url, 'admin@localhost', password);
    } finally {
      await second.close();
    }
  });
});

describe('accounts', () => {
  let s: TestServer;
  before(async () => {
    s = await startTestServer();
  });
  after(async () => {
    await s.close();
  });

  test('login answers 200 {token, expires_at, user} without the password', async () => {
    const user = await s.newUser('login');
    const res = await s.request('POST', '/api/v1/auth/login', { body: { email: user.email, password: user.password } });
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(Object.keys(res.json).sort(), ['expires_at', 'token', 'user']);
    assert.match(res.json.token, /^\S{32,}$/);
    const expires = Date.parse(res.json.expires_at);
    assert.ok(expires > Date.now() + 3_600_000, 'the session lasts at least an hour');
    assert.match(res.json.expires_at, /Z$/, 'UTC timestamp');
    assert.deepEqual(Object.keys(res.json.user).sort(), ['created_at', 'email', 'id']);
    assert.equal(res.json.user.email, user.email);
    assert.equal(res.json.user.id, user.userId);
    assertNoLeak(res, [user.password]);
    // The e-mail is matched without regard to case.
    const upper = await s.request('POST', '/api/v1/auth/login', { body: { email: user.email.toUpperCase(), password: user.password } });
    assert.equal(upper.status, 200);
  });

  test('a wrong password and an unknown e-mail get the same 401 invalid_credentials', async () => {
    const user = await s.newUser('badlogin');
    const wrong = await s.request('POST', '/api/v1/auth/login', { body: { email: user.email, password: 'not-the-password' } });
    const unknown = await s.request('POST', '/api/v1/auth/login', { body: { email: 'nobody@test.local', password: 'not-the-password' } });
    assertError(wrong, 401, 'invalid_credentials');
    assertError(unknown, 401, 'invalid_credentials');
    assert.deepEqual(wrong.json, unknown.json);
    assert.equal(wrong.headers.get('www-authenticate'), unknown.headers.get('www-authenticate'));
    // Nothing changed: the right password still works.
    await loginAs(s.url, user.email, user.password);
  });

  test('logout answers 204 and the token stops working; other sessions stay', async () => {
    const user = await s.newUser('logout');
    const other = await loginAs(s.url, user.email, user.password);
    const res = await s.request('POST', '/api/v1/auth/logout', { token: user.token });
    assert.equal(res.status, 204);
    assert.equal(res.text, '');
    assertUnauthorized(await s.request('GET', '/api/v1/users/me', { token: user.token }), 'logged-out token');
    assert.equal((await s.request('GET', '/api/v1/users/me', { token: other })).status, 200);
    assertUnauthorized(await s.request('POST', '/api/v1/auth/logout', { token: user.token }), 'second logout');
  });

  test('missing, malformed, unknown, expired and revoked credentials all get one 401 unauthorized', async () => {
    const user = await s.newUser('badauth');
    const expiring = await loginAs(s.url, user.email, user.password);
    withDb(s.dataDir, (db) =>
      db.prepare('UPDATE sessions SET expires_at = ? WHERE token_hash = ?').run('2000-01-01T00:00:00.000Z', sha256(expiring)),
    );
    const revoked = await loginAs(s.url, user.email, user.password);
    assert.equal((await s.request('POST', '/api/v1/auth/logout', { token: revoked })).status, 204);

    const cases: Array<[string, Record<string, string>]> = [
      ['missing', {}],
      ['empty', { authorization: '' }],
      ['basic scheme', { authorization: `Basic ${Buffer.from(`${user.email}:${user.password}`).toString('base64')}` }],
      ['no value', { authorization: 'Bearer' }],
      ['two values', { authorization: `Bearer ${user.token} x` }],
      ['garbage', { authorization: 'Bearer not-a-token' }],
      ['short key', { authorization: 'Bearer slw_k1_abc' }],
      ['unknown key', { authorization: `Bearer slw_k1_${'A'.repeat(43)}` }],
      ['unknown session', { authorization: `Bearer slw_s1_${'A'.repeat(43)}` }],
      ['expired session', { authorization: `Bearer ${expiring}` }],
      ['revoked session', { authorization: `Bearer ${revoked}` }],
    ];
    const bodies = new Set<string>();
    for (const [what, headers] of cases) {
      const res = await s.request('GET', '/api/v1/users/me', { headers });
      assertUnauthorized(res, what);
      bodies.add(res.text);
    }
    assert.equal(bodies.size, 1, `one answer for all: ${[...bodies].join(' | ')}`);
    // Same on a write endpoint: nothing is created.
    assertUnauthorized(await s.request('POST', '/api/v1/api-keys', { body: { name: 'x' } }));
    const keys = await s.request('GET', '/api/v1/api-keys', { token: user.token });
    assert.equal(keys.json.length, 1);
    // The expired session row is gone for good.
    assertUnauthorized(await s.request('GET', '/api/v1/users/me', { token: expiring }));
  });

  test('GET /users/me shows id, email, created_at and never a password', async () => {
    const user = await s.newUser('me');
    for (const token of [user.token, user.apiKey]) {
      const res = await s.request('GET', '/api/v1/users/me', { token });
      assert.equal(res.status, 200);
      assert.deepEqual(Object.keys(res.json).sort(), ['created_at', 'email', 'id']);
      assert.equal(res.json.id, user.userId);
      assert.equal(res.json.email, user.email);
      assert.ok(!Number.isNaN(Date.parse(res.json.created_at)));
      assert.doesNotMatch(res.text, /password|scrypt/i);
    }
  });

  test('POST /users: admin only, email_taken, short password, bad e-mail; nothing created on failure', async () => {
    const user = await s.newUser('nonadmin');
    const countUsers = (): number => withDb(s.dataDir, (db) => (db.prepare('SELECT count(*) AS n FROM users').get() as { n: number }).n);
    const before = countUsers();

    assertError(await s.request('POST', '/api/v1/users', { token: user.token, body: { email: 'x1@test.local', password: 'long-enough-1' } }), 403, 'forbidden');
    assertError(await s.request('POST', '/api/v1/users', { token: user.apiKey, body: { email: 'x1@test.local', password: 'long-enough-1' } }), 403, 'forbidden');
    assertError(await s.request('POST', '/api/v1/users', { token: s.adminToken, body: { email: user.email, password: 'long-enough-1' } }), 400, 'email_taken');
    assertError(
      await s.request('POST', '/api/v1/users', { token: s.adminToken, body: { email: user.email.toUpperCase(), password: 'long-enough-1' } }),
      400,
      'email_taken',
      'e-mail case is folded',
    );
    assertError(await s.request('POST', '/api/v1/users', { token: s.adminToken, body: { email: 'x2@test.local', password: 'short7!' } }), 400, 'validation_error');
    assertError(await s.request('POST', '/api/v1/users', { token: s.adminToken, body: { email: 'not-an-email', password: 'long-enough-1' } }), 400, 'validation_error');
    assertError(await s.request('POST', '/api/v1/users', { token: s.adminToken, body: { email: 'x3@test.local' } }), 400, 'validation_error');
    assertError(
      await s.request('POST', '/api/v1/users', { token: s.adminToken, body: { email: 'x4@test.local', password: 'long-enough-1', is_admin: true } }),
      400,
      'validation_error',
    );
    assert.equal(countUsers(), before, 'no user was created');

    const made = await s.request('POST', '/api/v1/users', { token: s.adminToken, body: { email: 'New.User@Test.Local', password: 'long-enough-1' } });
    assert.equal(made.status, 201);
    assert.deepEqual(Object.keys(made.json).sort(), ['created_at', 'email', 'id']);
    assert.equal(made.json.email, 'new.user@test.local');
    assert.equal(countUsers(), before + 1);
    // A created user is not an admin.
    const token = await loginAs(s.url, 'new.user@test.local', 'long-enough-1');
    assertError(await s.request('POST', '/api/v1/users', { token, body: { email: 'x5@test.local', password: 'long-enough-1' } }), 403, 'forbidden');
  });

  test('PUT /users/me/password: the three rules of the specification, each leaving the password as it was', async () => {
    const user = await s.newUser('pwrules');
    const put = (body: object): Promise<Awaited<ReturnType<TestServer['request']>>> =>
      s.request('PUT', '/api/v1/users/me/password', { token: user.token, body });
    const hashBefore = withDb(s.dataDir, (db) => (db.prepare('SELECT password_hash AS h FROM users WHERE id = ?').get(user.userId) as { h: string }).h);

    assertError(await put({ current_password: 'wrong-password', new_password: 'brand-new-password' }), 400, 'invalid_password', 'rule 1');
    // Rule 1 comes first: a wrong current password with a short new one is still invalid_password.
    assertError(await put({ current_password: 'wrong-password', new_password: 'short' }), 400, 'invalid_password', 'rule 1 before rule 2');
    assertError(await put({ current_password: user.password, new_password: 'seven77' }), 400, 'validation_error', 'rule 2');
    assertError(await put({ current_password: user.password, new_password: '' }), 400, 'validation_error', 'rule 2, empty');
    assertError(await put({ current_password: user.password, new_password: user.password }), 400, 'validation_error', 'rule 3');
    assertError(await put({ current_password: user.password }), 400, 'validation_error', 'missing field');
    assertError(await put({ current_password: user.password, new_password: 12345678 }), 400, 'validation_error', 'wrong type');

    const hashAfter = withDb(s.dataDir, (db) => (db.prepare('SELECT password_hash AS h FROM users WHERE id = ?').get(user.userId) as { h: string }).h);
    assert.equal(hashAfter, hashBefore, 'the password did not change');
    assert.equal((await s.request('GET', '/api/v1/users/me', { token: user.token })).status, 200, 'the session still works');
  });

  test('a password change revokes the other sessions, not the current one nor API keys', async () => {
    const user = await s.newUser('pwchange');
    const other = await loginAs(s.url, user.email, user.password);
    const res = await s.request('PUT', '/api/v1/users/me/password', {
      token: user.token,
      body: { current_password: user.password, new_password: 'a-new-password-9' },
    });
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(Object.keys(res.json), ['message']);
    assert.equal(typeof res.json.message, 'string');
    assertNoLeak(res, [user.password, 'a-new-password-9']);

    assert.equal((await s.request('GET', '/api/v1/users/me', { token: user.token })).status, 200, 'current session kept');
    assertUnauthorized(await s.request('GET', '/api/v1/users/me', { token: other }), 'other session revoked');
    assert.equal((await s.request('GET', '/api/v1/users/me', { token: user.apiKey })).status, 200, 'API key kept');
    assertError(await s.request('POST', '/api/v1/auth/login', { body: { email: user.email, password: user.password } }), 401, 'invalid_credentials');
    await loginAs(s.url, user.email, 'a-new-password-9');
  });

  test('a password change made with an API key revokes every session, and keeps the key', async () => {
    const user = await s.newUser('pwkey');
    const res = await s.request('PUT', '/api/v1/users/me/password', {
      token: user.apiKey,
      body: { current_password: user.password, new_password: 'another-password-9' },
    });
    assert.equal(res.status, 200, res.text);
    assertUnauthorized(await s.request('GET', '/api/v1/users/me', { token: user.token }));
    assert.equal((await s.request('GET', '/api/v1/users/me', { token: user.apiKey })).status, 200);
  });

  test('a server without SLIPWAY_INSECURE_FAST_PASSWORD_HASHING stores the standard cost (the test servers use the cheap one)', async () => {
    const standard = await startTestServer({ SLIPWAY_INSECURE_FAST_PASSWORD_HASHING: 'false' });
    try {
      const user = await standard.newUser('standard-cost');
      const hash = withDb(standard.dataDir, (db) => (db.prepare('SELECT password_hash FROM users WHERE email = ?').get(user.email) as { password_hash: string }).password_hash);
      assert.match(hash, /^scrypt\$32768\$8\$3\$/);
    } finally {
      await standard.close();
    }
  });

  test('passwords are stored as scrypt; API keys and session tokens only as SHA-256', async () => {
    const user = await s.newUser('storage');
    const created = await s.request('POST', '/api/v1/api-keys', { token: user.token, body: { name: 'stored' } });
    const key = created.json.key as string;
    const rows = withDb(s.dataDir, (db) => ({
      users: db.prepare('SELECT email, password_hash FROM users').all() as Array<{ email: string; password_hash: string }>,
      keys: db.prepare('SELECT key_hash FROM api_keys WHERE user_id = ?').all(user.userId) as Array<{ key_hash: string }>,
      sessions: db.prepare('SELECT token_hash FROM sessions WHERE user_id = ?').all(user.userId) as Array<{ token_hash: string }>,
    }));
    for (const row of rows.users) assert.match(row.password_hash, /^scrypt\$/, row.email);
    const mine = rows.users.find((r) => r.email === user.email);
    assert.ok(mine !== undefined && !mine.password_hash.includes(user.password));
    assert.ok(rows.keys.some((r) => r.key_hash === sha256(key)), 'the key is stored as its SHA-256');
    assert.ok(rows.sessions.some((r) => r.token_hash === sha256(user.token)), 'the session token is stored as its SHA-256');
    const bytes = databaseBytes(s.dataDir);
    for (const secret of [key, user.apiKey, user.token, user.password, ADMIN_PASSWORD, s.adminToken]) {
      assert.ok(!bytes.includes(secret), 'a raw secret is in the database file');
    }
    // The random part of a key is not stored either, beyond key_prefix.
    assert.ok(!bytes.includes(key.slice(12)), 'the secret part of a key is in the database file');
  });
});

describe('password change rate limit', () => {
  test('30 parallel wrong current passwords: only 10 are checked, the other 20 answer 429', async () => {
    const s = await startTestServer();
    try {
      const user = await s.newUser('pwparallel');
      const answers = await Promise.all(
        Array.from({ length: 30 }, (_, i) =>
          s.request('PUT', '/api/v1/users/me/password', { token: user.token, body: { current_password: `wrong-${i}`, new_password: 'a-new-password-9' } }),
        ),
      );
      const checked = answers.filter((res) => res.status === 400);
      assert.equal(checked.length, 10, `statuses: ${answers.map((res) => res.status).join(' ')}`);
      for (const res of checked) assertError(res, 400, 'invalid_password');
      for (const res of answers.filter((r) => r.status !== 400)) assertError(res, 429, 'rate_limited');
      await loginAs(s.url, user.email, user.password);
    } finally {
      await s.close();
    }
  });

  test('repeated wrong current passwords answer 429 rate_limited, even with the right one', async () => {
    const s = await startTestServer();
    try {
      const user = await s.newUser('pwlimit');
      const put = (current: string): ReturnType<TestServer['request']> =>
        s.request('PUT', '/api/v1/users/me/password', { token: user.token, body: { current_password: current, new_password: 'a-new-password-9' } });
      let limited: Awaited<ReturnType<TestServer['request']>> | undefined;
      for (let i = 0; i < 30 && limited === undefined; i += 1) {
        const res = await put(`wrong-${i}`);
        if (res.status === 429) limited = res;
        else assertError(res, 400, 'invalid_password', `attempt ${i}`);
      }
      assert.ok(limited !== undefined, 'no 429 after 30 wrong current passwords');
      assertError(limited, 429, 'rate_limited');
      assert.ok(Number(limited.headers.get('retry-after')) > 0);
      assertError(await put(user.password), 429, 'rate_limited', 'the right password while limited');
      await loginAs(s.url, user.email, user.password);
    } finally {
      await s.close();
    }
  });
});
