// Sessions across tabs in Chromium (issue 26 item 8): a login by keyboard in one tab is the login of
// every new tab (an HttpOnly cookie the page's script cannot read); changes work through the CSRF
// token a new tab fetches; logging out in one tab logs out all of them at once.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { launchBrowser, openPage, type TestBrowser } from '../helpers/browser.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

let ts: TestServer;
let browser: TestBrowser;
let user: Awaited<ReturnType<TestServer['newUser']>>;

before(async () => {
  [ts, browser] = await Promise.all([startTestServer(), launchBrowser()]);
  user = await ts.newUser('tabs-session');
});
after(async () => {
  await browser?.close();
  await ts?.close();
});

test('one login (by keyboard, at 390 px) serves every tab; logout in one tab logs out all', async () => {
  const first = await browser.newPage();
  await first.setViewportSize({ width: 390, height: 844 });
  await openPage(first, `${ts.url}/`);
  await first.locator('#login-form input[name=email]').focus();
  await first.keyboard.type(user.email);
  await first.keyboard.press('Tab');
  await first.keyboard.type(user.password);
  await first.keyboard.press('Enter');
  await first.locator('#who', { hasText: user.email }).waitFor();
  assert.equal(await first.evaluate<string>('document.cookie'), '', 'the session cookie is HttpOnly: no script reads it');
  const stored = await first.evaluate<string>('JSON.stringify([Object.entries(sessionStorage), Object.entries(localStorage)])');
  assert.doesNotMatch(stored, /slw_/, 'no session token kept in web storage');

  // A new tab is signed in without the form, and can make changes (its CSRF token comes from the server).
  const second = await browser.newPage();
  await openPage(second, `${ts.url}/#/keys`);
  await second.locator('#who', { hasText: user.email }).waitFor();
  assert.equal(await second.locator('#login').isHidden(), true);
  await second.locator('#key-form input[name=name]').fill('made-in-tab-two');
  await second.getByRole('button', { name: 'Create key' }).click();
  await second.locator('#key-rows tr', { hasText: 'made-in-tab-two' }).waitFor();
  const keys = await ts.request('GET', '/api/v1/api-keys', { token: user.token });
  assert.ok(keys.json.some((k: { name: string }) => k.name === 'made-in-tab-two'));

  // A change without the token (what another site could make the browser send) is refused.
  const forged = await second.evaluate<number>(`fetch('/api/v1/api-keys', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ name: 'forged' }) }).then((r) => r.status)`);
  assert.equal(forged, 403);

  // Logging out in the first tab logs the second out at once, leaving nothing of the user's on it.
  await first.getByRole('button', { name: 'Log out' }).click();
  await first.locator('#login').waitFor({ state: 'visible' });
  await second.locator('#login').waitFor({ state: 'visible' });
  assert.equal(await second.locator('#view').innerText(), '');
  assert.equal(await second.locator('#who').innerText(), '');
  const third = await browser.newPage();
  await openPage(third, `${ts.url}/`);
  await third.locator('#login').waitFor({ state: 'visible' });
  assert.equal((await browser.context.cookies(ts.url)).filter((c) => c.name.includes('slipway_session')).length, 0, 'the cookie is gone');

  // Logging in again in one tab signs the others in too.
  await third.locator('#login-form input[name=email]').fill(user.email);
  await third.locator('#login-form input[name=password]').fill(user.password);
  await third.getByRole('button', { name: 'Log in' }).click();
  await first.locator('#who', { hasText: user.email }).waitFor();
  const [cookie] = (await browser.context.cookies(ts.url)).filter((c) => c.name.includes('slipway_session'));
  assert.equal(cookie?.httpOnly, true);
  assert.equal(cookie?.sameSite, 'Strict');
  await third.getByRole('button', { name: 'Log out' }).click();
  await Promise.all([first, second, third].map((p) => p.locator('#login').waitFor({ state: 'visible' })));
  await Promise.all([first.close(), second.close(), third.close()]);
});
