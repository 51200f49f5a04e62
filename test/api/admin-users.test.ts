// API tests of the administrators' user pages (issue 26 item 7): list, create, reset a password, disable/enable (closing open tunnels), and everyone's live tunnels.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { runTunnelClient, TunnelRefusedError } from '../../src/tunnel/tunnel-client.js';
import { assertError } from '../helpers/api-assert.js';
import { eventually } from '../helpers/apps.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

interface AdminUser {
  id: string;
  email: string;
  is_admin: boolean;
  disabled: boolean;
}

describe('admin: users and live tunnels', () => {
  let s: TestServer;

  before(async () => {
    s = await startTestServer();
  });
  after(async () => {
    await s.close();
  });

  const allUsers = async (): Promise<AdminUser[]> => {
    const out: AdminUser[] = [];
    let next: string | undefined = '/api/v1/users?limit=2';
    while (next !== undefined) {
      const res = await s.request('GET', next, { token: s.adminToken });
      assert.equal(res.status, 200, res.text);
      out.push(...(res.json as AdminUser[]));
      next = /<([^>]+)>; rel="next"/.exec(res.headers.get('link') ?? '')?.[1];
    }
    return out;
  };
  const me = (token: string): Promise<number> => s.request('GET', '/api/v1/users/me', { token }).then((r) => r.status);
  const login = (email: string, password: string): Promise<number> => s.request('POST', '/api/v1/auth/login', { body: { email, password } }).then((r) => r.status);

  test('an admin lists users page by page (created users appear, with their flags)', async () => {
    const a = await s.newUser('admin-list');
    const b = await s.newUser('admin-list');
    const users = await allUsers();
    const emails = users.map((u) => u.email);
    assert.deepEqual(emails, [...emails].sort(), 'ordered by e-mail');
    assert.equal(new Set(users.map((u) => u.id)).size, users.length, 'no user twice across pages');
    for (const u of [a, b]) {
      const found = users.find((x) => x.id === u.userId);
      assert.ok(found, `${u.email} is listed`);
      assert.equal(found.email, u.email);
      assert.equal(found.is_admin, false);
      assert.equal(found.disabled, false);
    }
    assert.ok(users.some((u) => u.is_admin), 'the admin is listed as one');
  });

  test('a password set by an admin ends the user\'s sessions; the new one logs in, the old one does not; API keys keep working', async () => {
    const u = await s.newUser('admin-reset');
    assert.equal(await me(u.token), 200);
    const res = await s.request('PATCH', `/api/v1/users/${u.userId}`, { token: s.adminToken, body: { password: 'brand-new-password-1' } });
    assert.equal(res.status, 200, res.text);
    assert.equal(res.json.id, u.userId);
    assert.equal(await me(u.token), 401, 'old session revoked');
    assert.equal(await login(u.email, u.password), 401);
    assert.equal(await login(u.email, 'brand-new-password-1'), 200);
    assert.equal(await me(u.apiKey), 200);
  });

  test('disabling ends sessions and makes logins and API keys 401 like unknown credentials; enabling restores them', async () => {
    const u = await s.newUser('admin-disable');
    const off = await s.request('PATCH', `/api/v1/users/${u.userId}`, { token: s.adminToken, body: { disabled: true } });
    assert.equal(off.status, 200, off.text);
    assert.equal(off.json.disabled, true);
    assertError(await s.request('GET', '/api/v1/users/me', { token: u.token }), 401, 'unauthorized');
    assertError(await s.request('GET', '/api/v1/users/me', { token: u.apiKey }), 401, 'unauthorized');
    const refused = await s.request('POST', '/api/v1/auth/login', { body: { email: u.email, password: u.password } });
    const wrong = await s.request('POST', '/api/v1/auth/login', { body: { email: u.email, password: 'not-the-password' } });
    assert.equal(refused.status, 401);
    assert.deepEqual(refused.json, wrong.json, 'a disabled account answers like a wrong password');
    assert.equal((await allUsers()).find((x) => x.id === u.userId)?.disabled, true);

    const on = await s.request('PATCH', `/api/v1/users/${u.userId}`, { token: s.adminToken, body: { disabled: false } });
    assert.equal(on.status, 200, on.text);
    assert.equal(on.json.disabled, false);
    assert.equal(await me(u.apiKey), 200, 'the API key works again');
    assert.equal(await login(u.email, u.password), 200);
    assert.equal(await me(u.token), 401, 'the sessions disabling ended stay ended');
  });

  test('non-admins get 403 forbidden and change nothing', async () => {
    const u = await s.newUser('admin-forbidden');
    const other = await s.newUser('admin-victim');
    assertError(await s.request('GET', '/api/v1/users', { token: u.token }), 403, 'forbidden');
    assertError(await s.request('PATCH', `/api/v1/users/${other.userId}`, { token: u.apiKey, body: { disabled: true } }), 403, 'forbidden');
    assertError(await s.request('PATCH', `/api/v1/users/${other.userId}`, { token: u.token, body: { password: 'stolen-password-1' } }), 403, 'forbidden');
    assertError(await s.request('POST', '/api/v1/users', { token: u.token, body: { email: 'x@test.local', password: 'long-enough-1' } }), 403, 'forbidden');
    assertError(await s.request('GET', '/api/v1/tunnels?all=true', { token: u.token }), 403, 'forbidden');
    assert.equal(await me(other.token), 200);
    assert.equal(await login(other.email, other.password), 200);
  });

  test('bad input is 400 (or 404 for no such user) and changes nothing', async () => {
    const u = await s.newUser('admin-bad');
    const adminId = (await s.request('GET', '/api/v1/users/me', { token: s.adminToken })).json.id as string;
    assertError(await s.request('PATCH', `/api/v1/users/${adminId}`, { token: s.adminToken, body: { disabled: true } }), 400, 'validation_error', 'disabling oneself');
    assertError(await s.request('PATCH', `/api/v1/users/${u.userId}`, { token: s.adminToken, body: { password: 'short' } }), 400, 'validation_error');
    assertError(await s.request('PATCH', `/api/v1/users/${u.userId}`, { token: s.adminToken, body: {} }), 400, 'validation_error');
    assertError(await s.request('PATCH', `/api/v1/users/${u.userId}`, { token: s.adminToken, body: { disabled: 'yes' } }), 400, 'validation_error');
    assertError(await s.request('PATCH', `/api/v1/users/${u.userId}`, { token: s.adminToken, body: { is_admin: true } }), 400, 'validation_error');
    assertError(await s.request('PATCH', '/api/v1/users/00000000-0000-4000-8000-000000000000', { token: s.adminToken, body: { disabled: true } }), 404, 'not_found');
    assertError(await s.request('GET', '/api/v1/users?limit=0', { token: s.adminToken }), 400, 'validation_error');
    assert.equal(await me(s.adminToken), 200);
    assert.equal(await me(u.token), 200);
    assert.equal(await login(u.email, u.password), 200);
  });

  test('GET /tunnels?all=true lists every live tunnel with its owner\'s e-mail; without it, only the caller\'s', async () => {
    const u = await s.newUser('admin-tunnel');
    const stop = new AbortController();
    let connected: (subdomain: string) => void = () => {};
    const ready = new Promise<string>((resolve) => (connected = resolve));
    const done = runTunnelClient({
      serverUrl: s.url,
      apiKey: u.apiKey,
      port: 9,
      signal: stop.signal,
      onEvent: (event) => {
        if (event.type === 'connected') connected(event.subdomain);
      },
    }).catch(() => {});
    try {
      const subdomain = await Promise.race([ready, sleep(60_000).then(() => Promise.reject(new Error('tunnel did not connect')))]);
      const all = await s.request('GET', '/api/v1/tunnels?all=true', { token: s.adminToken });
      assert.equal(all.status, 200, all.text);
      const row = (all.json as Array<Record<string, unknown>>).find((t) => t.subdomain === subdomain);
      assert.ok(row, 'the user\'s tunnel is listed');
      assert.equal(row.owner_email, u.email);
      assert.equal(row.user_id, u.userId);
      assert.equal(typeof row.connected_at, 'string');
      assert.deepEqual((await s.request('GET', '/api/v1/tunnels', { token: s.adminToken })).json, [], 'the admin has no tunnels of their own');
      const own = (await s.request('GET', '/api/v1/tunnels', { token: u.token })).json as Array<Record<string, unknown>>;
      assert.deepEqual(own.map((t) => t.subdomain), [subdomain]);
      assert.equal(own[0]?.owner_email, undefined);
    } finally {
      stop.abort();
      await done;
    }
  });

  test('disabling a user closes their open tunnels at once, for good (4401 with the reason; a reconnect is 401); another user\'s stays up', async () => {
    const hits = { u: 0, v: 0 };
    const local = http.createServer((req, res) => {
      const who = req.url === '/u' ? 'u' : 'v';
      hits[who]++;
      res.end(`local ${who}\n`);
    });
    await new Promise<void>((resolve) => local.listen(0, '127.0.0.1', resolve));
    const port = (local.address() as AddressInfo).port;
    const u = await s.newUser('disabled-tunnel');
    const v = await s.newUser('kept-tunnel');
    const stop = new AbortController();
    const open = (apiKey: string, subdomain: string): { connected: Promise<void>; result: Promise<unknown> } => {
      let connected: () => void = () => {};
      const ready = new Promise<void>((resolve) => (connected = resolve));
      const result = runTunnelClient({ serverUrl: s.url, apiKey, port, subdomain, signal: stop.signal, maxBackoffMs: 500, onEvent: (e) => e.type === 'connected' && connected() }).then(
        () => undefined,
        (err: unknown) => err,
      );
      return { connected: ready, result };
    };
    const visit = (subdomain: string, path: string): Promise<{ status: number; body: string }> =>
      new Promise((resolve, reject) => {
        const req = http.request({ host: '127.0.0.1', port: s.port, path, headers: { host: `${subdomain}.localhost` }, agent: false, timeout: 30_000 }, (res) => {
          let body = '';
          res.setEncoding('utf8');
          res.on('data', (chunk: string) => (body += chunk));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
        });
        req.on('timeout', () => req.destroy(new Error('visit timed out')));
        req.on('error', reject);
        req.end();
      });
    const nameU = `off-${process.pid}`;
    const nameV = `on-${process.pid}`;
    const tu = open(u.apiKey, nameU);
    const tv = open(v.apiKey, nameV);
    try {
      await Promise.race([Promise.all([tu.connected, tv.connected]), sleep(60_000).then(() => Promise.reject(new Error('tunnels did not connect')))]);
      await eventually(async () => ((await visit(nameU, '/u')).status === 200 ? true : undefined), 30_000, "U's tunnel to serve");
      await eventually(async () => ((await visit(nameV, '/v')).status === 200 ? true : undefined), 30_000, "V's tunnel to serve");

      const res = await s.request('PATCH', `/api/v1/users/${u.userId}`, { token: s.adminToken, body: { disabled: true } });
      assert.equal(res.status, 200, res.text);
      // The client stops (no reconnect loop) with the reason the server sent before closing with 4401.
      const ended = await Promise.race([tu.result, sleep(30_000).then(() => 'still running')]);
      assert.ok(ended instanceof TunnelRefusedError, `the client ended with a refusal, got ${String(ended)}`);
      assert.equal(ended.code, 'unauthorized');
      assert.match(ended.message, /account has been disabled/);
      // The name is freed at once (as for a deleted key): its host no longer reaches U's local server.
      await eventually(async () => ((await visit(nameU, '/u')).status === 404 ? true : undefined), 10_000, "U's host to stop serving");
      const seenU = hits.u;
      assert.equal((await visit(nameU, '/u')).status, 404);
      assert.equal(hits.u, seenU, "nothing more reached U's local server");
      const all = (await s.request('GET', '/api/v1/tunnels?all=true', { token: s.adminToken })).json as Array<{ subdomain: string }>;
      assert.deepEqual(all.map((t) => t.subdomain).filter((name) => name === nameU || name === nameV), [nameV]);
      // A reconnect with U's key is refused with 401 before any handshake.
      assert.equal(await upgradeStatus(s.port, u.apiKey, nameU), 401);
      const again = await runTunnelClient({ serverUrl: s.url, apiKey: u.apiKey, port, subdomain: nameU, signal: AbortSignal.timeout(30_000), onEvent: () => {} }).then(() => undefined, (err: unknown) => err);
      assert.ok(again instanceof TunnelRefusedError && again.code === 'unauthorized', String(again));
      // V's tunnel never noticed.
      assert.equal((await visit(nameV, '/v')).status, 200);
      // Disabling again is harmless; enabling reopens nothing (the client stopped), but the key connects again.
      assert.equal((await s.request('PATCH', `/api/v1/users/${u.userId}`, { token: s.adminToken, body: { disabled: true } })).status, 200);
      assert.equal((await s.request('PATCH', `/api/v1/users/${u.userId}`, { token: s.adminToken, body: { disabled: false } })).status, 200);
      assert.equal((await visit(nameU, '/u')).status, 404);
      assert.equal(await upgradeStatus(s.port, u.apiKey, nameU), 101);
    } finally {
      stop.abort();
      await Promise.all([tu.result, tv.result]);
      local.closeAllConnections();
      await new Promise((resolve) => local.close(resolve));
    }
  });
});

/** The status of a tunnel connect's upgrade answer (a 101's socket is closed at once: it never answers a ping, so holds no name). */
function upgradeStatus(port: number, apiKey: string, subdomain: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = http.request({
      host: '127.0.0.1',
      port,
      path: `/api/v1/tunnels/connect?subdomain=${subdomain}`,
      agent: false,
      timeout: 30_000,
      headers: {
        authorization: `Bearer ${apiKey}`,
        connection: 'Upgrade',
        upgrade: 'websocket',
        'sec-websocket-version': '13',
        'sec-websocket-key': crypto.randomBytes(16).toString('base64'),
      },
    });
    req.on('upgrade', (res, socket) => {
      socket.destroy();
      resolve(res.statusCode ?? 0);
    });
    req.on('response', (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on('timeout', () => req.destroy(new Error('upgrade timed out')));
    req.on('error', reject);
    req.end();
  });
}
