// API tests: two-factor login (decisions §18) — setup and confirm, login with otp, each code once, rate limit, API keys unaffected, turning it off.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { assertError, assertNoLeak } from '../helpers/api-assert.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { base32Decode, hotp, stepAt, TOTP_STEP_SECONDS } from '../../src/domain/totp.js';
import { resetPassword } from '../../src/domain/accounts.js';
import { databaseAccountStore } from '../../src/db/account-store.js';
import { openDatabase } from '../../src/db/database.js';
import path from 'node:path';

type User = Awaited<ReturnType<TestServer['newUser']>>;

/**
 * The server's two-factor clock: still, so no 30 s step ends by chance between making a code and
 * the server checking it; `codes` moves it on a step when a secret's window is used up, instead of
 * waiting for the next step (the window and its edges are unit-tested in test/domain/totp.test.ts).
 */
let clockMs = Date.now();

/** Codes of one secret, each newer than the last (a code is usable once), the clock moved on when the window is used up. */
function codes(secret: string): () => string {
  const key = base32Decode(secret);
  let last = -Infinity;
  return () => {
    const now = stepAt(clockMs);
    const step = Math.max(last + 1, now - 1);
    // Past the window's newest step (now + 1): the server's clock moves on to make it the newest.
    if (step > now + 1) clockMs += (step - now - 1) * TOTP_STEP_SECONDS * 1000;
    last = step;
    return hotp(key, step);
  };
}

describe('two-factor login', () => {
  let s: TestServer;
  let user: User;
  let secret: string;
  let next: () => string;

  before(async () => {
    s = await startTestServer({}, undefined, { now: () => clockMs });
    user = await s.newUser('otp');
  });
  after(async () => {
    await s.close();
  });

  const login = (body: object): ReturnType<TestServer['request']> => s.request('POST', '/api/v1/auth/login', { body: { email: user.email, password: user.password, ...body } });

  test('setup gives a secret and an otpauth URL; it is active only once confirmed with a code', async () => {
    assert.deepEqual((await s.request('GET', '/api/v1/users/me/2fa', { token: user.token })).json, { enabled: false });
    assertError(await s.request('POST', '/api/v1/users/me/2fa/confirm', { token: user.token, body: { code: '123456' } }), 409, 'invalid_state');
    const setup = await s.request('POST', '/api/v1/users/me/2fa', { token: user.token });
    assert.equal(setup.status, 201, setup.text);
    secret = setup.json.secret;
    assert.match(secret, /^[A-Z2-7]{32}$/, '160 bits in base32');
    const url = new URL(setup.json.otpauth_url);
    assert.equal(url.protocol, 'otpauth:');
    assert.equal(url.host, 'totp');
    assert.equal(url.searchParams.get('secret'), secret);
    assert.ok(decodeURIComponent(url.pathname).endsWith(`:${user.email}`));
    next = codes(secret);
    // Not yet active: a login needs no code.
    assert.equal((await login({})).status, 200);
    const wrong = await s.request('POST', '/api/v1/users/me/2fa/confirm', { token: user.token, body: { code: '000000' } });
    assertError(wrong, 400, 'validation_error');
    const confirmed = await s.request('POST', '/api/v1/users/me/2fa/confirm', { token: user.token, body: { code: next() } });
    assert.equal(confirmed.status, 200, confirmed.text);
    assert.deepEqual((await s.request('GET', '/api/v1/users/me/2fa', { token: user.token })).json, { enabled: true });
    assertError(await s.request('POST', '/api/v1/users/me/2fa', { token: user.token }), 409, 'invalid_state');
  });

  test('login then needs otp: missing or wrong is 401 invalid_credentials; a code works once; API keys are unaffected', async () => {
    const missing = await login({});
    assertError(missing, 401, 'invalid_credentials');
    assert.match(missing.json.message, /two-factor code/);
    assertError(await login({ otp: '000000' }), 401, 'invalid_credentials');
    // The dashboard's cookie login asks for the same second factor.
    const cookieLogin = await s.request('POST', '/api/v1/auth/session', { body: { email: user.email, password: user.password } });
    assertError(cookieLogin, 401, 'invalid_credentials');
    assert.equal(cookieLogin.headers.get('set-cookie'), null);
    const code = next();
    const ok = await login({ otp: code });
    assert.equal(ok.status, 200, ok.text);
    assertError(await login({ otp: code }), 401, 'invalid_credentials', 'the same code twice');
    assertError(await s.request('POST', '/api/v1/auth/login', { body: { email: user.email, password: 'wrong-password', otp: next() } }), 401, 'invalid_credentials');
    assert.equal((await s.request('GET', '/api/v1/users/me', { token: user.apiKey })).status, 200);
    assert.equal((await s.request('GET', '/api/v1/users/me', { token: ok.json.token })).status, 200);
    assertNoLeak(await s.request('GET', '/api/v1/users/me/2fa', { token: user.token }), [secret]);
  });

  test('the attack: a stolen password cannot be checked without the code (right and wrong password get one answer)', async () => {
    // Two-factor login is on (the tests above). Every refusal must be the same bytes a client can see.
    const answers = {
      rightPasswordNoCode: await login({}),
      wrongPasswordNoCode: await login({ password: 'not-the-password' }),
      rightPasswordWrongCode: await login({ otp: '000000' }),
      wrongPasswordWrongCode: await login({ password: 'not-the-password', otp: '000000' }),
      unknownEmail: await s.request('POST', '/api/v1/auth/login', { body: { email: `nobody-${process.pid}@example.com`, password: user.password } }),
    };
    const seen = Object.entries(answers).map(([name, res]) => ({
      name,
      status: res.status,
      body: res.text,
      type: res.headers.get('content-type'),
      authenticate: res.headers.get('www-authenticate'),
      retryAfter: res.headers.get('retry-after'),
    }));
    const expected = { status: 401, body: JSON.stringify({ error: 'invalid_credentials', message: 'wrong email, password or two-factor code' }), type: 'application/json; charset=utf-8' };
    for (const answer of seen) {
      assert.deepEqual({ status: answer.status, body: answer.body, type: answer.type }, expected, answer.name);
      assert.equal(answer.authenticate, seen[0]?.authenticate, answer.name);
      assert.equal(answer.retryAfter, null, answer.name);
    }
    // The dashboard's cookie login answers alike.
    const cookie = [
      await s.request('POST', '/api/v1/auth/session', { body: { email: user.email, password: user.password } }),
      await s.request('POST', '/api/v1/auth/session', { body: { email: user.email, password: 'not-the-password' } }),
    ];
    assert.deepEqual(
      cookie.map((res) => [res.status, res.text]),
      [
        [401, expected.body],
        [401, expected.body],
      ],
    );
    assert.equal((await login({ otp: next() })).status, 200, 'the right password with its code still logs in');
  });

  test('turning two-factor login on ends the user’s other sessions and keeps the one that turned it on', async () => {
    const other = await s.newUser('otp-sessions');
    const signIn = async (): Promise<string> => {
      const res = await s.request('POST', '/api/v1/auth/login', { body: { email: other.email, password: other.password } });
      assert.equal(res.status, 200, res.text);
      return res.json.token as string;
    };
    const phone = await signIn();
    const laptop = await signIn();
    const me = async (token: string): Promise<number> => (await s.request('GET', '/api/v1/users/me', { token })).status;
    assert.deepEqual([await me(phone), await me(laptop), await me(other.token)], [200, 200, 200]);
    const setup = await s.request('POST', '/api/v1/users/me/2fa', { token: laptop });
    assert.equal(setup.status, 201, setup.text);
    // Setting up (not yet on) ends nothing.
    assert.deepEqual([await me(phone), await me(other.token)], [200, 200]);
    const more = codes(setup.json.secret);
    const confirmed = await s.request('POST', '/api/v1/users/me/2fa/confirm', { token: laptop, body: { code: more() } });
    assert.equal(confirmed.status, 200, confirmed.text);
    assertError(await s.request('GET', '/api/v1/users/me', { token: phone }), 401, 'unauthorized');
    assertError(await s.request('GET', '/api/v1/users/me', { token: other.token }), 401, 'unauthorized');
    assert.equal(await me(laptop), 200, 'the session that turned it on stays');
    assert.equal(await me(other.apiKey), 200, 'API keys are not sessions: unaffected');
  });

  test('turning it off needs a current code', async () => {
    assertError(await s.request('DELETE', '/api/v1/users/me/2fa', { token: user.token, body: { code: '000000' } }), 400, 'validation_error');
    assertError(await s.request('DELETE', '/api/v1/users/me/2fa', { token: user.token, body: {} }), 400, 'validation_error');
    assert.equal((await s.request('DELETE', '/api/v1/users/me/2fa', { token: user.token, body: { code: next() } })).status, 204);
    assert.equal((await login({})).status, 200);
    assertError(await s.request('DELETE', '/api/v1/users/me/2fa', { token: user.token, body: { code: '000000' } }), 409, 'invalid_state');
  });

  test('the server-side password reset also turns two-factor off', async () => {
    const setup = await s.request('POST', '/api/v1/users/me/2fa', { token: user.token });
    const more = codes(setup.json.secret);
    assert.equal((await s.request('POST', '/api/v1/users/me/2fa/confirm', { token: user.token, body: { code: more() } })).status, 200);
    assertError(await login({}), 401, 'invalid_credentials');
    // What `slipway server reset-password` does on the server host: its own connection to the database.
    const db = await openDatabase({ file: path.join(s.config.dataDir, 'slipway.db'), url: s.config.databaseUrl });
    try {
      await resetPassword(databaseAccountStore(db), user.email, 'reset-password-1');
    } finally {
      await db.destroy();
    }
    const after = await s.request('POST', '/api/v1/auth/login', { body: { email: user.email, password: 'reset-password-1' } });
    assert.equal(after.status, 200, after.text);
    assert.deepEqual((await s.request('GET', '/api/v1/users/me/2fa', { token: after.json.token })).json, { enabled: false });
    user = { ...user, password: 'reset-password-1', token: after.json.token };
  });

  test('wrong codes are rate limited like wrong passwords', async () => {
    const setup = await s.request('POST', '/api/v1/users/me/2fa', { token: user.token });
    const more = codes(setup.json.secret);
    assert.equal((await s.request('POST', '/api/v1/users/me/2fa/confirm', { token: user.token, body: { code: more() } })).status, 200);
    let limited: Awaited<ReturnType<TestServer['request']>> | undefined;
    for (let i = 0; i < 30 && limited === undefined; i += 1) {
      const res = await login({ otp: '000000' });
      if (res.status === 429) limited = res;
      else assertError(res, 401, 'invalid_credentials');
    }
    assert.ok(limited !== undefined, 'wrong codes were never limited');
    assertError(limited, 429, 'rate_limited');
    assert.ok(Number(limited.headers.get('retry-after')) > 0);
    // Even the right code waits now.
    assert.equal((await login({ otp: more() })).status, 429);
  });
});
