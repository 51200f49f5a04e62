// The dashboard's Previews section in a real browser: previews made by signed pull request deliveries are listed with their links and statuses, the switch sets the field, a build log opens, a delete asks first.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { after, before, test } from 'node:test';
import type { Page } from 'playwright-core';
import { eventually } from '../helpers/apps.js';
import { launchBrowser, openPage, type TestBrowser } from '../helpers/browser.js';
import { pullRequestBody, pullRequestHeaders } from '../helpers/pull-requests.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

let ts: TestServer;
let browser: TestBrowser;
let user: Awaited<ReturnType<TestServer['newUser']>>;

before(async () => {
  ts = await startTestServer();
  user = await ts.newUser('pvdash');
  browser = await launchBrowser();
});
after(async () => {
  await browser?.close();
  await ts?.close();
});

async function logIn(page: Page): Promise<void> {
  await page.locator('#login-form input[name=email]').fill(user.email);
  await page.locator('#login-form input[name=password]').fill(user.password);
  await page.getByRole('button', { name: 'Log in' }).click();
  await page.locator('#who', { hasText: user.email }).waitFor();
}

test('an app page lists its previews with links and statuses; the switch, a build log and a confirmed delete work', async () => {
  const sub = `pvdash-${process.pid}`;
  // A repository that cannot be reached: each preview's build fails at the fetch, which is all the page needs.
  const created = await ts.request('POST', '/api/v1/deployments', {
    token: user.token,
    body: { name: sub, subdomain: sub, repo_url: 'http://127.0.0.1:9/app.git', branch: 'main', previews: true },
  });
  assert.equal(created.status, 201, created.text);
  const id = created.json.id as string;
  const secret = (await ts.request('POST', `/api/v1/deployments/${id}/webhook`, { token: user.token })).json.secret as string;
  for (const number of [3, 4]) {
    const body = pullRequestBody('github', { action: 'opened', number, headSha: crypto.randomBytes(20).toString('hex'), headBranch: `topic-${number}` });
    const res = await ts.request('POST', `/api/v1/hooks/${id}`, { raw: body, headers: pullRequestHeaders('github', secret, body) });
    assert.equal(res.status, 202, res.text);
  }

  const page = await browser.newPage();
  await openPage(page, ts.url + '/');
  await logIn(page);
  await page.evaluate(`location.hash = ${JSON.stringify(`#/d/${id}`)}`);
  await page.getByRole('tab', { name: 'Previews' }).click();
  const row = page.locator('#preview-rows tr', { hasText: '#3' });
  await row.waitFor();
  assert.equal(await row.getByRole('link').getAttribute('href'), `http://${sub}-pr-3.localhost:${ts.port}/`);
  await row.locator('.badge', { hasText: 'failed' }).waitFor({ timeout: 60_000 });
  assert.match(await row.innerText(), /topic-3/);
  await page.locator('#preview-rows tr', { hasText: '#4' }).waitFor();
  assert.equal(await page.locator('#previews-toggle').isChecked(), true);

  await row.getByRole('button', { name: 'Build log of preview #3' }).click();
  await page.locator('#preview-log', { hasText: 'refs/pull/3/head' }).waitFor();

  await page.locator('#previews-toggle').uncheck();
  await eventually(
    async () => ((await ts.request('GET', `/api/v1/deployments/${id}`, { token: user.token })).json.previews === false ? true : undefined),
    30_000,
    'the switch to turn previews off',
  );

  await row.getByRole('button', { name: 'Delete preview #3' }).click();
  await page.getByRole('dialog').getByRole('button', { name: 'Delete' }).click();
  await row.waitFor({ state: 'detached' });
  assert.equal((await ts.request('GET', `/api/v1/deployments/${id}/previews/3`, { token: user.token })).status, 404);
  assert.equal((await ts.request('GET', `/api/v1/deployments/${id}/previews/4`, { token: user.token })).status, 200);
  await page.close();
});
