// Unit tests of the notifications' pure parts and their outgoing request on loopback: every redirect checked again, answers size-limited, events' keys and formats.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { isPrivateAddress } from '../../src/core/private-address.js';
import type { AppEvent } from '../../src/domain/app-events.js';
import { dedupeKey, describeEvent, discordBody, slackBody, webhookBody } from '../../src/notifications/event-messages.js';
import { ForbiddenTargetError, postChecked, type TargetPolicy } from '../../src/notifications/outgoing-request.js';
import { startHttpReceiver, type HttpReceiver } from '../helpers/receivers.js';

/** The guard as a server without SLIPWAY_ALLOW_PRIVATE_TARGETS has it, except that this test's own receiver (127.0.0.1) counts as public. */
const guarded: TargetPolicy = { allowPrivate: false, isForbidden: (address) => address !== '127.0.0.1' && isPrivateAddress(address) };
const post = (url: string, policy: TargetPolicy = guarded) =>
  postChecked(url, { headers: { 'content-type': 'application/json' }, body: Buffer.from('{"a":1}'), policy, timeoutMs: 3_000, maxResponseBytes: 1024, maxRedirects: 3 });

describe('outgoing requests to tenant-chosen addresses', () => {
  let r: HttpReceiver;
  before(async () => {
    r = await startHttpReceiver();
  });
  after(async () => {
    await r?.close();
  });

  test('a redirect to a metadata, loopback or private address is refused before it is followed', async () => {
    for (const target of ['http://169.254.169.254/latest/meta-data/', 'http://[::1]:9/', 'http://10.0.0.7/']) {
      r.answer('/to-private', { status: 302, location: target });
      await assert.rejects(post(`${r.url}/to-private`), (err: Error) => err instanceof ForbiddenTargetError && /may not be loopback, private, link-local or metadata/.test(err.message), target);
    }
    // Without the guard's exception, the receiver itself is refused: loopback.
    await assert.rejects(post(`${r.url}/x`, { allowPrivate: false }), ForbiddenTargetError);
    // A DNS answer is checked too (a public-looking name that resolves to a private address).
    await assert.rejects(post('http://hooks.example/x', { allowPrivate: false, resolve: async () => [{ address: '192.168.1.5', family: 4 }] }), /hooks\.example resolves to 192\.168\.1\.5/);
  });

  test('allowed redirects are followed (307 repeats the POST, 302 turns into a GET), at most three', async () => {
    r.answer('/a', { status: 307, location: '/b' });
    r.answer('/b', { status: 302, location: '/c' });
    r.answer('/c', { status: 200, body: 'done' });
    const answer = await post(`${r.url}/a`);
    assert.deepEqual(answer, { status: 200, body: 'done' });
    assert.equal(r.on('/b')[0]?.body.toString(), '{"a":1}');
    assert.equal(r.on('/c')[0]?.body.length, 0);
    r.answer('/loop', { status: 301, location: '/loop' });
    await assert.rejects(post(`${r.url}/loop`), /more than 3 redirects/);
  });

  test('the answer is read up to its limit; a receiver that never answers is cut off at the time limit', async () => {
    r.answer('/big', { status: 500, body: 'x'.repeat(100_000) });
    const big = await post(`${r.url}/big`);
    assert.equal(big.status, 500);
    assert.equal(big.body.length, 1024);
    r.answer('/hang', { status: 200, delayMs: 60_000 });
    const started = Date.now();
    await assert.rejects(postChecked(`${r.url}/hang`, { headers: {}, body: Buffer.alloc(0), policy: guarded, timeoutMs: 300, maxResponseBytes: 10, maxRedirects: 0 }), (err: Error) => err.name === 'TimeoutError' || err.name === 'AbortError');
    assert.ok(Date.now() - started < 5_000);
  });
});

describe('event messages', () => {
  const at = new Date('2026-11-28T10:04:00Z');
  const crashed: AppEvent = { type: 'app.crashed', deploymentId: 'd1', subdomain: 'shop', releaseId: 'r1', since: '2026-11-28T10:00:00Z', restarts: 4, exitCode: 3, lastLine: 'password=hunter2' };

  test('dedupe keys: the same for the same occurrence seen twice, different for the next', () => {
    assert.equal(dedupeKey(crashed, at), 'app.crashed:r1:2026-11-28T10:00:00Z');
    assert.equal(dedupeKey(crashed, new Date(at.getTime() + 60_000)), dedupeKey(crashed, at));
    assert.notEqual(dedupeKey({ ...crashed, since: '2026-11-28T11:00:00Z' }, at), dedupeKey(crashed, at));
    assert.equal(dedupeKey({ type: 'deploy.succeeded', deploymentId: 'd1', subdomain: 'shop', buildId: 'b1' }, at), 'deploy.succeeded:b1');
    const node: AppEvent = { type: 'node.down', nodeId: 'n1', hostname: 'worker-1' };
    assert.equal(dedupeKey(node, at), dedupeKey(node, new Date('2026-11-28T10:09:59Z')));
    assert.notEqual(dedupeKey(node, at), dedupeKey(node, new Date('2026-11-28T10:10:00Z')));
  });

  test("formats: Slack and Discord text with the app, what happened and the link; the webhook's JSON; never the app's last line", () => {
    const m = describeEvent(crashed, 'del-1', at.toISOString(), new URL('https://slipway.example.com/'));
    assert.equal(m.url, 'https://slipway.example.com/#/d/d1');
    assert.deepEqual(slackBody(m), { text: '*shop*: crash loop: the app keeps exiting (4 restarts since 2026-11-28T10:00:00Z, exit code 3) <https://slipway.example.com/#/d/d1|Open in Slipway>' });
    assert.match((discordBody(m) as { content: string }).content, /^\*\*shop\*\*: crash loop.*\nhttps:\/\/slipway\.example\.com\/#\/d\/d1$/);
    assert.deepEqual(webhookBody(m), {
      id: 'del-1',
      event: 'app.crashed',
      at: at.toISOString(),
      deployment: { id: 'd1', subdomain: 'shop' },
      message: m.subject + ': ' + m.text,
      url: 'https://slipway.example.com/#/d/d1',
    });
    assert.ok(!JSON.stringify([slackBody(m), discordBody(m), webhookBody(m)]).includes('hunter2'));
    const long = describeEvent({ type: 'deploy.failed', deploymentId: 'd1', subdomain: 'shop', buildId: 'b1234567890', message: 'e'.repeat(10_000) }, 'x', at.toISOString(), new URL('https://s.example/'));
    assert.ok(long.text.length <= 1_800);
    const backup = webhookBody(describeEvent({ type: 'backup.failed', databaseId: 'db1', databaseName: 'orders', backupId: 'bk1', step: 'upload', message: 'S3 said no' }, 'y', at.toISOString(), new URL('https://s.example/')));
    assert.deepEqual((backup as { database: unknown }).database, { id: 'db1', name: 'orders' });
  });
});
