// API tests: custom domains (decisions §8): validation, uniqueness across users, the limit, routing by Host, and deletion.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import http from 'node:http';
import { after, before, describe, test } from 'node:test';
import { assertError } from '../helpers/api-assert.js';
import { busyboxArchive, createArchiveApp, deployAndWait, eventually } from '../helpers/apps.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

type User = Awaited<ReturnType<TestServer['newUser']>>;

/** One request to the server's port with the given Host header. */
function hostRequest(port: number, host: string, path = '/'): Promise<{ status: number; body: string; headers: http.IncomingHttpHeaders }> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, path, headers: { host }, agent: false, timeout: 10_000 }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body, headers: res.headers }));
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', reject);
    req.end();
  });
}

let hostCounter = 0;
/** A hostname unique to this test process. */
function uniqueHost(label = 'www'): string {
  hostCounter += 1;
  return `${label}-${process.pid}-${hostCounter}.example.com`;
}

describe('custom domains', () => {
  let s: TestServer;
  let a: User;
  let b: User;
  let appId: string;
  let appBody: string;
  let subdomain: string;

  before(async () => {
    s = await startTestServer();
    a = await s.newUser('dom-a');
    b = await s.newUser('dom-b');
    const { archive, body } = await busyboxArchive();
    appBody = body;
    const app = await createArchiveApp(s, a.token, archive);
    appId = app.id;
    subdomain = app.subdomain;
    const deployed = await deployAndWait(s, a.token, appId);
    assert.equal(deployed.status, 200, deployed.text);
  });
  after(async () => {
    await s.close();
  });

  const add = (token: string, id: string, hostname: unknown) => s.request('POST', `/api/v1/deployments/${id}/domains`, { token, body: { hostname } });
  const list = (token: string, id: string) => s.request('GET', `/api/v1/deployments/${id}/domains`, { token });

  test('add answers 201 with the domain; the hostname is folded to lower case and an IDN stored as its A-label', async () => {
    const upper = uniqueHost('Shop').toUpperCase();
    const res = await add(a.token, appId, `  ${upper}. `);
    assert.equal(res.status, 201, res.text);
    assert.deepEqual(Object.keys(res.json).sort(), ['certificate_expires_at', 'created_at', 'deployment_id', 'hostname', 'id', 'tls_error', 'tls_status']);
    assert.equal(res.json.hostname, upper.toLowerCase());
    assert.equal(res.json.deployment_id, appId);
    assert.match(res.json.id, /^[0-9a-f-]{36}$/);
    assert.ok(!Number.isNaN(Date.parse(res.json.created_at)));
    assert.equal(res.json.tls_status, 'none', 'HTTPS is off on this server');
    assert.equal(res.json.tls_error, null);
    assert.equal(res.json.certificate_expires_at, null);

    const idn = await add(a.token, appId, `Bücher-${process.pid}.Example`);
    assert.equal(idn.status, 201, idn.text);
    assert.match(idn.json.hostname, /^xn--bcher-\d+-[a-z0-9]+\.example$/);
    // The same name in its Unicode or A-label form is the same domain.
    assertError(await add(b.token, (await createPending(b)).id, idn.json.hostname), 400, 'domain_taken');

    const listed = await list(a.token, appId);
    assert.equal(listed.status, 200);
    assert.deepEqual(
      listed.json.map((d: { hostname: string }) => d.hostname),
      [res.json.hostname, idn.json.hostname],
    );
    assert.deepEqual(listed.json[0], res.json);
    for (const d of listed.json) assertEqualOk(await s.request('DELETE', `/api/v1/deployments/${appId}/domains/${d.id}`, { token: a.token }), 204);
    assert.deepEqual((await list(a.token, appId)).json, []);
  });

  test('hostnames that are not DNS names of two or more labels, IP literals, or this server\'s own names are validation_error', async () => {
    const tooLong = `${'a'.repeat(63)}.${'b'.repeat(63)}.${'c'.repeat(63)}.${'d'.repeat(61)}.com`; // 257 characters
    const bad: unknown[] = [
      '',
      '   ',
      'localhost',
      'example',
      '127.0.0.1',
      '127.1',
      '0x7f.1',
      '::1',
      '[::1]',
      '2001:db8::1',
      'foo.123',
      'a..example.com',
      '-bad.example.com',
      'bad-.example.com',
      'under_score.example.com',
      'exa/mple.com',
      'http://example.com',
      'example.com:8080',
      'exa%41mple.com',
      'user@example.com',
      'ex ample.com',
      `${'x'.repeat(64)}.example.com`,
      tooLong,
      'xn--iñvalid.com',
      // SLIPWAY_DOMAIN (localhost in tests) and names under it are this server's own hosts.
      `${subdomain}.localhost`,
      'api.localhost',
      'deep.name.localhost',
      'LOCALHOST.',
    ];
    assert.equal(tooLong.length, 257);
    for (const hostname of bad) assertError(await add(a.token, appId, hostname), 400, 'validation_error', JSON.stringify(hostname));
    for (const body of [{}, { hostname: 42 }, { hostname: 'ok.example.com', extra: 1 }, { hostname: null }]) {
      assertError(await s.request('POST', `/api/v1/deployments/${appId}/domains`, { token: a.token, body }), 400, 'validation_error', JSON.stringify(body));
    }
    assert.deepEqual((await list(a.token, appId)).json, [], 'nothing was added');
  });

  test('a hostname held by any deployment of any user is domain_taken, decided by the unique index under concurrency', async () => {
    const host = uniqueHost('taken');
    assertEqualOk(await add(a.token, appId, host), 201);
    const theirs = await createPending(b);
    assertError(await add(b.token, theirs.id, host), 400, 'domain_taken');
    assertError(await add(b.token, theirs.id, host.toUpperCase()), 400, 'domain_taken');
    assertError(await add(a.token, appId, host), 400, 'domain_taken', 'the same deployment twice');

    // Two users racing for one new name: exactly one wins.
    const raced = uniqueHost('race');
    const mine = await createPending(a);
    const answers = await Promise.all([add(a.token, mine.id, raced), add(b.token, theirs.id, raced), add(a.token, mine.id, raced), add(b.token, theirs.id, raced)]);
    assert.equal(answers.filter((r) => r.status === 201).length, 1, answers.map((r) => r.text).join('\n'));
    for (const r of answers.filter((r) => r.status !== 201)) assertError(r, 400, 'domain_taken');
  });

  test('at most 20 domains per deployment, also when added concurrently', async () => {
    const dep = await createPending(a);
    const answers = await Promise.all(Array.from({ length: 25 }, () => add(a.token, dep.id, uniqueHost('many'))));
    assert.equal(answers.filter((r) => r.status === 201).length, 20);
    for (const r of answers.filter((r) => r.status !== 201)) assertError(r, 400, 'validation_error');
    assert.equal((await list(a.token, dep.id)).json.length, 20);
    // Removing one makes room for one.
    const first = (await list(a.token, dep.id)).json[0];
    assertEqualOk(await s.request('DELETE', `/api/v1/deployments/${dep.id}/domains/${first.id}`, { token: a.token }), 204);
    assertEqualOk(await add(a.token, dep.id, uniqueHost('room')), 201);
    assertError(await add(a.token, dep.id, uniqueHost('full')), 400, 'validation_error');
  });

  test('requests with a custom Host reach the deployment exactly as its subdomain does: live, 503 when stopped, gone when removed', async () => {
    const host = uniqueHost('route');
    const domain = (await add(a.token, appId, host)).json;
    const viaSub = await hostRequest(s.port, `${subdomain}.localhost:${s.port}`);
    assert.equal(viaSub.status, 200);
    assert.equal(viaSub.body, appBody);
    for (const h of [host, `${host}:${s.port}`, host.toUpperCase(), `${host}.`]) {
      const viaCustom = await hostRequest(s.port, h);
      assert.equal(viaCustom.status, 200, h);
      assert.equal(viaCustom.body, appBody, h);
    }
    // An unknown name is still the API host (as before custom domains).
    const unknown = await hostRequest(s.port, uniqueHost('unknown'), '/healthz');
    assert.equal(unknown.status, 200);
    assert.match(unknown.body, /"status"/);

    assertEqualOk(await s.request('POST', `/api/v1/deployments/${appId}/stop`, { token: a.token }), 200);
    const stoppedSub = await hostRequest(s.port, `${subdomain}.localhost`);
    const stoppedCustom = await hostRequest(s.port, host);
    assert.equal(stoppedSub.status, 503);
    assert.equal(stoppedCustom.status, 503);
    assert.equal(stoppedCustom.body, stoppedSub.body.replaceAll(`${subdomain}.localhost`, host));
    assertEqualOk(await s.request('POST', `/api/v1/deployments/${appId}/restart`, { token: a.token }), 200);
    assert.equal((await hostRequest(s.port, host)).body, appBody);

    assertEqualOk(await s.request('DELETE', `/api/v1/deployments/${appId}/domains/${domain.id}`, { token: a.token }), 204);
    const removed = await hostRequest(s.port, host, '/healthz');
    assert.equal(removed.status, 200, 'the name is the API host again');
    assert.notEqual(removed.body, appBody);
    assertError(await s.request('DELETE', `/api/v1/deployments/${appId}/domains/${domain.id}`, { token: a.token }), 404, 'not_found', 'deleted twice');
    assertError(await s.request('DELETE', `/api/v1/deployments/${appId}/domains/not-a-uuid`, { token: a.token }), 404, 'not_found');
    assertError(await s.request('DELETE', `/api/v1/deployments/${appId}/domains/${crypto.randomUUID()}`, { token: a.token }), 404, 'not_found');
  });

  test("deleting a deployment frees its domains, and the name never reaches the subdomain's next holder", async () => {
    const dep = await createPending(a);
    const host = uniqueHost('freed');
    assertEqualOk(await add(a.token, dep.id, host), 201);
    assert.equal((await hostRequest(s.port, host)).status, 503, 'routed to the (never deployed) app');
    assertEqualOk(await s.request('DELETE', `/api/v1/deployments/${dep.id}`, { token: a.token }), 204);
    // The subdomain is taken again by another user's deployment: the old custom name must not follow it.
    const next = await s.request('POST', '/api/v1/deployments', { token: b.token, body: { name: 'next', subdomain: dep.subdomain, source_type: 'archive' } });
    assert.equal(next.status, 201, next.text);
    const after = await hostRequest(s.port, host, '/healthz');
    assert.equal(after.status, 200, 'the freed name is the API host');
    const theirs = await add(b.token, next.json.id, host);
    assert.equal(theirs.status, 201, theirs.text);
    assert.equal((await hostRequest(s.port, host)).status, 503, "now routed to B's deployment");
  });

  test('custom domains are routed again after a restart (rebuilt from the database)', async () => {
    const host = uniqueHost('restart');
    assertEqualOk(await add(a.token, appId, host), 201);
    assert.equal((await hostRequest(s.port, host)).body, appBody);
    await s.server.close();
    const again = await startTestServer(s.config.databaseUrl === undefined ? {} : { SLIPWAY_DATABASE_URL: s.config.databaseUrl }, s.dataDir);
    try {
      const res = await eventually(async () => {
        const r = await hostRequest(again.port, host);
        return r.status === 200 ? r : undefined;
      }, 30_000, 'the custom host to answer after the restart');
      assert.equal(res.body, appBody);
    } finally {
      await again.server.close();
    }
  });

  /** A deployment of `user` that was never deployed. */
  async function createPending(user: User): Promise<{ id: string; subdomain: string }> {
    hostCounter += 1;
    const sub = `dom-${process.pid}-${hostCounter}`;
    const res = await s.request('POST', '/api/v1/deployments', { token: user.token, body: { name: sub, subdomain: sub, source_type: 'archive' } });
    assert.equal(res.status, 201, res.text);
    return { id: res.json.id, subdomain: sub };
  }
});

function assertEqualOk(res: { status: number; text: string }, status: number): void {
  assert.equal(res.status, status, res.text);
}
