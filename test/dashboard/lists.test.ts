// The dashboard in a real browser follows the API's `next` links: a list longer than one page is shown whole.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { launchBrowser, openPage, type TestBrowser } from '../helpers/browser.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

let ts: TestServer;
let browser: TestBrowser;

before(async () => {
  ts = await startTestServer();
  browser = await launchBrowser();
});
after(async () => {
  await browser?.close();
  await ts?.close();
});

test('apps and keys past the first page (100) are all listed, once each', async () => {
  const user = await ts.newUser('dashlists');
  for (let i = 0; i < 101; i += 1) {
    const res = await ts.request('POST', '/api/v1/api-keys', { token: user.token, body: { name: `key-${String(i).padStart(3, '0')}` } });
    assert.equal(res.status, 201, res.text);
  }
  for (let i = 0; i < 102; i += 1) {
    const subdomain = `dl-${process.pid}-${i}`;
    const res = await ts.request('POST', '/api/v1/deployments', { token: user.token, body: { name: `app-${String(i).padStart(3, '0')}`, subdomain, source_type: 'archive' } });
    assert.equal(res.status, 201, res.text);
  }
  const page = await browser.newPage();
  await openPage(page, ts.url + '/');
  await page.locator('#login-form input[name=email]').fill(user.email);
  await page.locator('#login-form input[name=password]').fill(user.password);
  await page.getByRole('button', { name: 'Log in' }).click();
  // The oldest of each list is only on the second page.
  await page.locator('#app-rows tr', { hasText: 'app-000' }).waitFor({ timeout: 30_000 });
  assert.equal(await page.locator('#app-rows tr').count(), 102);
  const names = await page.locator('#app-rows tr td:first-child').allInnerTexts();
  assert.equal(new Set(names).size, 102, 'no app twice');
  assert.equal(names[0], 'app-101', 'newest first');
  await page.getByRole('link', { name: 'API keys' }).click();
  await page.locator('#key-rows tr', { hasText: 'key-000' }).waitFor({ timeout: 30_000 });
  assert.equal(await page.locator('#key-rows tr').count(), 102, "101 keys and newUser()'s");
  await page.close();
});
