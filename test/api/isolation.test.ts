// API tests: one user's objects are invisible to another (404 on every endpoint, never listed), and the builds read side.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { assertError } from '../helpers/api-assert.js';
import { uploadBody } from '../helpers/multipart.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { makeTarGz } from '../helpers/tar-fixtures.js';

type User = Awaited<ReturnType<TestServer['newUser']>>;

/** A source whose image build fails at once (nothing to pull), so a build ends in seconds. */
const FAILING_SOURCE = makeTarGz([{ path: 'Dockerfile', content: 'FROM scratch\nCOPY does-not-exist /x\n' }]);

describe('isolation between users', () => {
  let s: TestServer;
  let a: User;
  let b: User;
  let deploymentId: string;
  let buildId: string;
  let keyId: string;
  let bDeploymentId: string;
  let domainId: string;
  /** A's git deployment with a webhook (its secret must not rotate at B's call). */
  let gitId: string;

  before(async () => {
    s = await startTestServer();
    a = await s.newUser('alice');
    b = await s.newUser('bob');
    const dep = await s.request('POST', '/api/v1/deployments', {
      token: a.token,
      body: { name: 'alice app', subdomain: `alice-${process.pid}`, source_type: 'archive' },
    });
    assert.equal(dep.status, 201, dep.text);
    deploymentId = dep.json.id;
    const body = uploadBody(FAILING_SOURCE);
    const up = await s.request('POST', `/api/v1/deployments/${deploymentId}/upload`, { token: a.token, raw: body.body, headers: { 'content-type': body.contentType } });
    assert.equal(up.status, 200, up.text);
    // ?wait=true holds the answer until the build ends: here, 500 build_failed.
    const deploy = await s.request('POST', `/api/v1/deployments/${deploymentId}/deploy?wait=true`, { token: a.token });
    assertError(deploy, 500, 'build_failed', 'wait=true on a failing build');
    const builds = await s.request('GET', `/api/v1/deployments/${deploymentId}/builds`, { token: a.token });
    assert.equal(builds.json.length, 1);
    buildId = builds.json[0].id;
    const key = await s.request('POST', '/api/v1/api-keys', { token: a.token, body: { name: 'alice key' } });
    keyId = key.json.api_key.id;
    const env = await s.request('PATCH', `/api/v1/deployments/${deploymentId}/env`, { token: a.token, body: { vars: { ALICE_SECRET: 'alice-only' }, secret: true } });
    assert.equal(env.status, 200, env.text);
    const domain = await s.request('POST', `/api/v1/deployments/${deploymentId}/domains`, { token: a.token, body: { hostname: `alice-${process.pid}.example.com` } });
    assert.equal(domain.status, 201, domain.text);
    domainId = domain.json.id;
    const mine = await s.request('POST', '/api/v1/deployments', { token: b.token, body: { name: 'bob app', subdomain: `bob-${process.pid}`, source_type: 'archive' } });
    bDeploymentId = mine.json.id;
    const git = await s.request('POST', '/api/v1/deployments', {
      token: a.token,
      body: { name: 'alice git', subdomain: `alice-git-${process.pid}`, repo_url: 'http://127.0.0.1:9/alice.git', auto_deploy: true },
    });
    assert.equal(git.status, 201, git.text);
    gitId = git.json.id;
    assert.equal((await s.request('POST', `/api/v1/deployments/${gitId}/webhook`, { token: a.token })).status, 201);
  });
  after(async () => {
    await s.close();
  });

  /** Everything A can see of A's objects. */
  async function snapshotA(): Promise<unknown> {
    const get = async (p: string): Promise<unknown> => {
      const res = await s.request('GET', p, { token: a.token });
      return { status: res.status, body: res.json ?? res.text };
    };
    return {
      deployment: await get(`/api/v1/deployments/${deploymentId}`),
      list: await get('/api/v1/deployments'),
      builds: await get(`/api/v1/deployments/${deploymentId}/builds`),
      build: await get(`/api/v1/deployments/${deploymentId}/builds/${buildId}`),
      logs: await get(`/api/v1/deployments/${deploymentId}/builds/${buildId}/logs`),
      env: await get(`/api/v1/deployments/${deploymentId}/env`),
      domains: await get(`/api/v1/deployments/${deploymentId}/domains`),
      git: await get(`/api/v1/deployments/${gitId}`),
      webhook: await get(`/api/v1/deployments/${gitId}/webhook`),
      deliveries: await get(`/api/v1/deployments/${gitId}/webhook/deliveries`),
      keys: (await s.request('GET', '/api/v1/api-keys', { token: a.token })).json.map((k: { id: string; name: string }) => [k.id, k.name]),
    };
  }

  test("every endpoint answers 404 not_found for another user's objects, and changes nothing", async () => {
    const before = await snapshotA();
    const upload = uploadBody(makeTarGz([{ path: 'Dockerfile', content: 'FROM busybox\n' }]));
    const d = `/api/v1/deployments/${deploymentId}`;
    const cases: Array<[string, string, Parameters<TestServer['request']>[2]]> = [
      ['GET', d, {}],
      ['PATCH', d, { body: { name: 'taken over', memory_mb: 64 } }],
      ['PATCH', d, { body: { volumes: [{ name: 'stolen', mount_path: '/data' }] } }],
      ['GET', `${d}/env`, {}],
      ['PATCH', `${d}/env`, { body: { vars: { TAKEN: 'over', ALICE_SECRET: null } } }],
      ['PATCH', `${d}/env`, { body: { vars: { TAKEN: 'over' }, secret: true } }],
      ['POST', `${d}/upload`, { raw: upload.body, headers: { 'content-type': upload.contentType } }],
      ['POST', `${d}/deploy`, {}],
      ['POST', `${d}/deploy?wait=true`, {}],
      ['POST', `${d}/stop`, {}],
      ['POST', `${d}/restart`, {}],
      ['POST', `${d}/rollback`, { body: { build_id: buildId } }],
      ['GET', `${d}/builds`, {}],
      ['GET', `${d}/builds/${buildId}`, {}],
      ['GET', `${d}/builds/${buildId}/logs`, {}],
      ['GET', `${d}/builds/${buildId}/logs?follow=true`, {}],
      ['GET', `${d}/logs`, {}],
      ['GET', `${d}/logs?tail=10&follow=true`, {}],
      ['GET', `${d}/domains`, {}],
      ['POST', `${d}/domains`, { body: { hostname: `bob-${process.pid}.example.com` } }],
      ['DELETE', `${d}/domains/${domainId}`, {}],
      ['DELETE', d, {}],
      ['POST', `${d}/webhook`, {}],
      ['GET', `${d}/webhook`, {}],
      ['GET', `${d}/webhook/deliveries`, {}],
      ['PATCH', `/api/v1/deployments/${gitId}`, { body: { auto_deploy: false } }],
      ['POST', `/api/v1/deployments/${gitId}/webhook`, {}],
      ['GET', `/api/v1/deployments/${gitId}/webhook`, {}],
      ['GET', `/api/v1/deployments/${gitId}/webhook/deliveries`, {}],
      ['DELETE', `/api/v1/api-keys/${keyId}`, {}],
      // B's own deployment with A's domain.
      ['DELETE', `/api/v1/deployments/${bDeploymentId}/domains/${domainId}`, {}],
      // B's own deployment with A's build.
      ['GET', `/api/v1/deployments/${bDeploymentId}/builds/${buildId}`, {}],
      ['GET', `/api/v1/deployments/${bDeploymentId}/builds/${buildId}/logs`, {}],
      // (Rollback of B's pending deployment to A's build is the pending row's 409, the same as for any id: see below.)
    ];
    for (const [method, urlPath, options] of cases) {
      for (const token of [b.token, b.apiKey]) {
        const res = await s.request(method, urlPath, { ...options, token });
        assertError(res, 404, 'not_found', `${method} ${urlPath}`);
        assert.ok(!res.text.includes(deploymentId) && !res.text.includes('alice'), `${method} ${urlPath} reveals A's object`);
      }
    }
    // A missing object gets the same answer as A's.
    const missing = await s.request('GET', `/api/v1/deployments/${crypto.randomUUID()}`, { token: b.token });
    const theirs = await s.request('GET', d, { token: b.token });
    assert.deepEqual(theirs.json, missing.json);
    assert.deepEqual(await snapshotA(), before, "A's objects changed");
    assert.equal((await s.request('GET', '/api/v1/users/me', { token: a.apiKey })).status, 200);
  });

  test("list endpoints never show another user's objects", async () => {
    const deployments = await s.request('GET', '/api/v1/deployments', { token: b.token });
    assert.deepEqual(deployments.json.map((x: { id: string }) => x.id), [bDeploymentId]);
    assert.deepEqual((await s.request('GET', `/api/v1/deployments/${bDeploymentId}/webhook/deliveries`, { token: b.token })).json, []);
    const keys = await s.request('GET', '/api/v1/api-keys', { token: b.apiKey });
    assert.ok(!keys.json.some((k: { id: string }) => k.id === keyId));
    assert.equal(keys.json.length, 1);
    assert.deepEqual((await s.request('GET', `/api/v1/deployments/${bDeploymentId}/builds`, { token: b.token })).json, []);
    assert.deepEqual((await s.request('GET', '/api/v1/tunnels', { token: b.token })).json, []);
    assert.deepEqual((await s.request('GET', `/api/v1/deployments/${bDeploymentId}/domains`, { token: b.token })).json, []);
    for (const res of [deployments, keys]) assert.ok(!res.text.includes('alice'));
  });

  test('the admin has no special access to users\' deployments', async () => {
    assertError(await s.request('GET', `/api/v1/deployments/${deploymentId}`, { token: s.adminToken }), 404, 'not_found');
    assert.ok(!(await s.request('GET', '/api/v1/deployments', { token: s.adminToken })).json.some((x: { id: string }) => x.id === deploymentId));
  });

  test('builds read side: list, one, logs; unknown build ids are 404', async () => {
    const list = await s.request('GET', `/api/v1/deployments/${deploymentId}/builds`, { token: a.token });
    assert.equal(list.status, 200);
    const [build] = list.json;
    assert.equal(build.id, buildId);
    assert.equal(build.deployment_id, deploymentId);
    assert.equal(build.status, 'failed');
    assert.equal(build.commit_sha, crypto.createHash('sha256').update(FAILING_SOURCE).digest('hex'));
    assert.ok(build.finished_at !== null && Date.parse(build.finished_at) >= Date.parse(build.started_at));
    assert.equal(typeof build.error, 'string');
    const one = await s.request('GET', `/api/v1/deployments/${deploymentId}/builds/${buildId}`, { token: a.token });
    assert.deepEqual(one.json, build);
    const logs = await s.request('GET', `/api/v1/deployments/${deploymentId}/builds/${buildId}/logs`, { token: a.token });
    assert.equal(logs.status, 200);
    assert.match(logs.headers.get('content-type') ?? '', /^text\/plain/);
    assert.ok(logs.text.length > 0);
    const followed = await s.request('GET', `/api/v1/deployments/${deploymentId}/builds/${buildId}/logs?follow=true`, { token: a.token });
    assert.equal(followed.text, logs.text, 'following a finished build ends at once');
    assert.equal((await s.request('GET', `/api/v1/deployments/${deploymentId}`, { token: a.token })).json.status, 'failed');

    for (const id of [crypto.randomUUID(), 'not-a-uuid']) {
      const res = await s.request('GET', `/api/v1/deployments/${deploymentId}/builds/${id}`, { token: a.token });
      assertError(res, 404, 'not_found', id);
      assert.match(res.json.message, /build/i);
      assertError(await s.request('GET', `/api/v1/deployments/${deploymentId}/builds/${id}/logs`, { token: a.token }), 404, 'not_found');
      assertError(await s.request('POST', `/api/v1/deployments/${deploymentId}/rollback`, { token: a.token, body: { build_id: id } }), 404, 'not_found');
    }
    // A failed build cannot be rolled back to; a deployment that never ran has no logs.
    assertError(await s.request('POST', `/api/v1/deployments/${deploymentId}/rollback`, { token: a.token, body: { build_id: buildId } }), 409, 'invalid_state');
    assertError(await s.request('GET', `/api/v1/deployments/${bDeploymentId}/logs`, { token: b.token }), 409, 'invalid_state');
    assertError(await s.request('GET', `/api/v1/deployments/${deploymentId}/logs?tail=abc`, { token: a.token }), 400, 'validation_error');
    assertError(await s.request('POST', `/api/v1/deployments/${deploymentId}/deploy?wait=maybe`, { token: a.token }), 400, 'validation_error');
  });

  test('a new deployment has no builds; pending deployments refuse stop, restart and rollback', async () => {
    assert.deepEqual((await s.request('GET', `/api/v1/deployments/${bDeploymentId}/builds`, { token: b.token })).json, []);
    for (const action of ['stop', 'restart']) {
      assertError(await s.request('POST', `/api/v1/deployments/${bDeploymentId}/${action}`, { token: b.token }), 409, 'invalid_state', action);
    }
    // State table, pending row: 409 whatever build id is named (a random one, another deployment's, or not a UUID).
    for (const id of [crypto.randomUUID(), buildId, 'not-a-uuid']) {
      const rb = await s.request('POST', `/api/v1/deployments/${bDeploymentId}/rollback`, { token: b.token, body: { build_id: id } });
      assertError(rb, 409, 'invalid_state', `rollback of a pending deployment to ${id}`);
    }
    assertError(await s.request('POST', `/api/v1/deployments/${bDeploymentId}/rollback`, { token: b.token, body: {} }), 400, 'validation_error');
    assert.equal((await s.request('GET', `/api/v1/deployments/${bDeploymentId}`, { token: b.token })).json.status, 'pending');
  });
});


describe('roles in a team: every deployment route × viewer, developer, owner and outsider (sessions and API keys)', () => {
  let s: TestServer;
  let owner: User;
  let dev: User;
  let viewer: User;
  let outsider: User;
  let teamId: string;
  let d: string;
  let buildId: string;
  let domainId: string;
  let git: string;

  before(async () => {
    s = await startTestServer();
    [owner, dev, viewer, outsider] = [await s.newUser('t-owner'), await s.newUser('t-dev'), await s.newUser('t-viewer'), await s.newUser('t-out')];
    teamId = (await s.request('POST', '/api/v1/teams', { token: owner.token, body: { name: 'Matrix' } })).json.id;
    for (const [user, role] of [[dev, 'developer'], [viewer, 'viewer']] as const) {
      const added = await s.request('POST', `/api/v1/teams/${teamId}/members`, { token: owner.token, body: { email: user.email, role } });
      assert.equal(added.status, 201, added.text);
    }
    const dep = await s.request('POST', '/api/v1/deployments', {
      token: owner.token,
      body: { name: 'team app', subdomain: `team-${process.pid}`, source_type: 'archive', team_id: teamId },
    });
    assert.equal(dep.status, 201, dep.text);
    const id: string = dep.json.id;
    d = `/api/v1/deployments/${id}`;
    const body = uploadBody(FAILING_SOURCE);
    assert.equal((await s.request('POST', `${d}/upload`, { token: owner.token, raw: body.body, headers: { 'content-type': body.contentType } })).status, 200);
    assertError(await s.request('POST', `${d}/deploy?wait=true`, { token: owner.token }), 500, 'build_failed');
    buildId = (await s.request('GET', `${d}/builds`, { token: owner.token })).json[0].id;
    assert.equal((await s.request('PATCH', `${d}/env`, { token: owner.token, body: { vars: { TEAM_SECRET: 'team-only' }, secret: true } })).status, 200);
    const domain = await s.request('POST', `${d}/domains`, { token: owner.token, body: { hostname: `team-${process.pid}.example.com` } });
    domainId = domain.json.id;
    const gitDep = await s.request('POST', '/api/v1/deployments', {
      token: owner.token,
      body: { name: 'team git', subdomain: `team-git-${process.pid}`, repo_url: 'http://127.0.0.1:9/team.git', team_id: teamId },
    });
    git = `/api/v1/deployments/${gitDep.json.id}`;
    assert.equal((await s.request('POST', `${git}/webhook`, { token: owner.token })).status, 201);
  });
  after(async () => {
    await s.close();
  });

  type Case = [method: string, path: () => string, options: () => Parameters<TestServer['request']>[2]];
  const upload = (): Parameters<TestServer['request']>[2] => {
    const b = uploadBody(makeTarGz([{ path: 'Dockerfile', content: 'FROM scratch\n' }]));
    return { raw: b.body, headers: { 'content-type': b.contentType } };
  };
  const READ: Case[] = [
    ['GET', () => d, () => ({})],
    ['GET', () => `${d}/env`, () => ({})],
    ['GET', () => `${d}/builds`, () => ({})],
    ['GET', () => `${d}/builds/${buildId}`, () => ({})],
    ['GET', () => `${d}/builds/${buildId}/logs`, () => ({})],
    ['GET', () => `${d}/logs`, () => ({})],
    ['GET', () => `${d}/metrics`, () => ({})],
    ['GET', () => `${d}/domains`, () => ({})],
    ['GET', () => `${git}/webhook`, () => ({})],
    ['GET', () => `${git}/webhook/deliveries`, () => ({})],
    ['GET', () => `${git}/previews`, () => ({})],
  ];
  const CHANGE: Case[] = [
    ['PATCH', () => d, () => ({ body: { name: 'changed' } })],
    ['PATCH', () => `${d}/env`, () => ({ body: { vars: { CHANGED: 'yes' } } })],
    ['POST', () => `${d}/upload`, upload],
    ['POST', () => `${d}/deploy`, () => ({})],
    ['POST', () => `${d}/stop`, () => ({})],
    ['POST', () => `${d}/restart`, () => ({})],
    ['POST', () => `${d}/cancel`, () => ({})],
    ['POST', () => `${d}/rollback`, () => ({ body: { build_id: buildId } })],
    ['POST', () => `${d}/domains`, () => ({ body: { hostname: `other-${process.pid}.example.com` } })],
    ['DELETE', () => `${d}/domains/${domainId}`, () => ({})],
    ['POST', () => `${git}/webhook`, () => ({})],
    ['DELETE', () => `${git}/previews/1`, () => ({})],
  ];
  const MANAGE: Case[] = [['DELETE', () => d, () => ({})]];

  async function snapshot(): Promise<unknown> {
    const get = async (p: string): Promise<unknown> => (await s.request('GET', p, { token: owner.token })).json;
    return [await get(d), await get(`${d}/env`), await get(`${d}/builds`), await get(`${d}/domains`), await get(`${git}/webhook`)];
  }

  test('an outsider gets 404 on every route, exactly as for a missing deployment', async () => {
    const before = await snapshot();
    for (const [method, path, options] of [...READ, ...CHANGE, ...MANAGE]) {
      for (const token of [outsider.token, outsider.apiKey, s.adminToken]) {
        const res = await s.request(method, path(), { ...options(), token });
        assertError(res, 404, 'not_found', `${method} ${path()}`);
        assert.ok(!res.text.includes('team'), `${method} ${path()} reveals the object`);
      }
    }
    assert.deepEqual(await snapshot(), before);
    assert.ok(!(await s.request('GET', '/api/v1/deployments', { token: outsider.token })).json.some((x: { id: string }) => d.endsWith(x.id)));
  });

  test('a viewer reads (secrets stay null) and gets 403 forbidden for every change', async () => {
    for (const [method, path, options] of READ) {
      for (const token of [viewer.token, viewer.apiKey]) {
        const res = await s.request(method, path(), { ...options(), token });
        assert.ok(res.status === 200 || (res.status === 409 && res.json.error === 'invalid_state'), `${method} ${path()}: ${res.status} ${res.text.slice(0, 200)}`);
      }
    }
    const env = await s.request('GET', `${d}/env`, { token: viewer.token });
    assert.deepEqual(env.json.vars.map((v: { key: string; value: unknown }) => [v.key, v.value]), [['TEAM_SECRET', null]]);
    const before = await snapshot();
    for (const [method, path, options] of [...CHANGE, ...MANAGE]) {
      for (const token of [viewer.token, viewer.apiKey]) {
        assertError(await s.request(method, path(), { ...options(), token }), 403, 'forbidden', `${method} ${path()}`);
      }
    }
    assert.deepEqual(await snapshot(), before, 'a refused change changed something');
    assert.ok((await s.request('GET', '/api/v1/deployments', { token: viewer.apiKey })).json.some((x: { id: string }) => d.endsWith(x.id)));
  });

  test('a developer changes (settings, variables, domains, webhook, deploy) but cannot delete', async () => {
    for (const [method, path, options] of MANAGE) {
      for (const token of [dev.token, dev.apiKey]) assertError(await s.request(method, path(), { ...options(), token }), 403, 'forbidden', `${method} ${path()}`);
    }
    assertError(
      await s.request('POST', '/api/v1/deployments', { token: dev.token, body: { name: 'x', subdomain: `devx-${process.pid}`, source_type: 'archive', team_id: teamId } }),
      403,
      'forbidden',
    );
    assert.equal((await s.request('PATCH', d, { token: dev.token, body: { name: 'renamed by dev' } })).json.name, 'renamed by dev');
    assert.equal((await s.request('PATCH', `${d}/env`, { token: dev.apiKey, body: { vars: { FROM_DEV: '1' } } })).status, 200);
    assert.equal((await s.request('POST', `${git}/webhook`, { token: dev.token })).status, 201);
    const domain = await s.request('POST', `${d}/domains`, { token: dev.apiKey, body: { hostname: `dev-${process.pid}.example.com` } });
    assert.equal(domain.status, 201, domain.text);
    assert.equal((await s.request('DELETE', `${d}/domains/${domain.json.id}`, { token: dev.token })).status, 204);
    assertError(await s.request('POST', `${d}/deploy?wait=true`, { token: dev.apiKey }), 500, 'build_failed');
    assertError(await s.request('POST', `${d}/rollback`, { token: dev.token, body: { build_id: buildId } }), 409, 'invalid_state');
    // Previews are a developer's to remove: past the policy, this one is simply missing.
    assertError(await s.request('DELETE', `${git}/previews/1`, { token: dev.apiKey }), 404, 'not_found');
    assert.equal((await s.request('GET', `${git}/previews`, { token: dev.token })).status, 200);
  });

  test('the owner deletes the team deployment', async () => {
    for (const path of [d, git]) assert.equal((await s.request('DELETE', path, { token: owner.apiKey })).status, 204);
    assertError(await s.request('GET', d, { token: viewer.token }), 404, 'not_found');
    assert.equal((await s.request('DELETE', `/api/v1/teams/${teamId}`, { token: owner.token })).status, 204);
  });
});
