// The Notifications page in a real browser: add a signed webhook channel (its secret shown once), test it, see a real delivery in its log, delete it.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { launchBrowser, openPage, signIn, type TestBrowser } from '../helpers/browser.js';
import { startHttpReceiver, type HttpReceiver } from '../helpers/receivers.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

let ts: TestServer;
let browser: TestBrowser;
let receiver: HttpReceiver;
let user: Awaited<ReturnType<TestServer['newUser']>>;

before(async () => {
  receiver = await startHttpReceiver();
  ts = await startTestServer({ SLIPWAY_ALLOW_PRIVATE_TARGETS: 'true' });
  user = await ts.newUser('ui-notify');
  browser = await launchBrowser();
});
after(async () => {
  await browser?.close();
  await ts?.close();
  await receiver?.close();
});

test('a channel is added with its events, tested, shows its deliveries and is deleted from the page', async () => {
  const page = await browser.newPage();
  await openPage(page, ts.url);
  await signIn(page, user.email, user.password);

  await page.getByRole('link', { name: 'Notifications' }).click();
  await page.locator('#channels-empty').waitFor();
  await page.locator('#channel-form input[name=name]').fill('ops hook');
  await page.locator('#channel-form select[name=type]').selectOption('webhook');
  await page.getByLabel('URL').fill(`${receiver.url}/ui`);
  await page.getByLabel('Deploy succeeded').check();
  await page.getByRole('button', { name: 'Add channel' }).click();
  await page.locator('#channel-secret', { hasText: 'whsec_' }).waitFor();
  const row = page.locator('#channel-rows tr', { hasText: 'ops hook' });
  await row.getByText('deploy.succeeded, deploy.failed, app.crashed').waitFor();

  await row.getByRole('button', { name: 'Test' }).click();
  await page.locator('#channel-status', { hasText: 'Test message sent to ops hook (answered 200)' }).waitFor();
  assert.match(await page.locator('#channel-secret').innerText(), /whsec_/, 'the secret stays on screen until the page is left');
  assert.equal(JSON.parse(receiver.on('/ui')[0]?.body.toString() ?? '{}').event, 'test');

  const subdomain = `ui-notify-${process.pid}`;
  const created = await ts.request('POST', '/api/v1/deployments', { token: user.token, body: { name: subdomain, subdomain, source_type: 'archive' } });
  ts.server.appEvents.emit({ type: 'deploy.succeeded', deploymentId: created.json.id as string, subdomain, buildId: crypto.randomUUID() });
  await row.getByRole('button', { name: 'Deliveries' }).click();
  const log = page.locator('#channel-deliveries');
  await log.locator('tr', { hasText: 'deploy.succeeded' }).locator('.badge', { hasText: 'delivered' }).waitFor({ timeout: 20_000 });
  // The test message is in the log too, where the user looks after pressing Test.
  await log.locator('tbody tr').filter({ has: page.locator('td[data-label=Event]', { hasText: /^test$/ }) }).locator('.badge', { hasText: 'delivered' }).waitFor();

  for (const width of [1280, 390]) {
    await page.setViewportSize({ width, height: 900 });
    assert.ok((await page.evaluate<number>('document.scrollingElement.scrollWidth')) <= width, `the Notifications page fits ${width} px`);
    await page.screenshot({ path: path.join(os.tmpdir(), `slipway-notifications-${width}.png`), fullPage: true });
  }
  await row.getByRole('button', { name: 'Delete' }).click();
  await page.locator('#confirm-ok').click();
  await page.locator('#channels-empty').waitFor();
  assert.deepEqual((await ts.request('GET', '/api/v1/notification-channels', { token: user.token })).json, []);
});
