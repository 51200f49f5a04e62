// The administrators' pages in Chromium (issue 26 item 7): Users (create, disable/enable) and All tunnels, at 390 px and by keyboard; hidden from non-admins.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { launchBrowser, openPage, signIn, type TestBrowser } from '../helpers/browser.js';
import { ADMIN_EMAIL, ADMIN_PASSWORD, loginAs, startTestServer, type TestServer } from '../helpers/server.js';

let ts: TestServer;
let browser: TestBrowser;

before(async () => {
  [ts, browser] = await Promise.all([startTestServer(), launchBrowser()]);
});
after(async () => {
  await browser?.close();
  await ts?.close();
});

test('an admin creates, disables and enables a user on the Users page at 390 px, by keyboard', async () => {
  const page = await browser.newPage();
  await page.setViewportSize({ width: 390, height: 844 });
  await openPage(page, `${ts.url}/`);
  await signIn(page, ADMIN_EMAIL, ADMIN_PASSWORD);
  // On a phone the pages are behind the Menu button (issue 33).
  await page.getByRole('button', { name: 'Menu' }).click();
  await page.getByRole('link', { name: 'Users', exact: true }).click();
  await page.getByRole('heading', { name: 'Users' }).waitFor();
  const email = `browser-admin-${process.pid}@test.local`;
  await page.locator('#new-user-email').focus();
  await page.keyboard.type(email);
  await page.keyboard.press('Tab');
  await page.keyboard.type('browser-password-1');
  await page.keyboard.press('Enter');
  const row = page.locator('#user-rows tr', { hasText: email });
  await row.waitFor();
  assert.equal(await loginAs(ts.url, email, 'browser-password-1').then(() => 'ok'), 'ok');
  await row.getByRole('button', { name: `Disable ${email}` }).focus();
  await page.keyboard.press('Enter');
  await row.getByRole('button', { name: `Enable ${email}` }).waitFor();
  assert.equal((await ts.request('POST', '/api/v1/auth/login', { body: { email, password: 'browser-password-1' } })).status, 401);
  await row.getByRole('button', { name: `Enable ${email}` }).click();
  await row.getByRole('button', { name: `Disable ${email}` }).waitFor();
  assert.equal((await ts.request('POST', '/api/v1/auth/login', { body: { email, password: 'browser-password-1' } })).status, 200);
  const overflow = await page.evaluate<boolean>('document.documentElement.scrollWidth > window.innerWidth + 1');
  assert.equal(overflow, false, 'no horizontal scrolling at 390 px');
  await page.getByRole('button', { name: 'Menu' }).click();
  await page.getByRole('link', { name: 'All tunnels', exact: true }).click();
  await page.getByRole('heading', { name: 'All tunnels' }).waitFor();
  await page.locator('#all-tunnels-empty').waitFor();
  assert.equal(await page.locator('#error').innerText(), '');
  await page.close();
});

test('a non-admin sees no admin links', async () => {
  const user = await ts.newUser('browser-plain');
  const page = await browser.newPage();
  await openPage(page, `${ts.url}/`);
  await signIn(page, user.email, user.password);
  await page.getByRole('link', { name: 'Tunnels', exact: true }).waitFor();
  assert.equal(await page.getByRole('link', { name: 'Users', exact: true }).isVisible(), false);
  assert.equal(await page.getByRole('link', { name: 'All tunnels', exact: true }).isVisible(), false);
  await page.close();
});
