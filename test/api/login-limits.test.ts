// API tests: login rate limits (per address and account) and answers that carry a credential.
// Apart from auth.test.ts because these runs hash many passwords: each file keeps its own time budget.
import assert from 'node:assert/strict';
import http from 'node:http';
import { describe, test } from 'node:test';
import { assertError } from '../helpers/api-assert.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

describe('login rate limit', () => {
  test('30 parallel wrong logins: only the limit’s 10 are checked, the other 20 answer 429 at once', async () => {
    const s = await startTestServer();
    try {
      const user = await s.newUser('parallel');
      const answers = await Promise.all(
        Array.from({ length: 30 }, (_, i) => s.request('POST', '/api/v1/auth/login', { body: { email: user.email, password: `wrong-${i}` } })),
      );
      const checked = answers.filter((res) => res.status === 401);
      const limited = answers.filter((res) => res.status === 429);
      assert.equal(checked.length, 10, `statuses: ${answers.map((res) => res.status).join(' ')}`);
      assert.equal(limited.length, 20);
      for (const res of checked) assertError(res, 401, 'invalid_credentials');
      for (const res of limited) {
        assertError(res, 429, 'rate_limited');
        assert.ok(Number(res.headers.get('retry-after')) > 0);
      }
      // The window is spent: even the right password waits now.
      assertError(await s.request('POST', '/api/v1/auth/login', { body: { email: user.email, password: user.password } }), 429, 'rate_limited');
    } finally {
      await s.close();
    }
  });

  test('the attack: wrong passwords from one address do not lock the owner out; the attacker stays limited', async () => {
    const s = await startTestServer();
    try {
      const user = await s.newUser('lockout');
      const port = new URL(s.url).port;
      // Loopback addresses other than the server's own are distinct client addresses to the server.
      const login = (from: string, password: string): Promise<{ status: number; body: string; retryAfter: string | undefined }> =>
        new Promise((resolve, reject) => {
          const body = JSON.stringify({ email: user.email, password });
          const req = http.request(
            { host: '127.0.0.1', port, path: '/api/v1/auth/login', method: 'POST', localAddress: from, headers: { 'content-type': 'application/json' }, timeout: 60_000 },
            (res) => {
              let text = '';
              res.setEncoding('utf8');
              res.on('data', (chunk: string) => (text += chunk));
              res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text, retryAfter: res.headers['retry-after'] }));
            },
          );
          req.on('timeout', () => req.destroy(new Error('login timed out')));
          req.on('error', reject);
          req.end(body);
        });
      const attacker = '127.0.0.2';
      let limited = false;
      for (let i = 0; i < 15; i += 1) {
        const res = await login(attacker, `wrong-${i}`);
        if (res.status === 429) limited = true;
        else assert.equal(res.status, 401, `attempt ${i}: ${res.body}`);
      }
      assert.ok(limited, 'the attacker was never limited');
      const owner = await login('127.0.0.3', user.password);
      assert.equal(owner.status, 200, `the owner from another address: ${owner.body}`);
      const again = await login(attacker, user.password);
      assert.equal(again.status, 429, 'the attacker, even with the right password, is still limited');
      assert.ok(Number(again.retryAfter) > 0);
    } finally {
      await s.close();
    }
  });

  test('a successful login is not counted against its address', async () => {
    const s = await startTestServer();
    try {
      const user = await s.newUser('refund');
      // More successes than the e-mail limit (10): each one's reserved attempt is refunded.
      for (let i = 0; i < 12; i += 1) {
        const res = await s.request('POST', '/api/v1/auth/login', { body: { email: user.email, password: user.password } });
        assert.equal(res.status, 200, `login ${i}`);
      }
    } finally {
      await s.close();
    }
  });

  test('repeated failures answer 429 rate_limited with Retry-After, even for the right password', async () => {
    const s = await startTestServer();
    try {
      const user = await s.newUser('ratelimit');
      let limited: Awaited<ReturnType<TestServer['request']>> | undefined;
      for (let i = 0; i < 30 && limited === undefined; i += 1) {
        const res = await s.request('POST', '/api/v1/auth/login', { body: { email: user.email, password: `wrong-${i}` } });
        if (res.status === 429) limited = res;
        else assertError(res, 401, 'invalid_credentials', `attempt ${i}`);
      }
      assert.ok(limited !== undefined, 'no 429 after 30 failures');
      assertError(limited, 429, 'rate_limited');
      const retryAfter = Number(limited.headers.get('retry-after'));
      assert.ok(Number.isInteger(retryAfter) && retryAfter > 0, `Retry-After: ${limited.headers.get('retry-after')}`);
      const right = await s.request('POST', '/api/v1/auth/login', { body: { email: user.email, password: user.password } });
      assertError(right, 429, 'rate_limited', 'the right password while limited');
      assert.ok(Number(right.headers.get('retry-after')) > 0);
      // Existing credentials keep working.
      assert.equal((await s.request('GET', '/api/v1/users/me', { token: user.token })).status, 200);
    } finally {
      await s.close();
    }
  });
});

describe('answers that carry a credential', () => {
  test('the attack: a shared browser or proxy cannot keep a session token, an API key or a webhook secret (Cache-Control: no-store)', async () => {
    const s = await startTestServer();
    try {
      const user = await s.newUser('nostore');
      const noStore = (res: Awaited<ReturnType<TestServer['request']>>, what: string): void => {
        assert.equal(res.headers.get('cache-control'), 'no-store', what);
        assert.equal(res.headers.get('pragma'), 'no-cache', what);
      };
      const login = await s.request('POST', '/api/v1/auth/login', { body: { email: user.email, password: user.password } });
      assert.equal(login.status, 200);
      noStore(login, 'login');
      noStore(await s.request('POST', '/api/v1/auth/login', { body: { email: user.email, password: 'wrong-password' } }), 'a failed login');
      const key = await s.request('POST', '/api/v1/api-keys', { token: user.token, body: { name: 'no-store' } });
      assert.equal(key.status, 201);
      noStore(key, 'API key creation');
      const dep = await s.request('POST', '/api/v1/deployments', {
        token: user.token,
        body: { name: 'no store', subdomain: `nostore-${process.pid}`, repo_url: 'http://127.0.0.1:9/none.git', branch: 'main' },
      });
      assert.equal(dep.status, 201, dep.text);
      const hook = await s.request('POST', `/api/v1/deployments/${dep.json.id as string}/webhook`, { token: user.token });
      assert.equal(hook.status, 201, hook.text);
      noStore(hook, 'webhook secret');
    } finally {
      await s.close();
    }
  });
});
