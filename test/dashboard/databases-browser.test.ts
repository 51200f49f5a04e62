// The Databases page in a real browser: create a redis database, watch it run, reveal its credentials on demand, stop it and delete it.
import assert from 'node:assert/strict';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { launchBrowser, openPage, signIn, type TestBrowser } from '../helpers/browser.js';
import { STAND_IN_IMAGES } from '../helpers/databases.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

let ts: TestServer;
let browser: TestBrowser;
let user: Awaited<ReturnType<TestServer['newUser']>>;

before(async () => {
  ts = await startTestServer(STAND_IN_IMAGES);
  user = await ts.newUser('ui-db');
  browser = await launchBrowser();
});
after(async () => {
  await browser?.close();
  await ts?.close();
});

test('a database is created, runs, shows its credentials only when asked, stops and is deleted from the page', async () => {
  const page = await browser.newPage();
  await openPage(page, ts.url);
  await signIn(page, user.email, user.password);

  await page.getByRole('link', { name: 'Databases' }).click();
  await page.locator('#databases-empty').waitFor();
  await page.locator('#database-form input[name=name]').fill('sessions');
  await page.locator('#database-form select[name=engine]').selectOption('redis');
  await page.getByRole('button', { name: 'Create database' }).click();
  const row = page.locator('#database-rows tr', { hasText: 'sessions' });
  await row.locator('.badge', { hasText: 'running' }).waitFor({ timeout: 120_000 });

  await row.getByRole('button', { name: 'Details' }).click();
  const detail = page.locator('#database-detail');
  await detail.getByText('slipway db link sessions --app APP').waitFor();
  assert.match(await page.locator('#database-connect').innerText(), /^slipway db connect sessions\n[\s\S]*redis-cli -h 127\.0\.0\.1 -p 6379/, 'a connect command to copy');
  assert.equal(await page.locator('#database-credentials').isHidden(), true, 'hidden until asked');
  const [db] = (await ts.request('GET', '/api/v1/databases', { token: user.token })).json;
  const before = (await ts.request('GET', `/api/v1/audit?target_id=${db.id}`, { token: user.token })).json.length;
  await page.getByRole('button', { name: 'Reveal credentials' }).click();
  await page.locator('#database-credentials', { hasText: 'redis://default:' }).waitFor();
  const after = (await ts.request('GET', `/api/v1/audit?target_id=${db.id}`, { token: user.token })).json;
  assert.equal(after.length, before + 1);
  assert.equal(after[0].action, 'database.credentials.read');

  for (const width of [1280, 390]) {
    await page.setViewportSize({ width, height: 900 });
    assert.ok((await page.evaluate<number>('document.scrollingElement.scrollWidth')) <= width, `the Databases page fits ${width} px`);
    await page.screenshot({ path: path.join(os.tmpdir(), `slipway-databases-${width}.png`), fullPage: true });
  }
  await detail.getByRole('button', { name: 'Stop' }).click();
  await row.locator('.badge', { hasText: 'stopped' }).waitFor({ timeout: 60_000 });
  await detail.getByRole('button', { name: 'Delete' }).click();
  await page.locator('#confirm-ok').click();
  await page.locator('#databases-empty').waitFor({ timeout: 60_000 });
  assert.deepEqual((await ts.request('GET', '/api/v1/databases', { token: user.token })).json, []);
});
