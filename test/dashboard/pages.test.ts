// Discoverability in Chromium (issue 26 item 7): the API reference page drawn from the OpenAPI
// document and linked from the dashboard; the Tunnels page; the API keys page's empty state; and a
// screenshot of every page at 1280 and 390 px, written to a folder this suite prints.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import type { Page } from 'playwright-core';
import { busyboxArchive, createArchiveApp, deployAndWait, testEngine } from '../helpers/apps.js';
import { launchBrowser, openPage, signIn, type TestBrowser } from '../helpers/browser.js';
import { ensureBusyboxImage } from '../helpers/busybox-image.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { runTunnelClient } from '../../src/tunnel/tunnel-client.js';

let ts: TestServer;
let browser: TestBrowser;
let user: Awaited<ReturnType<TestServer['newUser']>>;
let app: { id: string; subdomain: string };
const shots = fs.mkdtempSync(path.join(os.tmpdir(), 'slipway-pages-'));
const requested: string[] = [];

before(async () => {
  await ensureBusyboxImage(testEngine());
  [ts, browser] = await Promise.all([startTestServer({ SLIPWAY_METRICS_INTERVAL_SECONDS: '2' }), launchBrowser()]);
  browser.context.on('request', (req) => requested.push(req.url()));
  user = await ts.newUser('pages');
  app = await createArchiveApp(ts, user.token, (await busyboxArchive()).archive);
  const done = await deployAndWait(ts, user.token, app.id);
  assert.equal(done.json.status, 'succeeded', done.text);
  process.stdout.write(`# screenshots of every page at 1280 and 390 px: ${shots}\n`);
});
after(async () => {
  await browser?.close();
  await ts?.close();
});

test('the API reference page is drawn from the OpenAPI document, linked from the dashboard, usable by keyboard', async () => {
  const page = await browser.newPage();
  await openPage(page, `${ts.url}/`);
  await signIn(page, user.email, user.password);
  await page.getByRole('link', { name: 'API', exact: true }).click();
  await page.waitForURL(`${ts.url}/reference`);
  await page.locator('html[data-ready]').waitFor({ state: 'attached' });
  await page.getByRole('heading', { name: 'API reference' }).waitFor();
  const doc = (await ts.request('GET', '/api/v1/openapi.json')).json;
  const operations = Object.values(doc.paths as Record<string, Record<string, unknown>>).flatMap((item) => Object.keys(item).filter((k) => ['get', 'post', 'put', 'patch', 'delete'].includes(k)));
  assert.equal(await page.locator('section.op').count(), operations.length, 'one section per operation');
  const create = page.locator('section.op', { has: page.locator('h3', { hasText: /^POST\s+\/api\/v1\/deployments$/ }) });
  assert.match(await create.innerText(), /Body \(application\/json\)[\s\S]*name: string/);
  assert.equal(await page.locator('#error').innerText(), '');
  const served = await ts.request('GET', '/reference');
  assert.match(served.headers.get('content-security-policy') ?? '', /default-src 'self'/);
  // Keyboard: Tab from the top reaches the sections' links; Enter jumps to one.
  for (let i = 0; i < 12; i += 1) {
    await page.keyboard.press('Tab');
    if ((await page.evaluate<string | null>('document.activeElement?.closest("#reference-toc") ? document.activeElement.textContent : null')) !== null) break;
  }
  const tag = await page.evaluate<string>('document.activeElement.textContent');
  await page.keyboard.press('Enter');
  await page.waitForURL(new RegExp(`#tag-${tag}$`));
  const origin = new URL(ts.url).origin;
  assert.deepEqual(requested.filter((u) => !u.startsWith(origin) && !u.startsWith('data:')), []);
  await page.close();
});

test('the API keys page explains what a key is for when there is none; the Tunnels page lists live tunnels', async () => {
  const fresh = await ts.newUser('pages-fresh');
  for (const key of (await ts.request('GET', '/api/v1/api-keys', { token: fresh.token })).json) {
    await ts.request('DELETE', `/api/v1/api-keys/${key.id}`, { token: fresh.token });
  }
  const page = await browser.newPage();
  await openPage(page, `${ts.url}/#/keys`);
  await signIn(page, fresh.email, fresh.password);
  const empty = page.locator('#key-rows .empty');
  await empty.waitFor();
  assert.match(await empty.innerText(), /No API keys yet[\s\S]*slipway login --url .* --api-key/);

  await openPage(page, `${ts.url}/#/tunnels`);
  await page.locator('#tunnels-empty').waitFor();
  assert.match(await page.locator('#tunnels-empty').innerText(), /slipway tunnel 3000/);
  // A live tunnel of this user appears, with its name, URL and state.
  const key = (await ts.request('POST', '/api/v1/api-keys', { token: fresh.token, body: { name: 'tunnel' } })).json.key as string;
  const controller = new AbortController();
  const connected = new Promise<void>((resolve) => {
    void runTunnelClient({ serverUrl: ts.url, apiKey: key, port: 9, subdomain: `pg-${process.pid}`, signal: controller.signal, onEvent: (e) => { if (e.type === 'connected') resolve(); } }).catch(() => undefined);
  });
  try {
    await connected;
    const row = page.locator('#tunnel-rows tr', { hasText: `pg-${process.pid}` });
    await row.waitFor();
    assert.match(await row.innerText(), /connected/);
    await shot(page, 'tunnels', 1280);
  } finally {
    controller.abort();
  }
  await page.getByRole('button', { name: 'Log out' }).click();
  await page.locator('#login').waitFor({ state: 'visible' });
  await page.close();
});

async function shot(page: Page, name: string, width: number): Promise<void> {
  await page.screenshot({ path: path.join(shots, `${width}-${name}.png`), fullPage: true });
}

test('a screenshot of every page at 1280 and 390 px, none wider than the window', async () => {
  const page = await browser.newPage();
  const pages: Array<[string, string, string]> = [
    ['apps', '#/', '#app-rows tr'],
    ['new-app', '#/new', '#new-form'],
    ...['overview', 'builds', 'logs', 'metrics', 'settings', 'domains'].map((tab): [string, string, string] => [`app-${tab}`, `#/d/${app.id}/${tab}`, `#panel-${tab} section`]),
    ['keys', '#/keys', '#key-rows tr'],
    ['tunnels', '#/tunnels', '#tunnels h1'],
    ['account', '#/account', '#password-form'],
  ];
  for (const width of [1280, 390]) {
    await page.setViewportSize({ width, height: 900 });
    await openPage(page, `${ts.url}/`);
    if (await page.locator('#logout').isVisible()) {
      await page.locator('#logout').click();
      await page.locator('#login').waitFor({ state: 'visible' });
    }
    await shot(page, 'login', width);
    await signIn(page, user.email, user.password);
    for (const [name, hash, ready] of pages) {
      await openPage(page, `${ts.url}/${hash}`);
      await page.locator(ready).first().waitFor();
      // Measured before the full-page screenshot, which resizes the page while it captures it.
      assert.ok((await page.evaluate<number>('document.scrollingElement.scrollWidth')) <= width, `${name} fits ${width} px`);
      await shot(page, name, width);
    }
    await openPage(page, `${ts.url}/reference`);
    await page.locator('section.op').first().waitFor();
    assert.ok((await page.evaluate<number>('document.scrollingElement.scrollWidth')) <= width, `the API reference fits ${width} px`);
    await shot(page, 'api-reference', width);
  }
  const files = fs.readdirSync(shots);
  for (const width of [1280, 390]) {
    for (const name of ['login', ...pages.map((p) => p[0]), 'api-reference']) assert.ok(files.includes(`${width}-${name}.png`), `${width}-${name}.png`);
  }
  await page.close();
});
