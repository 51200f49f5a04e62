// The Jobs tab in a real browser (issue 37): a job added from the form (a bad schedule refused with the field named), run now with its log followed to the end, its run listed with its exit code, deleted after a confirmation; at 1280 and 390 px.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { openPage, signIn, type TestBrowser } from '../helpers/browser.js';
import { startWithRunningApp } from '../helpers/browser-app.js';
import type { TestServer } from '../helpers/server.js';

let ts: TestServer;
let browser: TestBrowser;
let user: Awaited<ReturnType<TestServer['newUser']>>;
let app: { id: string };

before(async () => {
  ({ ts, browser, user, app } = await startWithRunningApp('ui-jobs'));
});
after(async () => {
  await browser?.close();
  await ts?.close();
});

test('a job is added, refused with the field named, run now with its log followed, listed and deleted from the Jobs tab', async () => {
  const page = await browser.newPage();
  await page.setViewportSize({ width: 1280, height: 900 });
  await openPage(page, `${ts.url}/#/d/${app.id}/jobs`);
  await signIn(page, user.email, user.password);
  await page.locator('#job-rows td.empty', { hasText: 'No jobs: add one below.' }).waitFor();

  // A schedule that is not cron: the API's message names the field, nothing is added.
  await page.locator('#job-name').fill('greet');
  await page.locator('#job-schedule').fill('every day');
  await page.locator('#job-command').fill('sh\n-c\necho hello from the job; sleep 2; echo last line');
  await page.getByRole('button', { name: 'Add job' }).click();
  await page.locator('#jobs .panel-error', { hasText: 'schedule: a cron expression has 5 fields' }).waitFor();
  assert.equal((await ts.request('GET', `/api/v1/deployments/${app.id}/jobs`, { token: user.token })).json.length, 0);

  await page.locator('#job-schedule').fill('@daily');
  await page.getByRole('button', { name: 'Add job' }).click();
  const row = page.locator('#job-rows tr', { hasText: 'greet' });
  await row.waitFor();
  assert.match(await row.innerText(), /@daily/);
  assert.match(await row.innerText(), /sh -c echo/);
  assert.equal(await page.locator('#jobs .panel-error').innerText(), '', 'the earlier error is gone');

  // Run now: the log is followed while the run goes, to its last line.
  await page.getByRole('button', { name: 'Run greet now' }).click();
  await page.locator('#job-log', { hasText: 'hello from' }).waitFor({ timeout: 60_000 });
  await page.locator('#job-log', { hasText: 'last line' }).waitFor({ timeout: 60_000 });
  const run = page.locator('#job-run-rows tr', { hasText: 'succeeded' });
  await run.waitFor({ timeout: 30_000 });
  assert.match(await run.innerText(), /manual/);
  assert.match(await run.innerText(), /\b0\b/, 'its exit code');

  await page.setViewportSize({ width: 390, height: 844 });
  assert.ok((await page.evaluate<number>('document.scrollingElement.scrollWidth')) <= 390, 'the Jobs tab fits 390 px');

  // Delete: a confirmation naming the job, then the list is empty again.
  await page.getByRole('button', { name: 'Delete job greet' }).click();
  await page.locator('#confirm-body', { hasText: 'its runs with their logs are removed' }).waitFor();
  await page.locator('#confirm-ok').click();
  await page.locator('#job-rows td.empty', { hasText: 'No jobs: add one below.' }).waitFor();
  assert.equal((await ts.request('GET', `/api/v1/deployments/${app.id}/jobs`, { token: user.token })).json.length, 0);
  await page.close();
});
