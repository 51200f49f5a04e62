// E-mail channels through a real SMTP server on loopback: smtp:// takes STARTTLS when the server offers it, even with a self-signed certificate (as smtp-server offers by default).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Message } from '../../src/notifications/event-messages.js';
import type { Channel } from '../../src/notifications/notification-store.js';
import { sendMessage } from '../../src/notifications/send-message.js';
import { startSmtpReceiver } from '../helpers/receivers.js';

const channel: Channel = {
  id: 'c1',
  user_id: 'u1',
  team_id: null,
  name: 'mail',
  type: 'email',
  url: null,
  email: 'ops@test.local',
  secret: null,
  events: ['deploy.failed'],
  created_at: '2026-11-29T00:00:00.000Z',
  updated_at: '2026-11-29T00:00:00.000Z',
};

const message: Message = {
  id: 'd1',
  event: 'deploy.failed',
  at: '2026-11-29T00:00:00.000Z',
  subject: 'shop',
  text: 'The deploy of shop failed: image build failed.',
  url: 'https://slipway.test/#/apps/x',
};

for (const starttls of [false, true]) {
  test(`an e-mail is delivered over smtp:// to a server ${starttls ? 'offering STARTTLS with a self-signed certificate (taken)' : 'without TLS'}`, async () => {
    const smtp = await startSmtpReceiver({ starttls });
    try {
      const result = await sendMessage(channel, message, { policy: { allowPrivate: true }, smtp: { url: smtp.url, from: 'slipway@test.local' }, timeoutMs: 10_000 });
      assert.deepEqual(result, { ok: true, statusCode: null, error: null, retryable: false });
      assert.equal(smtp.mails.length, 1);
      assert.deepEqual(smtp.mails[0]?.to, ['ops@test.local']);
      assert.match(smtp.mails[0]?.data ?? '', /X-Slipway-Event: deploy\.failed/);
      assert.equal(smtp.secured(), starttls, starttls ? 'the conversation was encrypted' : 'plain text, nothing offered');
    } finally {
      await smtp.close();
    }
  });
}
