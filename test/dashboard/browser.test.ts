// The dashboard in a real browser: a new API key's secret is shown once and does not outlive the
// key, the session, or the page (issue 17: the next person on the same tab must not see it); a
// build in flight can be cancelled (after a confirmation).
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { Page } from 'playwright-core';
import Dockerode from 'dockerode';
import { buildNetworkName } from '../../src/runtime/engine.js';
import { busyboxArchive, createArchiveApp, eventually } from '../helpers/apps.js';
import { launchBrowser, openPage, signIn, type TestBrowser } from '../helpers/browser.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

let ts: TestServer;
let browser: TestBrowser;
let alice: Awaited<ReturnType<TestServer['newUser']>>;
let bob: Awaited<ReturnType<TestServer['newUser']>>;

before(async () => {
  ts = await startTestServer();
  alice = await ts.newUser('alice');
  bob = await ts.newUser('bob');
  browser = await launchBrowser();
});
after(async () => {
  await browser?.close();
  await ts?.close();
});

async function logIn(page: Page, email: string, password: string): Promise<void> {
  await signIn(page, email, password);
}

/** Creates a key named `name` on the keys page; returns the secret the page shows. */
async function createKey(page: Page, name: string): Promise<string> {
  await page.getByRole('link', { name: 'API keys' }).click();
  await page.locator('#key-form input[name=name]').fill(name);
  await page.getByRole('button', { name: 'Create key' }).click();
  const shown = page.locator('#new-key');
  await shown.waitFor({ state: 'visible' });
  assert.match(await shown.innerText(), /^New key \(shown once\):/);
  const secret = await page.locator('#new-key-value').innerText();
  assert.match(secret, /^slw_k1_\w+$/, 'the page shows the new key');
  await page.locator('#key-rows tr', { hasText: name }).waitFor();
  return secret;
}

async function assertSecretGone(page: Page, secret: string): Promise<void> {
  const box = page.locator('#new-key');
  if ((await box.count()) > 0) {
    assert.equal(await box.isHidden(), true, 'the new-key box is hidden');
    assert.equal(await box.textContent(), '');
  }
  const html = await page.content();
  assert.ok(!html.includes(secret), 'the secret is nowhere in the page');
}

test('the new key secret is cleared when the key is revoked', async () => {
  const page = await browser.newPage();
  await openPage(page, ts.url + '/');
  await logIn(page, alice.email, alice.password);
  const secret = await createKey(page, 'revoked-at-once');
  await page.locator('#key-rows tr', { hasText: 'revoked-at-once' }).getByRole('button', { name: 'Revoke' }).click();
  await page.locator('#key-rows tr', { hasText: 'revoked-at-once' }).waitFor({ state: 'detached' });
  await assertSecretGone(page, secret);
  // The key is really revoked on the server.
  assert.equal((await ts.request('GET', '/api/v1/users/me', { token: secret })).status, 401);
  await page.close();
});

test('after logout the next person on the same tab sees neither the secret nor the previous user\'s data', async () => {
  const page = await browser.newPage();
  await openPage(page, ts.url + '/');
  await logIn(page, alice.email, alice.password);
  const secret = await createKey(page, 'left-behind');
  await page.getByRole('button', { name: 'Log out' }).click();
  await page.locator('#login').waitFor({ state: 'visible' });
  await assertSecretGone(page, secret);
  assert.equal(await page.locator('#key-rows tr').count(), 0, 'alice\'s keys are not left in the page');

  await logIn(page, bob.email, bob.password);
  await page.locator('#view h1').waitFor();
  await page.getByRole('link', { name: 'API keys' }).click();
  await page.locator('#key-rows tr').first().waitFor();
  await assertSecretGone(page, secret);
  assert.equal(await page.locator('#key-rows tr', { hasText: 'left-behind' }).count(), 0);
  assert.ok(!(await page.locator('body').innerText()).includes(secret));
  await page.getByRole('button', { name: 'Log out' }).click();
  await page.close();
});

test('leaving the page and coming back with Back does not bring the secret back', async () => {
  const page = await browser.newPage();
  await openPage(page, ts.url + '/');
  await logIn(page, alice.email, alice.password);
  const secret = await createKey(page, 'navigated-away');
  await page.evaluate("addEventListener('pageshow', (event) => { document.body.dataset.restored = String(event.persisted); })");
  await page.goto(ts.url + '/api/v1/openapi.json');
  await page.goBack({ waitUntil: 'commit' });
  await page.locator('#who', { hasText: alice.email }).waitFor();
  // The browser kept the page (back/forward cache) rather than loading it again: the case where the
  // secret could survive.
  assert.equal(await page.evaluate('document.body.dataset.restored'), 'true');
  await assertSecretGone(page, secret);
  await page.close();
});

test('opening an app\'s page clears the secret', async () => {
  const created = await ts.request('POST', '/api/v1/deployments', {
    token: alice.token,
    body: { name: 'shown-app', subdomain: 'shown-app', source_type: 'archive' },
  });
  assert.equal(created.status, 201, created.text);
  const page = await browser.newPage();
  await openPage(page, ts.url + '/');
  await logIn(page, alice.email, alice.password);
  const secret = await createKey(page, 'then-builds');
  await page.getByRole('link', { name: 'Apps', exact: true }).click();
  await page.locator('#app-rows tr', { hasText: 'shown-app' }).getByRole('link', { name: 'shown-app', exact: true }).click();
  await page.locator('#detail-title', { hasText: 'shown-app' }).waitFor();
  await assertSecretGone(page, secret);
  await page.close();
});

test('a build in flight can be cancelled from the dashboard after a confirmation; the page says so', async () => {
  const { archive } = await busyboxArchive({ extraDockerfile: 'RUN echo slow-step && sleep 120' });
  const app = await createArchiveApp(ts, alice.token, archive);
  const started = await ts.request('POST', `/api/v1/deployments/${app.id}/deploy`, { token: alice.token });
  assert.equal(started.status, 202, started.text);
  const page = await browser.newPage();
  await openPage(page, ts.url + '/');
  await logIn(page, alice.email, alice.password);
  await page.locator('#app-rows tr', { hasText: app.subdomain }).getByRole('link').first().click();
  const cancel = page.locator('#actions').getByRole('button', { name: 'Cancel build' });
  await page.locator('#status .badge', { hasText: 'building' }).waitFor();
  assert.equal(await cancel.isEnabled(), true);
  assert.equal(await page.locator('#actions').getByRole('button', { name: 'Restart' }).isDisabled(), true, 'nothing to restart while the first build runs');
  await cancel.click();
  await page.getByRole('dialog').getByRole('button', { name: 'Cancel build' }).click();
  await page.locator('#action-note', { hasText: `build ${String(started.json.id).slice(0, 8)} of ${app.subdomain} cancelled` }).waitFor();
  await page.locator('#status .badge', { hasText: 'stopped' }).waitFor();
  await page.getByRole('tab', { name: 'Builds' }).click();
  await page.locator('#build-rows tr').first().locator('.badge', { hasText: 'cancelled' }).waitFor();
  assert.equal(await cancel.isDisabled(), true, 'no cancel once nothing builds');
  // The engine removes the cancelled RUN step's container on its own time; the network can only be
  // removed (after()) once it has.
  const network = new Dockerode().getNetwork(buildNetworkName(ts.server.instanceId));
  await eventually(async () => (Object.keys((await network.inspect()).Containers ?? {}).length === 0 ? true : undefined), 60_000, 'the build container gone');
  const build = await ts.request('GET', `/api/v1/deployments/${app.id}/builds/${started.json.id}`, { token: alice.token });
  assert.equal(build.json.status, 'cancelled');
  await page.close();
});
