// End to end (decisions §23): real deploys on the engine tell a signed webhook, Slack and Discord receivers and a real SMTP server on loopback; retries keep a message's id; a slow receiver delays no other channel.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import net from 'node:net';
import { after, before, describe, test } from 'node:test';
import fsp from 'node:fs/promises';
import { busyboxArchive, createArchiveApp, deployAndWait, eventually, tempDir } from '../helpers/apps.js';
import { cli } from '../helpers/cli.js';
import { startHttpReceiver, startSmtpReceiver, type HttpReceiver, type SmtpReceiver } from '../helpers/receivers.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

type User = Awaited<ReturnType<TestServer['newUser']>>;

interface Delivery {
  id: string;
  event: string;
  at: string;
  outcome: string;
  attempts: number;
  status_code: number | null;
  error: string | null;
}

const hmac = (secret: string, body: Buffer): string => `sha256=${crypto.createHmac('sha256', secret).update(body).digest('hex')}`;

describe('notifications delivered for real', () => {
  let ts: TestServer;
  let user: User;
  let receiver: HttpReceiver;
  let smtp: SmtpReceiver;
  let webhookSecret: string;
  const channels: Record<string, string> = {};

  const addChannel = async (name: string, body: Record<string, unknown>): Promise<Record<string, unknown>> => {
    const res = await ts.request('POST', '/api/v1/notification-channels', { token: user.token, body: { name, ...body } });
    assert.equal(res.status, 201, res.text);
    channels[name] = res.json.id as string;
    return res.json as Record<string, unknown>;
  };
  const deliveries = async (name: string): Promise<Delivery[]> => {
    const res = await ts.request('GET', `/api/v1/notification-channels/${channels[name]}/deliveries`, { token: user.token });
    assert.equal(res.status, 200, res.text);
    return res.json as Delivery[];
  };
  const settled = (name: string, count = 1): Promise<Delivery[]> =>
    eventually(async () => {
      const list = await deliveries(name);
      return list.length >= count && list.every((d) => d.outcome !== 'pending') ? list : undefined;
    }, 60_000, `${name}'s deliveries`);

  before(async () => {
    receiver = await startHttpReceiver();
    smtp = await startSmtpReceiver();
    ts = await startTestServer({ SLIPWAY_ALLOW_PRIVATE_TARGETS: 'true', SLIPWAY_SMTP_URL: smtp.url, SLIPWAY_SMTP_FROM: 'slipway@test.local' });
    user = await ts.newUser('notify');
    const deployEvents = ['deploy.succeeded', 'deploy.failed'];
    webhookSecret = (await addChannel('hook', { type: 'webhook', url: `${receiver.url}/hook`, events: [...deployEvents, 'app.crashed'] })).secret as string;
    await addChannel('slack', { type: 'slack', url: `${receiver.url}/slack`, events: deployEvents });
    await addChannel('discord', { type: 'discord', url: `${receiver.url}/discord`, events: ['deploy.succeeded'] });
    await addChannel('mail', { type: 'email', email: 'ops@test.local', events: ['deploy.succeeded'] });
    await addChannel('refused-mail', { type: 'email', email: 'refuse@test.local', events: ['deploy.succeeded'] });
  });
  after(async () => {
    await ts?.close();
    await receiver?.close();
    await smtp?.close();
  });

  test('a real deploy: deploy.succeeded, signed, to the webhook, Slack, Discord and e-mail; a refusing SMTP server recorded', async () => {
    const { id, subdomain } = await createArchiveApp(ts, user.token, (await busyboxArchive({ body: 'notified\n' })).archive);
    const deployed = await deployAndWait(ts, user.token, id);
    assert.equal(deployed.status, 200, deployed.text);
    const buildId = deployed.json.id as string;

    const [delivery] = await settled('hook');
    assert.equal(delivery?.event, 'deploy.succeeded');
    assert.equal(delivery?.outcome, 'delivered');
    assert.equal(delivery?.status_code, 200);
    const [hook] = receiver.on('/hook');
    assert.ok(hook !== undefined);
    assert.equal(hook.headers['x-slipway-signature-256'], hmac(webhookSecret, hook.body), 'signed with the secret shown at creation');
    const payload = JSON.parse(hook.body.toString('utf8'));
    assert.equal(payload.id, delivery?.id);
    assert.equal(payload.event, 'deploy.succeeded');
    assert.deepEqual(payload.deployment, { id, subdomain });
    assert.equal(payload.build.id, buildId);
    assert.match(payload.message, new RegExp(subdomain));
    assert.match(payload.url, new RegExp(`#/d/${id}$`));
    assert.ok(!Number.isNaN(Date.parse(payload.at)));

    await settled('slack');
    const slack = JSON.parse(receiver.on('/slack')[0]?.body.toString('utf8') ?? '{}');
    assert.match(slack.text, new RegExp(`${subdomain}.*deploy succeeded.*<http[^|]+#/d/${id}\\|`));
    await settled('discord');
    const discord = JSON.parse(receiver.on('/discord')[0]?.body.toString('utf8') ?? '{}');
    assert.match(discord.content, new RegExp(`${subdomain}.*deploy succeeded[\\s\\S]*#/d/${id}`));

    const [mailed] = await settled('mail');
    assert.equal(mailed?.outcome, 'delivered');
    const mail = smtp.mails.find((m) => m.to.includes('ops@test.local'));
    assert.ok(mail !== undefined, 'the SMTP server received the e-mail');
    assert.equal(mail.from, 'slipway@test.local');
    assert.match(mail.data, new RegExp(`Subject: \\[Slipway\\] ${subdomain}: deploy succeeded`));

    const [refused] = await settled('refused-mail');
    assert.equal(refused?.outcome, 'failed');
    assert.equal(refused?.status_code, 550);
    assert.match(refused?.error ?? '', /refused.*550|550.*refuses/);
    assert.equal(refused?.attempts, 1, 'a permanent refusal is not retried');
  });

  test('a build that fails: deploy.failed with its reason', async () => {
    const { id } = await createArchiveApp(ts, user.token, (await busyboxArchive({ extraDockerfile: 'RUN echo cannot build; exit 3' })).archive);
    const deployed = await deployAndWait(ts, user.token, id);
    assert.equal(deployed.json.error, 'build_failed', deployed.text);
    const failed = await eventually(async () => (await deliveries('hook')).find((d) => d.event === 'deploy.failed' && d.outcome !== 'pending'), 30_000, 'deploy.failed');
    assert.equal(failed.outcome, 'delivered');
    const body = receiver.on('/hook').map((r) => JSON.parse(r.body.toString('utf8'))).find((p) => p.event === 'deploy.failed');
    assert.equal(body.deployment.id, id);
    assert.match(body.message, /deploy failed/);
    assert.ok((await settled('slack', 2)).some((d) => d.event === 'deploy.failed'));
  });

  test('5xx answers are retried with the same id; a slow receiver delays no other channel; test sends answer how it went', async () => {
    receiver.answer('/flaky', (count) => (count <= 2 ? { status: 503, body: 'busy' } : { status: 204 }));
    receiver.answer('/slow', { status: 200, delayMs: 3_000 });
    await addChannel('flaky', { type: 'webhook', url: `${receiver.url}/flaky`, events: ['app.crashed'] });
    await addChannel('slow', { type: 'slack', url: `${receiver.url}/slow`, events: ['app.crashed'] });
    // A receiver nobody runs: its port closed.
    const closed = net.createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const deadPort = (closed.address() as net.AddressInfo).port;
    await new Promise((resolve) => closed.close(resolve));
    await addChannel('dead', { type: 'webhook', url: `http://127.0.0.1:${deadPort}/hook`, events: ['app.crashed'] });
    const { id, subdomain } = await createArchiveApp(ts, user.token, (await busyboxArchive()).archive);
    const crashed = { type: 'app.crashed', deploymentId: id, subdomain, releaseId: crypto.randomUUID(), since: new Date().toISOString(), restarts: 3, exitCode: 3, lastLine: 'secret-ish' } as const;
    ts.server.appEvents.emit(crashed);
    // Seen again (another look, another instance): still one message per channel.
    ts.server.appEvents.emit(crashed);

    const [flaky] = await settled('flaky');
    assert.equal(flaky?.outcome, 'delivered');
    assert.equal(flaky?.attempts, 3);
    assert.equal(flaky?.status_code, 204);
    const tries = receiver.on('/flaky').map((r) => JSON.parse(r.body.toString('utf8')).id as string);
    assert.deepEqual(tries, [flaky?.id, flaky?.id, flaky?.id], 'every retry carries the same id');
    assert.ok(!receiver.on('/flaky').some((r) => r.body.toString('utf8').includes('secret-ish')), "the app's last line is not sent");

    const fast = await eventually(async () => receiver.on('/hook').find((r) => JSON.parse(r.body.toString('utf8')).event === 'app.crashed'), 10_000, 'the fast channel');
    const slow = await eventually(async () => receiver.on('/slow')[0], 10_000, 'the slow channel');
    assert.ok(fast.at < slow.at + 3_000, 'the fast channel got its message while the slow receiver still held its request');
    assert.equal((await settled('slow'))[0]?.outcome, 'delivered');
    assert.equal(receiver.on('/slow').length, 1);
    const [dead] = await settled('dead');
    assert.deepEqual([dead?.outcome, dead?.attempts, dead?.status_code], ['failed', 4, null], 'an unreachable receiver: tried 4 times, then failed');
    assert.match(dead?.error ?? '', /ECONNREFUSED|refused/i);

    const ok = await ts.request('POST', `/api/v1/notification-channels/${channels['hook']}/test`, { token: user.token });
    assert.equal(ok.status, 200, ok.text);
    assert.deepEqual(ok.json, { ok: true, status_code: 200 });
    const test = receiver.on('/hook').at(-1);
    assert.equal(JSON.parse(test?.body.toString('utf8') ?? '{}').event, 'test');
    assert.equal(test?.headers['x-slipway-signature-256'], hmac(webhookSecret, test?.body ?? Buffer.alloc(0)));
    const [logged] = await deliveries('hook');
    assert.deepEqual([logged?.id, logged?.event, logged?.outcome, logged?.attempts, logged?.status_code], [JSON.parse(test?.body.toString('utf8') ?? '{}').id, 'test', 'delivered', 1, 200], 'the test message is in the delivery log');
    const refused = await ts.request('POST', `/api/v1/notification-channels/${channels['refused-mail']}/test`, { token: user.token });
    assert.equal(refused.json.ok, false);
    assert.equal(refused.json.status_code, 550);
    assert.match(refused.json.error, /refuse/);
  });

  test('slipway notify add, ls, test, deliveries, rm', async () => {
    const home = tempDir('notify-cli');
    const env = { SLIPWAY_URL: ts.url, SLIPWAY_API_KEY: user.apiKey };
    try {
      const added = await cli(['notify', 'add', 'cli-hook', '--type', 'webhook', '--url', `${receiver.url}/cli`, '--events', 'all'], { home, env });
      assert.equal(added.code, 0, added.stderr);
      assert.match(added.stdout, /Added webhook channel cli-hook .* for deploy\.succeeded, deploy\.failed, app\.crashed, backup\.failed, backup\.verified, job\.failed, certificate\.failed, node\.down/);
      assert.match(added.stdout, /Signing secret \(shown once[^\n]*\n  whsec_/);
      const listed = await cli(['notify', 'ls'], { home, env });
      assert.equal(listed.code, 0, listed.stderr);
      assert.match(listed.stdout, /cli-hook\s+webhook\s+http:\/\/127\.0\.0\.1:\d+\/…/);
      const tested = await cli(['notify', 'test', 'cli-hook'], { home, env });
      assert.equal(tested.code, 0, tested.stderr);
      assert.match(tested.stdout, /Sent to cli-hook \(answered 200\)/);
      assert.equal(receiver.on('/cli').length, 1);
      const log = await cli(['notify', 'deliveries', 'hook'], { home, env });
      assert.equal(log.code, 0, log.stderr);
      assert.match(log.stdout, /deploy\.succeeded\s+delivered\s+1\s+200/);
      const removed = await cli(['notify', 'rm', 'cli-hook'], { home, env });
      assert.equal(removed.code, 0, removed.stderr);
      assert.match(removed.stdout, /Deleted channel cli-hook/);
    } finally {
      await fsp.rm(home, { recursive: true, force: true });
    }
  });
});
