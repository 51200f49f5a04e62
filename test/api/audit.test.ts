// API tests: the audit log (decisions §18) — each recorded action leaves exactly one entry, never a value, key or password; who sees what; pages.
import assert from 'node:assert/strict';
import http from 'node:http';
import { after, before, describe, test } from 'node:test';
import { assertError } from '../helpers/api-assert.js';
import { busyboxArchive, createArchiveApp, upload } from '../helpers/apps.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { base32Decode, hotp, stepAt } from '../../src/domain/totp.js';

type User = Awaited<ReturnType<TestServer['newUser']>>;
interface Entry {
  id: string;
  at: string;
  actor_id: string | null;
  actor_email: string | null;
  via: string;
  action: string;
  target_type: string;
  target_id: string | null;
  team_id: string | null;
  ip: string | null;
  outcome: string;
}

describe('audit log', () => {
  let s: TestServer;
  let ann: User;
  let ben: User;
  /** Everything any response of the audit log carried (checked for values, keys and passwords). */
  const seen: string[] = [];

  before(async () => {
    s = await startTestServer();
    ann = await s.newUser('audit-ann');
    ben = await s.newUser('audit-ben');
  });
  after(async () => {
    await s.close();
  });

  /** A login sent from `from` (another loopback address: a client of its own to the login limiter). */
  function loginFrom(from: string, email: string, password: string): Promise<{ status: number; body: string }> {
    return new Promise((resolve, reject) => {
      const req = http.request(
        { host: '127.0.0.1', port: new URL(s.url).port, path: '/api/v1/auth/login', method: 'POST', localAddress: from, headers: { 'content-type': 'application/json' }, timeout: 60_000 },
        (res) => {
          let text = '';
          res.setEncoding('utf8');
          res.on('data', (chunk: string) => (text += chunk));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
        },
      );
      req.on('timeout', () => req.destroy(new Error('login timed out')));
      req.on('error', reject);
      req.end(JSON.stringify({ email, password }));
    });
  }

  /** Every entry the token sees (all pages), newest first, optionally narrowed. */
  async function entries(token: string, query = ''): Promise<Entry[]> {
    const all: Entry[] = [];
    let next: string | undefined = `/api/v1/audit?limit=50${query}`;
    while (next !== undefined) {
      const res = await s.request('GET', next, { token });
      assert.equal(res.status, 200, res.text);
      seen.push(res.text);
      all.push(...(res.json as Entry[]));
      next = /<([^>]+)>; rel="next"/.exec(res.headers.get('link') ?? '')?.[1];
    }
    return all;
  }

  /** Exactly one entry of `action` on `targetId`, by `actor`, succeeded. */
  async function one(token: string, action: string, targetId: string, actor: User | null, via = 'session'): Promise<Entry> {
    const found = (await entries(token, `&target_id=${targetId}`)).filter((e) => e.action === action);
    assert.equal(found.length, 1, `${action} on ${targetId}: ${JSON.stringify(found)}`);
    const entry = found[0] as Entry;
    if (actor !== null) {
      assert.equal(entry.actor_id, actor.userId, action);
      assert.equal(entry.actor_email, actor.email, action);
    }
    assert.equal(entry.via, via, action);
    assert.equal(entry.outcome, 'success', action);
    assert.ok(entry.ip === '127.0.0.1' || entry.ip === '::1' || entry.ip === '::ffff:127.0.0.1', `${action}: ip ${entry.ip}`);
    assert.deepEqual(Object.keys(entry).sort(), ['action', 'actor_email', 'actor_id', 'at', 'id', 'ip', 'outcome', 'target_id', 'target_type', 'team_id', 'via']);
    return entry;
  }

  test('users, logins (failed ones included) and keys', async () => {
    const admin = (await s.request('GET', '/api/v1/users/me', { token: s.adminToken })).json;
    const created = await one(s.adminToken, 'user.create', ann.userId, null);
    assert.equal(created.actor_id, admin.id);
    assert.equal(created.actor_email, admin.email);
    const logins = (await entries(ann.token, `&target_id=${ann.userId}`)).filter((e) => e.action === 'auth.login');
    assert.equal(logins.length, 1, 'newUser logged in once');
    assert.equal(logins[0]?.outcome, 'success');

    const wrong = await s.request('POST', '/api/v1/auth/login', { body: { email: ann.email, password: 'not-her-password' } });
    assertError(wrong, 401, 'invalid_credentials');
    const failures = (await entries(ann.token, `&target_id=${ann.userId}`)).filter((e) => e.action === 'auth.login' && e.outcome === 'failure');
    assert.equal(failures.length, 1);
    assert.equal(failures[0]?.actor_id, ann.userId);
    assert.equal(failures[0]?.actor_email, ann.email);

    const key = await s.request('POST', '/api/v1/api-keys', { token: ann.token, body: { name: 'audited' } });
    const keyId: string = key.json.api_key.id;
    await one(ann.token, 'key.create', keyId, ann);
    // An API key acts as its user; the entry names the key by its prefix.
    const viaKey = await s.request('POST', '/api/v1/teams', { token: key.json.key, body: { name: 'By key' } });
    await one(ann.token, 'team.create', viaKey.json.id, ann, key.json.key.slice(0, 12));
    assert.equal((await s.request('DELETE', `/api/v1/api-keys/${keyId}`, { token: ann.token })).status, 204);
    await one(ann.token, 'key.delete', keyId, ann);

    const changed = await s.request('PUT', '/api/v1/users/me/password', { token: ann.token, body: { current_password: ann.password, new_password: 'a-new-password-1' } });
    assert.equal(changed.status, 200, changed.text);
    await one(ann.token, 'user.password', ann.userId, ann);
    for (const text of seen) {
      for (const secret of [ann.password, 'a-new-password-1', 'not-her-password', key.json.key]) assert.ok(!text.includes(secret), 'the audit log holds a password or key');
    }
  });

  test('deployments: create, update, upload, deploy, stop, restart, rollback, cancel, variables, domains, webhook, delete', async () => {
    const { archive } = await busyboxArchive();
    const app = await createArchiveApp(s, ann.token, archive);
    await one(ann.token, 'deployment.create', app.id, ann);
    await one(ann.token, 'deployment.upload', app.id, ann);
    const d = `/api/v1/deployments/${app.id}`;
    assert.equal((await s.request('PATCH', d, { token: ann.token, body: { name: 'renamed' } })).status, 200);
    await one(ann.token, 'deployment.update', app.id, ann);
    const deployed = await s.request('POST', `${d}/deploy?wait=true`, { token: ann.token });
    assert.equal(deployed.status, 200, deployed.text);
    const build = await one(ann.token, 'deployment.deploy', deployed.json.id, ann);
    assert.equal(build.target_type, 'build');
    assert.equal((await s.request('POST', `${d}/stop`, { token: ann.token })).status, 200);
    await one(ann.token, 'deployment.stop', app.id, ann);
    assert.equal((await s.request('POST', `${d}/restart`, { token: ann.token })).status, 200);
    await one(ann.token, 'deployment.restart', app.id, ann);
    assert.equal((await s.request('POST', `${d}/rollback`, { token: ann.token, body: { build_id: deployed.json.id } })).status, 200);
    const rollback = (await entries(ann.token, `&target_id=${deployed.json.id}`)).filter((e) => e.action === 'deployment.rollback');
    assert.equal(rollback.length, 1);

    // A build that takes long, cancelled while it runs.
    const slow = await busyboxArchive({ extraDockerfile: 'RUN sleep 60' });
    assert.equal((await upload(s, ann.token, app.id, slow.archive)).status, 200);
    const started = await s.request('POST', `${d}/deploy`, { token: ann.token });
    assert.equal(started.status, 202, started.text);
    assert.equal((await s.request('POST', `${d}/cancel`, { token: ann.token })).status, 200);
    await one(ann.token, 'deployment.cancel', started.json.id, ann);

    const secretValue = `s3cr3t-${process.pid}-value`;
    assert.equal((await s.request('PATCH', `${d}/env`, { token: ann.token, body: { vars: { DB_PASSWORD: secretValue }, secret: true } })).status, 200);
    await one(ann.token, 'env.update', app.id, ann);
    // A refused change leaves no entry.
    assertError(await s.request('PATCH', `${d}/env`, { token: ann.token, body: { vars: { 'bad key': 'x' } } }), 400, 'validation_error');
    assert.equal((await entries(ann.token, `&target_id=${app.id}`)).filter((e) => e.action === 'env.update').length, 1);

    const domain = await s.request('POST', `${d}/domains`, { token: ann.token, body: { hostname: `audit-${process.pid}.example.com` } });
    assert.equal(domain.status, 201, domain.text);
    await one(ann.token, 'domain.add', domain.json.id, ann);
    assert.equal((await s.request('DELETE', `${d}/domains/${domain.json.id}`, { token: ann.token })).status, 204);
    await one(ann.token, 'domain.remove', domain.json.id, ann);

    const git = await s.request('POST', '/api/v1/deployments', { token: ann.token, body: { name: 'git', subdomain: `audit-git-${process.pid}`, repo_url: 'http://127.0.0.1:9/x.git' } });
    const hook = await s.request('POST', `/api/v1/deployments/${git.json.id}/webhook`, { token: ann.token });
    assert.equal(hook.status, 201);
    await one(ann.token, 'webhook.rotate', git.json.id, ann);

    for (const id of [app.id, git.json.id]) {
      assert.equal((await s.request('DELETE', `/api/v1/deployments/${id}`, { token: ann.token })).status, 204);
      await one(ann.token, 'deployment.delete', id, ann);
    }
    const all = (await entries(ann.token)).map((e) => JSON.stringify(e)).join('\n');
    for (const secret of [secretValue, 'DB_PASSWORD', hook.json.secret]) assert.ok(!all.includes(secret), `the audit log holds ${secret}`);
  });

  test("teams and members; a team's owners see its entries, other members and outsiders do not", async () => {
    const team = (await s.request('POST', '/api/v1/teams', { token: ann.token, body: { name: 'Audited' } })).json;
    await one(ann.token, 'team.create', team.id, ann);
    const t = `/api/v1/teams/${team.id}`;
    assert.equal((await s.request('POST', `${t}/members`, { token: ann.token, body: { email: ben.email, role: 'viewer' } })).status, 201);
    // The same member twice: refused, and no second entry.
    assertError(await s.request('POST', `${t}/members`, { token: ann.token, body: { email: ben.email, role: 'viewer' } }), 400, 'validation_error');
    await one(ann.token, 'team.member.add', ben.userId, ann);
    assert.equal((await s.request('PATCH', `${t}/members/${ben.userId}`, { token: ann.token, body: { role: 'owner' } })).status, 200);
    await one(ann.token, 'team.member.role', ben.userId, ann);
    assert.equal((await s.request('PATCH', t, { token: ben.token, body: { name: 'Audited too' } })).status, 200);
    // Ann owns the team: she sees Ben's entry in it.
    await one(ann.token, 'team.update', team.id, ben);
    const inTeam = await entries(ben.token, `&team_id=${team.id}`);
    assert.ok(inTeam.some((e) => e.action === 'team.create' && e.actor_id === ann.userId), "an owner sees the team's entries");
    assert.equal((await s.request('PATCH', `${t}/members/${ben.userId}`, { token: ann.token, body: { role: 'viewer' } })).status, 200);
    assert.ok(!(await entries(ben.token)).some((e) => e.actor_id === ann.userId), 'a viewer sees only their own entries');
    assert.equal((await s.request('DELETE', `${t}/members/${ben.userId}`, { token: ann.token })).status, 204);
    await one(ann.token, 'team.member.remove', ben.userId, ann);
    assert.equal((await s.request('DELETE', t, { token: ann.token })).status, 204);
    await one(ann.token, 'team.delete', team.id, ann);
    // The administrator sees everyone's.
    assert.ok((await entries(s.adminToken, `&team_id=${team.id}`)).length >= 6);
  });

  test('two-factor changes are recorded', async () => {
    const login = await s.request('POST', '/api/v1/auth/login', { body: { email: ben.email, password: ben.password } });
    const token: string = login.json.token;
    const setup = await s.request('POST', '/api/v1/users/me/2fa', { token });
    assert.equal(setup.status, 201, setup.text);
    const key = base32Decode(setup.json.secret);
    // The current step's code, then the next one's: both stay in the window if a 30 s step ends meanwhile.
    const now = stepAt(Date.now());
    assert.equal((await s.request('POST', '/api/v1/users/me/2fa/confirm', { token, body: { code: hotp(key, now) } })).status, 200);
    assert.equal((await s.request('DELETE', '/api/v1/users/me/2fa', { token, body: { code: hotp(key, now + 1) } })).status, 204);
    for (const action of ['user.2fa.setup', 'user.2fa.enable', 'user.2fa.disable']) await one(token, action, ben.userId, ben);
    const all = (await entries(token)).map((e) => JSON.stringify(e)).join('\n');
    assert.ok(!all.includes(setup.json.secret), 'the audit log holds the two-factor secret');
  });

  test('the attack: a flood of wrong logins leaves one entry per refusal, the 429s included, and never the password', async () => {
    const victim = await s.newUser('audit-flood');
    const attacker = '127.0.0.2';
    const statuses: number[] = [];
    const bodies: string[] = [];
    for (let i = 0; i < 25; i += 1) {
      const res = await loginFrom(attacker, victim.email, `flood-guess-${i}`);
      statuses.push(res.status);
      bodies.push(res.body);
    }
    // The limiter's 10 checked guesses answer 401, every later one 429 at once.
    assert.deepEqual(statuses, [...Array<number>(10).fill(401), ...Array<number>(15).fill(429)], bodies.join('\n'));
    const failures = (await entries(s.adminToken, `&target_id=${victim.userId}`)).filter((e) => e.action === 'auth.login' && e.outcome === 'failure');
    assert.equal(failures.length, 25, 'one entry per refused login');
    for (const entry of failures) {
      assert.deepEqual([entry.actor_id, entry.actor_email, entry.via, entry.target_type, entry.ip], [victim.userId, victim.email, 'session', 'user', attacker]);
    }
    // The victim reads them too, as every failed login against their account.
    assert.equal((await entries(victim.token, `&target_id=${victim.userId}`)).filter((e) => e.outcome === 'failure').length, 25);
    const all = (await entries(s.adminToken)).map((e) => JSON.stringify(e)).join('\n');
    assert.ok(!all.includes('flood-guess-'), 'the audit log holds a password');
  });

  test('the attack with a stolen session: every refused current password and two-factor code is an entry, the 429s included, never the guess', async () => {
    const victim = await s.newUser('audit-stolen');
    const statuses: number[] = [];
    for (let i = 0; i < 12; i += 1) {
      const res = await s.request('PUT', '/api/v1/users/me/password', { token: victim.token, body: { current_password: `stolen-guess-${i}`, new_password: 'taken-over-password' } });
      statuses.push(res.status);
    }
    assert.ok(statuses.includes(400) && statuses.includes(429) && statuses.every((status) => status === 400 || status === 429), statuses.join(' '));
    const mine = async (action: string): Promise<Entry[]> => (await entries(victim.token, `&target_id=${victim.userId}`)).filter((e) => e.action === action);
    const passwords = await mine('user.password');
    assert.equal(passwords.length, 12, 'one entry per refused password check');
    for (const entry of passwords) assert.deepEqual([entry.outcome, entry.actor_id, entry.actor_email, entry.target_type], ['failure', victim.userId, victim.email, 'user']);

    assert.equal((await s.request('POST', '/api/v1/users/me/2fa', { token: victim.token })).status, 201);
    for (const code of ['000000', '999999']) assertError(await s.request('POST', '/api/v1/users/me/2fa/confirm', { token: victim.token, body: { code } }), 400, 'validation_error');
    assert.deepEqual((await mine('user.2fa.enable')).map((e) => e.outcome), ['failure', 'failure']);
    const all = (await entries(s.adminToken)).map((e) => JSON.stringify(e)).join('\n');
    assert.ok(!all.includes('stolen-guess-') && !all.includes('taken-over-password'), 'the audit log holds a password');
  });

  test("an administrator's quota change is recorded; a refused one is not", async () => {
    const admin = (await s.request('GET', '/api/v1/users/me', { token: s.adminToken })).json;
    const quota = `/api/v1/users/${ann.userId}/quotas`;
    const set = await s.request('PATCH', quota, { token: s.adminToken, body: { deployments: 7 } });
    assert.equal(set.status, 200, set.text);
    const entry = await one(s.adminToken, 'user.quota', ann.userId, null);
    assert.deepEqual([entry.actor_id, entry.actor_email, entry.target_type, entry.team_id], [admin.id, admin.email, 'user', null]);
    // Refused: a bad value, and a user who is not an administrator; neither changes anything or adds an entry.
    assertError(await s.request('PATCH', quota, { token: s.adminToken, body: { deployments: -1 } }), 400, 'validation_error');
    assertError(await s.request('PATCH', quota, { token: ann.token, body: { deployments: 99 } }), 403, 'forbidden');
    const cleared = await s.request('PATCH', quota, { token: s.adminToken, body: { deployments: null } });
    assert.equal(cleared.status, 200, cleared.text);
    const changes = (await entries(s.adminToken, `&target_id=${ann.userId}`)).filter((e) => e.action === 'user.quota');
    assert.equal(changes.length, 2, JSON.stringify(changes));
  });

  test('pages: newest first, Link header, bad limit or cursor 400; nothing changes or deletes an entry', async () => {
    const first = await s.request('GET', '/api/v1/audit?limit=2', { token: ann.token });
    assert.equal(first.status, 200);
    assert.equal(first.json.length, 2);
    assert.ok(first.json[0].at >= first.json[1].at);
    const link = /<([^>]+)>; rel="next"/.exec(first.headers.get('link') ?? '')?.[1];
    assert.ok(link !== undefined && link.startsWith('/api/v1/audit?'));
    const second = await s.request('GET', link, { token: ann.token });
    assert.notEqual(second.json[0].id, first.json[1].id);
    assertError(await s.request('GET', '/api/v1/audit?limit=0', { token: ann.token }), 400, 'validation_error');
    assertError(await s.request('GET', '/api/v1/audit?cursor=garbage', { token: ann.token }), 400, 'validation_error');
    // Another user's cursor does not open.
    const cursor = new URL(link, s.url).searchParams.get('cursor') ?? '';
    // (Ben's key: turning two-factor login on above ended his other sessions.)
    assertError(await s.request('GET', `/api/v1/audit?cursor=${cursor}`, { token: ben.apiKey }), 400, 'validation_error');
    for (const method of ['DELETE', 'PATCH', 'PUT']) {
      assertError(await s.request(method, `/api/v1/audit/${first.json[0].id}`, { token: s.adminToken, body: method === 'DELETE' ? undefined : {} }), 404, 'not_found');
    }
  });
});
