// A crash-looping app in Chromium (issue 33 item 1): the list, the app header and the Overview say "Crashed — restarting (exit 3: boom)" beside `running`.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { Page } from 'playwright-core';
import { busyboxScriptArchive, createArchiveApp, deployAndWait, eventually, testEngine } from '../helpers/apps.js';
import { launchBrowser, openPage, signIn, type TestBrowser } from '../helpers/browser.js';
import { ensureBusyboxImage } from '../helpers/busybox-image.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

let ts: TestServer;
let browser: TestBrowser;
let user: Awaited<ReturnType<TestServer['newUser']>>;

/** Serves HTTP at once, then prints "boom" and exits with code 3 two seconds later, every run. */
async function crashLoopApp(): Promise<Buffer> {
  return busyboxScriptArchive('mkdir -p /www; echo ok > /www/index.html; httpd -p "${PORT:-8080}" -h /www; sleep 2; echo boom; exit 3');
}

before(async () => {
  await ensureBusyboxImage(testEngine());
  [ts, browser] = await Promise.all([startTestServer(), launchBrowser()]);
  user = await ts.newUser('truth');
});
after(async () => {
  await browser?.close();
  await ts?.close();
});

async function open(page: Page, hash: string): Promise<void> {
  await openPage(page, `${ts.url}/${hash}`);
  await signIn(page, user.email, user.password);
}

test('a crash-looping app: "running" with a crash-loop pill and "Crashed — restarting (exit 3: boom)" in the list, the app header and the Overview', async () => {
  const app = await createArchiveApp(ts, user.token, await crashLoopApp());
  assert.equal((await deployAndWait(ts, user.token, app.id)).status, 200);
  await eventually(async () => ((await ts.request('GET', `/api/v1/deployments/${app.id}`, { token: user.token })).json.health.state === 'crash_loop' ? true : undefined), 120_000, 'the crash loop');
  const page = await browser.newPage();
  await open(page, '#/');
  const row = page.locator(`#app-rows tr[data-id="${app.id}"]`);
  await row.locator('.health-line').waitFor();
  assert.equal(await row.locator('.status .badge.running').innerText(), 'running');
  assert.equal(await row.locator('.status .badge.failed').innerText(), 'crash loop');
  assert.equal(await row.locator('.health-line').innerText(), 'Crashed — restarting (exit 3: boom)');
  await row.getByRole('link', { name: app.subdomain, exact: true }).click();
  await page.locator('#overview-facts .health-line').waitFor();
  assert.equal(await page.locator('#overview-facts .health-line').innerText(), 'Crashed — restarting (exit 3: boom)');
  assert.equal(await page.locator('#status .health-line').innerText(), 'Crashed — restarting (exit 3: boom)');
  await page.close();
  assert.equal((await ts.request('POST', `/api/v1/deployments/${app.id}/stop`, { token: user.token })).status, 200);
});

