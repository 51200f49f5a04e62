// Configuration pending in Chromium (issue 33 item 2): a change made in one browser is pending in another (list, bar, Overview), and a restart from either clears it for both.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { Page } from 'playwright-core';
import { busyboxArchive, createArchiveApp, deployAndWait, testEngine } from '../helpers/apps.js';
import { launchBrowser, openPage, signIn, type TestBrowser } from '../helpers/browser.js';
import { ensureBusyboxImage } from '../helpers/busybox-image.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

let ts: TestServer;
let browser: TestBrowser;
/** A second browser (its own profile and cookies): another person's tab, or the phone. */
let other: TestBrowser;
let user: Awaited<ReturnType<TestServer['newUser']>>;
let running: { id: string; subdomain: string };

before(async () => {
  await ensureBusyboxImage(testEngine());
  [ts, browser, other] = await Promise.all([startTestServer(), launchBrowser(), launchBrowser()]);
  user = await ts.newUser('truth');
  running = await createArchiveApp(ts, user.token, (await busyboxArchive()).archive);
  assert.equal((await deployAndWait(ts, user.token, running.id)).status, 200);
});
after(async () => {
  await Promise.all([browser?.close(), other?.close()]);
  await ts?.close();
});

async function open(page: Page, hash: string): Promise<void> {
  await openPage(page, `${ts.url}/${hash}`);
  await signIn(page, user.email, user.password);
}

test('configuration changed in one browser is pending in another (list, header bar, Overview); a restart from the second clears it in both', async () => {
  const mine = await browser.newPage();
  await open(mine, `#/d/${running.id}/settings`);
  const form = mine.locator('#env-form');
  await form.locator('input[name=key]').fill('CHANGED_ELSEWHERE');
  await form.locator('input[name=value]').fill('1');
  await form.getByRole('button', { name: 'Add variable' }).click();
  const text = 'Configuration changed (CHANGED_ELSEWHERE): the running app still has the old one until it restarts.';
  await mine.locator('#pending-text', { hasText: text }).waitFor();

  // Another browser (no shared storage): the server says it.
  const theirs = await other.newPage();
  await theirs.setViewportSize({ width: 390, height: 844 });
  await open(theirs, '#/');
  const row = theirs.locator(`#app-rows tr[data-id="${running.id}"]`);
  await row.locator('.badge.config-pending').waitFor();
  assert.equal(await row.locator('.badge.config-pending').innerText(), 'restart pending');
  await row.getByRole('link', { name: running.subdomain, exact: true }).click();
  await theirs.locator('#pending-text', { hasText: text }).waitFor();
  assert.equal(await theirs.locator('#overview-pending').innerText(), 'CHANGED_ELSEWHERE changed since the running release: it applies when the app restarts.');
  await theirs.getByRole('button', { name: 'Restart to apply' }).click();
  await theirs.locator('#pending-bar').waitFor({ state: 'hidden', timeout: 120_000 });
  await mine.locator('#pending-bar').waitFor({ state: 'hidden', timeout: 30_000 });
  assert.equal((await ts.request('GET', `/api/v1/deployments/${running.id}`, { token: user.token })).json.config_pending, false);
  await Promise.all([mine.close(), theirs.close()]);
});

