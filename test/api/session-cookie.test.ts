// The dashboard's session cookie (issue 26 item 8): HttpOnly, SameSite=Strict, host-only, Secure and
// __Host- over HTTPS; a change made with it needs the CSRF token of that very session; the bearer API
// is unchanged; logout ends the session and clears the cookie.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { startTestServer, type HttpResult, type TestServer } from '../helpers/server.js';

/** The cookie pair (`name=value`) of a Set-Cookie answer, and its attributes in lower case. */
function parseSetCookie(res: HttpResult): { pair: string; attributes: string[] } {
  const header = res.headers.get('set-cookie');
  assert.ok(header, 'a cookie is set');
  const [pair = '', ...attributes] = header.split(';').map((p) => p.trim());
  return { pair, attributes: attributes.map((a) => a.toLowerCase()) };
}

describe('the dashboard session cookie over HTTP', () => {
  let ts: TestServer;
  let user: Awaited<ReturnType<TestServer['newUser']>>;

  before(async () => {
    ts = await startTestServer();
    user = await ts.newUser('cookie');
  });
  after(async () => {
    await ts?.close();
  });

  const logIn = async (): Promise<{ cookie: string; csrf: string; res: HttpResult }> => {
    const res = await ts.request('POST', '/api/v1/auth/session', { body: { email: user.email, password: user.password } });
    assert.equal(res.status, 200, res.text);
    return { cookie: parseSetCookie(res).pair, csrf: res.json.csrf_token, res };
  };

  test('login sets an HttpOnly, SameSite=Strict, host-only cookie; the body holds no session token', async () => {
    const { res, cookie } = await logIn();
    const { attributes } = parseSetCookie(res);
    assert.match(cookie, /^slipway_session=slw_/);
    assert.ok(attributes.includes('httponly'));
    assert.ok(attributes.includes('samesite=strict'));
    assert.ok(attributes.includes('path=/'));
    assert.ok(!attributes.some((a) => a.startsWith('domain=')), 'host-only: apps on subdomains never receive it');
    assert.ok(!attributes.includes('secure'), 'plain HTTP: a Secure cookie would not be kept');
    assert.equal(res.json.user.email, user.email);
    assert.equal(res.json.token, undefined);
    assert.ok(!res.text.includes(cookie.split('=')[1]!), 'the token is not in the body');
    assert.equal(res.headers.get('cache-control'), 'no-store');
  });

  test('reads need only the cookie; a change needs the CSRF token of the same session', async () => {
    const a = await logIn();
    const b = await logIn();
    const me = await ts.request('GET', '/api/v1/users/me', { headers: { cookie: a.cookie } });
    assert.equal(me.status, 200, me.text);
    const session = await ts.request('GET', '/api/v1/auth/session', { headers: { cookie: a.cookie } });
    assert.equal(session.json.csrf_token, a.csrf, 'a new tab gets the same token');

    const create = (headers: Record<string, string>): Promise<HttpResult> => ts.request('POST', '/api/v1/api-keys', { headers, body: { name: 'from-cookie' } });
    for (const [what, headers] of [
      ['no token', { cookie: a.cookie }],
      ['a wrong token', { cookie: a.cookie, 'x-csrf-token': 'x'.repeat(43) }],
      ["another session's token", { cookie: a.cookie, 'x-csrf-token': b.csrf }],
    ] as const) {
      const res = await create(headers);
      assert.equal(res.status, 403, `${what}: ${res.text}`);
      assert.equal(res.json.error, 'forbidden');
    }
    const keys = await ts.request('GET', '/api/v1/api-keys', { token: user.token });
    assert.ok(!keys.json.some((k: { name: string }) => k.name === 'from-cookie'), 'nothing was created');
    const made = await create({ cookie: a.cookie, 'x-csrf-token': a.csrf });
    assert.equal(made.status, 201, made.text);
  });

  test('the bearer API is unchanged: a bearer decides alone, and needs no CSRF token', async () => {
    const a = await logIn();
    const made = await ts.request('POST', '/api/v1/api-keys', { token: user.token, headers: { cookie: a.cookie }, body: { name: 'bearer' } });
    assert.equal(made.status, 201, made.text);
    const bad = await ts.request('GET', '/api/v1/users/me', { token: 'slw_k1_notakey', headers: { cookie: a.cookie } });
    assert.equal(bad.status, 401, 'a bad bearer is not rescued by a good cookie');
    assert.equal(bad.headers.get('www-authenticate'), 'Bearer');
    const anon = await ts.request('GET', '/api/v1/users/me');
    assert.equal(anon.status, 401);
    // An API key is no cookie session.
    const keyCookie = await ts.request('GET', '/api/v1/users/me', { headers: { cookie: `slipway_session=${user.apiKey}` } });
    assert.equal(keyCookie.status, 401);
    const viaBearer = await ts.request('GET', '/api/v1/auth/session', { token: user.token });
    assert.equal(viaBearer.status, 200);
    assert.equal(viaBearer.json.csrf_token, null);
  });

  test('logout with the cookie ends the session and clears the cookie', async () => {
    const a = await logIn();
    const refused = await ts.request('POST', '/api/v1/auth/logout', { headers: { cookie: a.cookie } });
    assert.equal(refused.status, 403, 'logout is a change too');
    const out = await ts.request('POST', '/api/v1/auth/logout', { headers: { cookie: a.cookie, 'x-csrf-token': a.csrf } });
    assert.equal(out.status, 204, out.text);
    const cleared = parseSetCookie(out);
    assert.equal(cleared.pair, 'slipway_session=');
    assert.ok(cleared.attributes.includes('max-age=0'));
    assert.equal((await ts.request('GET', '/api/v1/users/me', { headers: { cookie: a.cookie } })).status, 401);
  });

  test('a wrong password sets no cookie', async () => {
    const res = await ts.request('POST', '/api/v1/auth/session', { body: { email: user.email, password: 'wrong-password' } });
    assert.equal(res.status, 401);
    assert.equal(res.headers.get('set-cookie'), null);
  });
});

describe('the dashboard session cookie when the public URL is https', () => {
  let ts: TestServer;
  before(async () => {
    ts = await startTestServer({ SLIPWAY_PUBLIC_URL: 'https://slipway.test' });
  });
  after(async () => {
    await ts?.close();
  });

  test('the cookie is Secure and __Host- prefixed (host-only, Path=/)', async () => {
    const user = await ts.newUser('https-cookie');
    const res = await ts.request('POST', '/api/v1/auth/session', { body: { email: user.email, password: user.password } });
    assert.equal(res.status, 200, res.text);
    const { pair, attributes } = parseSetCookie(res);
    assert.match(pair, /^__Host-slipway_session=slw_/);
    assert.ok(attributes.includes('secure'));
    assert.ok(attributes.includes('path=/'));
    assert.ok(!attributes.some((a) => a.startsWith('domain=')));
    const me = await ts.request('GET', '/api/v1/users/me', { headers: { cookie: pair } });
    assert.equal(me.status, 200, me.text);
  });
});
