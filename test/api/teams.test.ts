// API tests: teams, members and roles (decisions §18): creation, membership rules, bad input, and team deployments in lists.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { assertError } from '../helpers/api-assert.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

type User = Awaited<ReturnType<TestServer['newUser']>>;

describe('teams and members', () => {
  let s: TestServer;
  let owner: User;
  let dev: User;
  let viewer: User;
  let outsider: User;
  let teamId: string;

  before(async () => {
    s = await startTestServer();
    [owner, dev, viewer, outsider] = [await s.newUser('owner'), await s.newUser('dev'), await s.newUser('viewer'), await s.newUser('outsider')];
  });
  after(async () => {
    await s.close();
  });

  test('a team is created with its creator as owner; members are added by e-mail with a role', async () => {
    const created = await s.request('POST', '/api/v1/teams', { token: owner.token, body: { name: '  Acme  ' } });
    assert.equal(created.status, 201, created.text);
    assert.deepEqual(Object.keys(created.json).sort(), ['created_at', 'id', 'name', 'role']);
    assert.equal(created.json.name, 'Acme');
    assert.equal(created.json.role, 'owner');
    teamId = created.json.id;
    const t = `/api/v1/teams/${teamId}`;
    const added = await s.request('POST', `${t}/members`, { token: owner.apiKey, body: { email: dev.email.toUpperCase(), role: 'developer' } });
    assert.equal(added.status, 201, added.text);
    assert.deepEqual(added.json, { user_id: dev.userId, email: dev.email, role: 'developer', created_at: added.json.created_at });
    assert.equal((await s.request('POST', `${t}/members`, { token: owner.token, body: { email: viewer.email, role: 'viewer' } })).status, 201);

    const members = await s.request('GET', `${t}/members`, { token: viewer.token });
    assert.equal(members.status, 200);
    assert.deepEqual(
      members.json.map((m: { email: string; role: string }) => [m.email, m.role]),
      [
        [owner.email, 'owner'],
        [dev.email, 'developer'],
        [viewer.email, 'viewer'],
      ],
    );
    const mine = await s.request('GET', '/api/v1/teams', { token: dev.apiKey });
    assert.deepEqual(mine.json.map((x: { id: string; role: string }) => [x.id, x.role]), [[teamId, 'developer']]);
    assert.deepEqual((await s.request('GET', t, { token: viewer.token })).json.role, 'viewer');
    assert.deepEqual((await s.request('GET', '/api/v1/teams', { token: outsider.token })).json, []);
  });

  test('bad input is 400 naming what is wrong, and changes nothing', async () => {
    const t = `/api/v1/teams/${teamId}`;
    const before = (await s.request('GET', `${t}/members`, { token: owner.token })).json;
    const cases: Array<[string, string, object, RegExp]> = [
      ['POST', `${t}/members`, { email: outsider.email, role: 'admin' }, /unknown role "admin"/],
      ['POST', `${t}/members`, { email: dev.email, role: 'viewer' }, /already a member/],
      ['POST', `${t}/members`, { email: 'nobody@test.local', role: 'viewer' }, /no user has the e-mail "nobody@test.local"/],
      ['PATCH', `${t}/members/${dev.userId}`, { role: 'superuser' }, /unknown role "superuser"/],
      ['PATCH', `${t}/members/${owner.userId}`, { role: 'developer' }, /last owner/],
      ['DELETE', `${t}/members/${owner.userId}`, {}, /last owner/],
      ['POST', '/api/v1/teams', { name: '   ' }, /name/],
      ['PATCH', t, { name: '' }, /name/],
      ['POST', '/api/v1/teams', { name: 'x', extra: 1 }, /extra/],
    ];
    for (const [method, path, body, message] of cases) {
      const res = await s.request(method, path, { token: owner.token, body: method === 'DELETE' ? undefined : body });
      assertError(res, 400, 'validation_error', `${method} ${path}`);
      assert.match(res.json.message, message, `${method} ${path}`);
    }
    assert.deepEqual((await s.request('GET', `${t}/members`, { token: owner.token })).json, before);
    assert.equal((await s.request('GET', t, { token: owner.token })).json.name, 'Acme');
  });

  test('members below owner get 403 forbidden for owner actions; outsiders 404', async () => {
    const t = `/api/v1/teams/${teamId}`;
    const ownerActions: Array<[string, string, object | undefined]> = [
      ['PATCH', t, { name: 'Taken' }],
      ['DELETE', t, undefined],
      ['POST', `${t}/members`, { email: outsider.email, role: 'owner' }],
      ['PATCH', `${t}/members/${viewer.userId}`, { role: 'owner' }],
      ['DELETE', `${t}/members/${owner.userId}`, undefined],
    ];
    for (const [method, path, body] of ownerActions) {
      for (const token of [dev.token, dev.apiKey, viewer.token, viewer.apiKey]) {
        assertError(await s.request(method, path, { token, body }), 403, 'forbidden', `${method} ${path}`);
      }
      for (const token of [outsider.token, outsider.apiKey, s.adminToken]) {
        assertError(await s.request(method, path, { token, body }), 404, 'not_found', `${method} ${path} (outsider)`);
      }
    }
    for (const path of [t, `${t}/members`]) {
      const theirs = await s.request('GET', path, { token: outsider.token });
      assertError(theirs, 404, 'not_found', path);
      const missing = await s.request('GET', path.replace(teamId, crypto.randomUUID()), { token: outsider.token });
      assert.deepEqual(theirs.json, missing.json, 'an outsider cannot tell a team from a missing one');
    }
    assertError(await s.request('GET', '/api/v1/teams/not-a-uuid', { token: owner.token }), 404, 'not_found');
    assert.equal((await s.request('GET', `${t}/members`, { token: owner.token })).json.length, 3);
  });

  test("team deployments: owners create them, members list them, and a team holding one cannot be deleted", async () => {
    const body = (label: string): object => ({ name: label, subdomain: `${label}-${process.pid}`, source_type: 'archive', team_id: teamId });
    assertError(await s.request('POST', '/api/v1/deployments', { token: dev.token, body: body('dev-made') }), 403, 'forbidden');
    assertError(await s.request('POST', '/api/v1/deployments', { token: outsider.token, body: body('out-made') }), 404, 'not_found');
    const created = await s.request('POST', '/api/v1/deployments', { token: owner.token, body: body('team-app') });
    assert.equal(created.status, 201, created.text);
    const id = created.json.id;
    const shown = await s.request('GET', `/api/v1/deployments/${id}`, { token: viewer.token });
    assert.equal(shown.status, 200);
    assert.equal(shown.json.team_id, teamId);
    for (const user of [owner, dev, viewer]) {
      const list = await s.request('GET', '/api/v1/deployments', { token: user.apiKey });
      assert.ok(list.json.some((d: { id: string }) => d.id === id), `${user.email} lists the team deployment`);
    }
    assert.ok(!(await s.request('GET', '/api/v1/deployments', { token: outsider.token })).json.some((d: { id: string }) => d.id === id));

    const refused = await s.request('DELETE', `/api/v1/teams/${teamId}`, { token: owner.token });
    assertError(refused, 400, 'validation_error');
    assert.match(refused.json.message, /holds 1 deployment/);

    // A member removed loses the team's deployments at once: gone from the list, 404 on the object.
    assert.equal((await s.request('DELETE', `/api/v1/teams/${teamId}/members/${viewer.userId}`, { token: owner.token })).status, 204);
    assertError(await s.request('GET', `/api/v1/deployments/${id}`, { token: viewer.token }), 404, 'not_found');
    assert.ok(!(await s.request('GET', '/api/v1/deployments', { token: viewer.token })).json.some((d: { id: string }) => d.id === id));
    // A member may leave on their own.
    assert.equal((await s.request('DELETE', `/api/v1/teams/${teamId}/members/${dev.userId}`, { token: dev.token })).status, 204);

    assert.equal((await s.request('DELETE', `/api/v1/deployments/${id}`, { token: owner.token })).status, 204);
    assert.equal((await s.request('DELETE', `/api/v1/teams/${teamId}`, { token: owner.token })).status, 204);
    assertError(await s.request('GET', `/api/v1/teams/${teamId}`, { token: owner.token }), 404, 'not_found');
  });

  test('a second owner lets the first step down', async () => {
    const team = (await s.request('POST', '/api/v1/teams', { token: owner.token, body: { name: 'Two owners' } })).json;
    const t = `/api/v1/teams/${team.id}`;
    assert.equal((await s.request('POST', `${t}/members`, { token: owner.token, body: { email: dev.email, role: 'owner' } })).status, 201);
    const demoted = await s.request('PATCH', `${t}/members/${owner.userId}`, { token: owner.token, body: { role: 'viewer' } });
    assert.equal(demoted.status, 200, demoted.text);
    assert.equal(demoted.json.role, 'viewer');
    assertError(await s.request('PATCH', t, { token: owner.token, body: { name: 'x' } }), 403, 'forbidden');
    assertError(await s.request('DELETE', `${t}/members/${dev.userId}`, { token: dev.token }), 400, 'validation_error');
    assert.equal((await s.request('PATCH', t, { token: dev.token, body: { name: 'Renamed' } })).json.name, 'Renamed');
  });
});
