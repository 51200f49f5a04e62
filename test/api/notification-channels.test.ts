// API tests: notification channels (decisions §23) on a server that keeps the private-address guard on — CRUD, the URL never shown whole, the secret once, bad input, other users' (404) and team roles.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { assertError } from '../helpers/api-assert.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

type User = Awaited<ReturnType<TestServer['newUser']>>;

const SLACK_URL = 'https://hooks.slack.example/services/T000/B000/very-secret-token';
const base = '/api/v1/notification-channels';

describe('notification channels', () => {
  let s: TestServer;
  let alice: User;
  let bob: User;

  before(async () => {
    s = await startTestServer();
    alice = await s.newUser('alice');
    bob = await s.newUser('bob');
  });
  after(async () => {
    await s?.close();
  });

  test('create, list, read, change, delete; the URL is shown by its origin only and stored encrypted; the webhook secret once', async () => {
    const created = await s.request('POST', base, { token: alice.token, body: { name: 'ops', type: 'slack', url: SLACK_URL, events: ['deploy.failed', 'deploy.succeeded'] } });
    assert.equal(created.status, 201, created.text);
    assert.equal(created.json.url, 'https://hooks.slack.example/…');
    assert.deepEqual(created.json.events, ['deploy.succeeded', 'deploy.failed']);
    assert.equal(created.json.team_id, null);
    assert.equal(created.json.secret, undefined);
    assert.ok(!created.text.includes('very-secret-token'));
    const id = created.json.id as string;

    const hook = await s.request('POST', base, { token: alice.apiKey, body: { name: 'hook', type: 'webhook', url: 'https://receiver.example/hook', events: ['app.crashed'] } });
    assert.equal(hook.status, 201, hook.text);
    const secret = hook.json.secret as string;
    assert.match(secret, /^whsec_[A-Za-z0-9_-]{20,}$/);
    const one = await s.request('GET', `${base}/${hook.json.id}`, { token: alice.token });
    assert.equal(one.status, 200);
    assert.equal(one.json.secret, undefined, 'shown once');
    const rotated = await s.request('PATCH', `${base}/${hook.json.id}`, { token: alice.token, body: { rotate_secret: true } });
    assert.equal(rotated.status, 200, rotated.text);
    assert.ok(typeof rotated.json.secret === 'string' && rotated.json.secret !== secret);
    const audit = await s.request('GET', `/api/v1/audit?target_id=${hook.json.id}`, { token: alice.token });
    assert.deepEqual((audit.json as Array<{ action: string }>).map((e) => e.action), ['notification_channel.rotate_secret', 'notification_channel.create']);
    assert.ok(!audit.text.includes(secret) && !audit.text.includes('receiver.example'), 'the audit log names the channel by id only');

    const list = await s.request('GET', base, { token: alice.token });
    assert.deepEqual((list.json as Array<{ id: string }>).map((c) => c.id), [id, hook.json.id]);
    assert.ok(!list.text.includes('very-secret-token') && !list.text.includes(secret));
    assert.deepEqual((await s.request('GET', base, { token: bob.token })).json, []);

    const patched = await s.request('PATCH', `${base}/${id}`, { token: alice.token, body: { name: 'ops 2', events: ['node.down'] } });
    assert.equal(patched.status, 200, patched.text);
    assert.equal(patched.json.name, 'ops 2');
    assert.deepEqual(patched.json.events, ['node.down']);
    assert.deepEqual((await s.request('GET', `${base}/${id}/deliveries`, { token: alice.token })).json, []);

    // At rest: neither the URL's token nor the secret is in the database file.
    const files = fs.readdirSync(s.dataDir).filter((f) => f.startsWith('slipway.db')).map((f) => fs.readFileSync(path.join(s.dataDir, f)).toString('latin1'));
    if (s.config.databaseUrl === undefined) assert.ok(files.length > 0 && files.every((text) => !text.includes('very-secret-token') && !text.includes(secret)));

    assert.equal((await s.request('DELETE', `${base}/${id}`, { token: alice.token })).status, 204);
    assertError(await s.request('GET', `${base}/${id}`, { token: alice.token }), 404, 'not_found');
  });

  test("another user's channel is 404 everywhere; a team's follows the team's roles", async () => {
    const created = await s.request('POST', base, { token: alice.token, body: { name: 'mine', type: 'discord', url: 'https://discord.example/api/webhooks/1/x', events: ['deploy.failed'] } });
    const id = created.json.id as string;
    for (const [method, suffix, body] of [['GET', '', undefined], ['PATCH', '', { name: 'x' }], ['DELETE', '', undefined], ['POST', '/test', undefined], ['GET', '/deliveries', undefined]] as const) {
      assertError(await s.request(method, `${base}/${id}${suffix}`, { token: bob.token, ...(body === undefined ? {} : { body }) }), 404, 'not_found', `${method} ${suffix}`);
    }
    assertError(await s.request('GET', `${base}/not-a-uuid`, { token: bob.token }), 404, 'not_found');

    const team = await s.request('POST', '/api/v1/teams', { token: alice.token, body: { name: `notify-team-${process.pid}` } });
    assert.equal(team.status, 201, team.text);
    const teamId = team.json.id as string;
    assert.equal((await s.request('POST', `/api/v1/teams/${teamId}/members`, { token: alice.token, body: { email: bob.email, role: 'viewer' } })).status, 201);
    const teamChannel = await s.request('POST', base, { token: alice.token, body: { name: 'team', type: 'webhook', url: 'https://receiver.example/t', events: ['job.failed'], team_id: teamId } });
    assert.equal(teamChannel.status, 201, teamChannel.text);
    // Bob, a viewer, sees it (not its secret) but may not change it.
    const seen = await s.request('GET', `${base}?team_id=${teamId}`, { token: bob.token });
    assert.deepEqual((seen.json as Array<{ id: string }>).map((c) => c.id), [teamChannel.json.id]);
    assertError(await s.request('PATCH', `${base}/${teamChannel.json.id}`, { token: bob.token, body: { name: 'mine now' } }), 403, 'forbidden');
    assertError(await s.request('POST', base, { token: bob.token, body: { name: 'b', type: 'slack', url: SLACK_URL, events: ['job.failed'], team_id: teamId } }), 403, 'forbidden');
    // A developer changes and tests it; only an owner creates or deletes a team's channel, as for the team's deployments.
    const dave = await s.newUser('dave');
    assert.equal((await s.request('POST', `/api/v1/teams/${teamId}/members`, { token: alice.token, body: { email: dave.email, role: 'developer' } })).status, 201);
    assert.equal((await s.request('PATCH', `${base}/${teamChannel.json.id}`, { token: dave.token, body: { name: 'team-renamed' } })).status, 200);
    assertError(await s.request('DELETE', `${base}/${teamChannel.json.id}`, { token: dave.token }), 403, 'forbidden');
    assertError(await s.request('POST', base, { token: dave.token, body: { name: 'd', type: 'slack', url: SLACK_URL, events: ['job.failed'], team_id: teamId } }), 403, 'forbidden');
    // Someone outside the team: as if it did not exist.
    const carol = await s.newUser('carol');
    assertError(await s.request('GET', `${base}/${teamChannel.json.id}`, { token: carol.token }), 404, 'not_found');
    assertError(await s.request('POST', base, { token: carol.token, body: { name: 'c', type: 'slack', url: SLACK_URL, events: ['job.failed'], team_id: teamId } }), 404, 'not_found');
  });

  test('the list comes a page at a time (§14); a test message is in the delivery log, failed with its error', async () => {
    const erin = await s.newUser('erin');
    const ids: string[] = [];
    for (const name of ['one', 'two', 'three']) {
      const created = await s.request('POST', base, { token: erin.token, body: { name, type: 'webhook', url: 'https://receiver.invalid/h', events: ['job.failed'] } });
      assert.equal(created.status, 201, created.text);
      ids.push(created.json.id as string);
    }
    const first = await s.request('GET', `${base}?limit=2`, { token: erin.token });
    assert.equal(first.status, 200, first.text);
    assert.deepEqual((first.json as Array<{ id: string }>).map((c) => c.id), ids.slice(0, 2));
    const next = /^<(\/api\/v1\/notification-channels\?cursor=[^>]+&limit=2)>; rel="next"$/.exec(String(first.headers.get('link')));
    assert.ok(next?.[1] !== undefined, `a next link: ${String(first.headers.get('link'))}`);
    const second = await s.request('GET', next[1], { token: erin.token });
    assert.deepEqual((second.json as Array<{ id: string }>).map((c) => c.id), ids.slice(2));
    assert.equal(second.headers.get('link'), null, 'the last page');
    assertError(await s.request('GET', next[1], { token: alice.token }), 400, 'validation_error', "another user's cursor");
    assertError(await s.request('GET', `${base}?limit=0`, { token: erin.token }), 400, 'validation_error');

    // The receiver's name does not resolve: the test answers the error, and the log shows the message.
    const tested = await s.request('POST', `${base}/${ids[0]}/test`, { token: erin.token });
    assert.equal(tested.status, 200, tested.text);
    assert.equal(tested.json.ok, false);
    const log = await s.request('GET', `${base}/${ids[0]}/deliveries`, { token: erin.token });
    assert.equal(log.status, 200, log.text);
    assert.equal(log.json.length, 1, log.text);
    assert.deepEqual([log.json[0].event, log.json[0].outcome, log.json[0].attempts, log.json[0].error], ['test', 'failed', 1, tested.json.error]);
    assert.deepEqual((await s.request('GET', `${base}/${ids[1]}/deliveries`, { token: erin.token })).json, [], "another channel's log is its own");
  });

  test('bad input is 400 naming the field or the rule, and creates nothing', async () => {
    const bad = async (body: Record<string, unknown>, pattern: RegExp): Promise<void> => {
      const res = await s.request('POST', base, { token: alice.token, body: { name: 'n', type: 'webhook', url: 'https://receiver.example/h', events: ['deploy.failed'], ...body } });
      assertError(res, 400, 'validation_error', JSON.stringify(body));
      assert.match(res.json.message, pattern);
    };
    const before = (await s.request('GET', base, { token: alice.token })).json.length as number;
    await bad({ type: 'pager' }, /type must be one of slack, discord, webhook, email/);
    await bad({ events: ['deploy.exploded'] }, /events: unknown event "deploy.exploded"/);
    await bad({ events: [] }, /events must name at least one/);
    await bad({ url: 'ftp://example.com/x' }, /url must be an http/);
    await bad({ url: 'not a url' }, /url must be an absolute/);
    await bad({ url: undefined }, /url is required/);
    await bad({ type: 'email', url: undefined, email: 'not-an-address' }, /email must be one e-mail address/);
    await bad({ name: ' ' }, /name must be/);
    await bad({ extra: 1 }, /extra/);
    // Forbidden addresses, literal or after DNS resolution: the rule is named.
    for (const url of ['http://127.0.0.1:9/hook', 'http://localhost:9/hook', 'http://169.254.169.254/latest/meta-data', 'http://10.1.2.3/x', 'http://[::1]/x', 'http://[::ffff:192.168.1.1]/x']) {
      await bad({ url }, /may not be loopback, private, link-local or metadata addresses.*SLIPWAY_ALLOW_PRIVATE_TARGETS/);
    }
    assert.equal((await s.request('GET', base, { token: alice.token })).json.length, before);
    const id = (await s.request('POST', base, { token: alice.token, body: { name: 'ok', type: 'slack', url: SLACK_URL, events: ['deploy.failed'] } })).json.id as string;
    assertError(await s.request('PATCH', `${base}/${id}`, { token: alice.token, body: { url: 'http://127.0.0.1/x' } }), 400, 'validation_error');
    assertError(await s.request('PATCH', `${base}/${id}`, { token: alice.token, body: { rotate_secret: true } }), 400, 'validation_error');
    assertError(await s.request('PATCH', `${base}/${id}`, { token: alice.token, body: { type: 'webhook' } }), 400, 'validation_error');
    assert.equal((await s.request('GET', `${base}/${id}`, { token: alice.token })).json.url, 'https://hooks.slack.example/…');
  });
});
