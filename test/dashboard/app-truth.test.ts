// The dashboard's small truths (issue 33 item 12) in Chromium: a failed app's reason with its build log; "Deploy upload" with nothing uploaded; the pending
// pill; the New app form's rule and stale errors; the phone header and the app tabs.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { Page } from 'playwright-core';
import { busyboxArchive, createArchiveApp, deployAndWait, eventually, testEngine, uniqueSubdomain } from '../helpers/apps.js';
import { launchBrowser, openPage, signIn, type TestBrowser } from '../helpers/browser.js';
import { ensureBusyboxImage } from '../helpers/busybox-image.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

let ts: TestServer;
let browser: TestBrowser;
let user: Awaited<ReturnType<TestServer['newUser']>>;
let running: { id: string; subdomain: string };

before(async () => {
  await ensureBusyboxImage(testEngine());
  [ts, browser] = await Promise.all([startTestServer(), launchBrowser()]);
  user = await ts.newUser('truth');
  running = await createArchiveApp(ts, user.token, (await busyboxArchive()).archive);
  assert.equal((await deployAndWait(ts, user.token, running.id)).status, 200);
});
after(async () => {
  await browser?.close();
  await ts?.close();
});

async function open(page: Page, hash: string): Promise<void> {
  await openPage(page, `${ts.url}/${hash}`);
  await signIn(page, user.email, user.password);
}

test('a failed app: the Overview says why, and links the failed build log', async () => {
  const app = await createArchiveApp(ts, user.token, (await busyboxArchive({ exitAtOnce: true })).archive);
  assert.equal((await deployAndWait(ts, user.token, app.id)).status, 500);
  const [build] = (await ts.request('GET', `/api/v1/deployments/${app.id}/builds`, { token: user.token })).json as Array<{ id: string; error: string }>;
  assert.ok(build);
  const page = await browser.newPage();
  await open(page, `#/d/${app.id}`);
  const failure = page.locator('#overview-failure');
  await failure.waitFor();
  const reason = build.error.trim().split('\n').filter(Boolean).pop() ?? '';
  assert.equal(await failure.locator('.failure-line').innerText(), reason.slice(0, 300));
  assert.match(reason, /exit/);
  await failure.getByRole('button', { name: `Build log of ${build.id.slice(0, 8)}` }).click();
  assert.equal(await page.getByRole('tab', { name: 'Builds' }).getAttribute('aria-selected'), 'true');
  await page.locator('#log-title', { hasText: build.id.slice(0, 8) }).waitFor();
  await page.locator('#build-log', { hasText: 'exiting at once' }).waitFor();
  await page.close();
});

test('nothing uploaded: "Deploy upload" is disabled and says why; the pending pill is a pill like the others', async () => {
  const subdomain = uniqueSubdomain('empty');
  const created = await ts.request('POST', '/api/v1/deployments', { token: user.token, body: { name: subdomain, subdomain, source_type: 'archive' } });
  assert.equal(created.status, 201, created.text);
  const page = await browser.newPage();
  await open(page, `#/d/${created.json.id}`);
  const deploy = page.getByRole('button', { name: 'Deploy upload' });
  await page.locator('#detail-title', { hasText: subdomain }).waitFor();
  await eventually(async () => ((await deploy.isDisabled()) ? true : undefined), 10_000, 'Deploy upload disabled');
  assert.equal(await deploy.getAttribute('title'), 'Nothing uploaded yet: upload a folder or .tar.gz on the Builds tab first.');

  await openPage(page, `${ts.url}/#/`);
  const pending = page.locator(`#app-rows tr[data-id="${created.json.id}"] .badge.pending`);
  const runningPill = page.locator(`#app-rows tr[data-id="${running.id}"] .badge.running`);
  await pending.waitFor();
  const [a, b] = [await pending.boundingBox(), await runningPill.boundingBox()];
  assert.ok(a && b);
  assert.ok(Math.abs(a.height - b.height) <= 1, `pending ${a.height} px high, running ${b.height} px`);
  assert.ok(a.width < 120, `a pill, not a box: ${a.width} px wide`);
  assert.equal(await page.evaluate<string>(`getComputedStyle(document.querySelector('#app-rows tr[data-id="${created.json.id}"] .badge.pending')).borderRadius`), '999px');
  await page.close();
});

test('New app: a bad subdomain gets the rule, not the browser\'s pattern message; a server error goes once the form is changed', async () => {
  const page = await browser.newPage();
  await open(page, '#/new');
  await page.locator('#new-form input[name=name]').fill('Form test');
  const subdomain = page.locator('#new-form input[name=subdomain]');
  await subdomain.fill('bad_name!');
  await page.getByRole('button', { name: 'Create and deploy' }).click();
  assert.equal(
    await page.evaluate<string>(`document.querySelector('#new-form input[name=subdomain]').validationMessage`),
    'A subdomain is 1 to 63 letters, digits and dashes, and starts and ends with a letter or digit (e.g. my-app-2).',
  );
  assert.equal(await page.locator('#error').innerText(), '', 'nothing was sent');
  // A subdomain already taken: the server says so; editing the form clears it.
  await subdomain.fill(running.subdomain);
  await page.locator('#new-form input[name=repo_url]').fill('https://example.invalid/app.git');
  await page.locator('#new-form select[name=source_type]').selectOption('archive');
  await page.locator('#new-form input[name=archive]').setInputFiles({ name: 'app.tar.gz', mimeType: 'application/gzip', buffer: (await busyboxArchive()).archive });
  await page.getByRole('button', { name: 'Create and deploy' }).click();
  await page.locator('#error', { hasText: `subdomain "${running.subdomain}" is already in use` }).waitFor();
  await subdomain.fill(`${running.subdomain}-2`);
  assert.equal(await page.locator('#error').innerText(), '');
  await page.close();
});

test('on a phone (390 × 844) the header is one line with a Menu button, and the app tabs scroll sideways with a fade on the side that has more', async () => {
  const page = await browser.newPage();
  await page.setViewportSize({ width: 390, height: 844 });
  await open(page, `#/d/${running.id}`);
  const header = page.locator('header.top');
  const height = async (): Promise<number> => (await header.boundingBox())?.height ?? 9999;
  assert.ok((await height()) <= 56, `the header is ${await height()} px high`);
  assert.equal(await page.getByRole('link', { name: 'API keys' }).isVisible(), false);
  const menu = page.getByRole('button', { name: 'Menu' });
  await menu.click();
  assert.equal(await menu.getAttribute('aria-expanded'), 'true');
  await page.getByRole('link', { name: 'API keys' }).click();
  await page.locator('#key-form').waitFor();
  assert.equal(await menu.getAttribute('aria-expanded'), 'false', 'choosing a page closes the menu');
  assert.ok((await height()) <= 56);

  await openPage(page, `${ts.url}/#/d/${running.id}`);
  const strip = page.locator('.tabs-strip');
  const tabs = page.getByRole('tablist');
  await page.getByRole('tab', { name: 'Overview' }).waitFor();
  const sizes = await tabs.evaluate((el) => [el.scrollWidth, el.clientWidth]);
  assert.ok(sizes[0]! > sizes[1]!, `the tabs run past the edge (${sizes.join(' > ')})`);
  await eventually(async () => ((await strip.getAttribute('class')) === 'tabs-strip more-right' ? true : undefined), 5_000, 'a fade on the right only');
  // The last tab chosen by keyboard scrolls into view; the fade moves to the left.
  await page.getByRole('tab', { name: 'Overview' }).focus();
  await page.keyboard.press('End');
  const last = page.getByRole('tab', { name: 'Domains' });
  await eventually(async () => ((await strip.getAttribute('class')) === 'tabs-strip more-left' ? true : undefined), 5_000, 'a fade on the left only');
  const [box, area] = [await last.boundingBox(), await tabs.boundingBox()];
  assert.ok(box && area && box.x + box.width <= area.x + area.width + 1, 'the chosen tab is in view');
  assert.ok((await page.evaluate<number>('document.scrollingElement.scrollWidth')) <= 390, 'the page itself does not scroll sideways');
  // A tab opened from its URL is brought into the middle, clear of the fades.
  await openPage(page, `${ts.url}/#/d/${running.id}/settings`);
  const settings = page.getByRole('tab', { name: 'Settings' });
  await eventually(async () => {
    const [tab, strip] = [await settings.boundingBox(), await tabs.boundingBox()];
    return tab && strip && tab.x >= strip.x + 20 && tab.x + tab.width <= strip.x + strip.width - 20 ? true : undefined;
  }, 5_000, 'the Settings tab in view');
  await page.close();
});
