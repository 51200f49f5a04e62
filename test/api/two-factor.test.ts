// API tests: two-factor login (decisions §18) — setup and confirm, login with otp, each code once, rate limit, API keys unaffected, turning it off.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { assertError, assertNoLeak } from '../helpers/api-assert.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { base32Decode, hotp, stepAt } from '../../src/domain/totp.js';
import { resetPassword } from '../../src/domain/accounts.js';
import { databaseAccountStore } from '../../src/db/account-store.js';
import { openDatabase } from '../../src/db/database.js';
import path from 'node:path';

type User = Awaited<ReturnType<TestServer['newUser']>>;

/** Codes of one secret, each newer than the last (a code is usable once), waiting for the clock when the window is used up. */
function codes(secret: string): () => Promise<string> {
  const key = base32Decode(secret);
  let last = -Infinity;
  return async () => {
    const deadline = Date.now() + 120_000;
    for (;;) {
      const now = stepAt(Date.now());
      const step = Math.max(last + 1, now - 1);
      if (step <= now + 1) {
        last = step;
        return hotp(key, step);
      }
      if (Date.now() > deadline) throw new Error('the clock did not move');
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
  };
}

describe('two-factor login', () => {
  let s: TestServer;
  let user: User;
  let secret: string;
  let next: () => Promise<string>;

  before(async () => {
    s = await startTestServer();
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
    const confirmed = await s.request('POST', '/api/v1/users/me/2fa/confirm', { token: user.token, body: { code: await next() } });
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
    const code = await next();
    const ok = await login({ otp: code });
    assert.equal(ok.status, 200, ok.text);
    assertError(await login({ otp: code }), 401, 'invalid_credentials', 'the same code twice');
    assertError(await s.request('POST', '/api/v1/auth/login', { body: { email: user.email, password: 'wrong-password', otp: await next() } }), 401, 'invalid_credentials');
    assert.equal((await s.request('GET', '/api/v1/users/me', { token: user.apiKey })).status, 200);
    assert.equal((await s.request('GET', '/api/v1/users/me', { token: ok.json.token })).status, 200);
    assertNoLeak(await s.request('GET', '/api/v1/users/me/2fa', { token: user.token }), [secret]);
  });

  test('turning it off needs a current code', async () => {
    assertError(await s.request('DELETE', '/api/v1/users/me/2fa', { token: user.token, body: { code: '000000' } }), 400, 'validation_error');
    assertError(await s.request('DELETE', '/api/v1/users/me/2fa', { token: user.token, body: {} }), 400, 'validation_error');
    assert.equal((await s.request('DELETE', '/api/v1/users/me/2fa', { token: user.token, body: { code: await next() } })).status, 204);
    assert.equal((await login({})).status, 200);
    assertError(await s.request('DELETE', '/api/v1/users/me/2fa', { token: user.token, body: { code: '000000' } }), 409, 'invalid_state');
  });

  test('the server-side password reset also turns two-factor off', async () => {
    const setup = await s.request('POST', '/api/v1/users/me/2fa', { token: user.token });
    const more = codes(setup.json.secret);
    assert.equal((await s.request('POST', '/api/v1/users/me/2fa/confirm', { token: user.token, body: { code: await more() } })).status, 200);
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
    assert.equal((await s.request('POST', '/api/v1/users/me/2fa/confirm', { token: user.token, body: { code: await more() } })).status, 200);
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
    assert.equal((await login({ otp: await more() })).status, 429);
  });
});
