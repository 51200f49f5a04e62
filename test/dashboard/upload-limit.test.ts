// Issue 33 item 4 in Debian's Chromium: a folder larger than the server's upload limit is refused in
// the browser, in MiB with what to do, before the app is created or a byte is sent (no "100 %").
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { tempDir } from '../helpers/apps.js';
import { launchBrowser, openPage, signIn, type TestBrowser } from '../helpers/browser.js';
import { writeBusyboxApp } from '../helpers/busybox-image.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

const MiB = 1024 * 1024;
let ts: TestServer;
let browser: TestBrowser;
let user: Awaited<ReturnType<TestServer['newUser']>>;
/** Upload requests the page made. */
const uploads: string[] = [];

before(async () => {
  [ts, browser] = await Promise.all([startTestServer({ SLIPWAY_MAX_UPLOAD_BYTES: String(MiB) }), launchBrowser()]);
  user = await ts.newUser('dash-limit');
  browser.context.on('request', (req) => {
    if (req.url().endsWith('/upload')) uploads.push(req.url());
  });
});
after(async () => {
  await browser?.close();
  await ts?.close();
});

test('New app with a folder of 3 MiB of random data: the limit in MiB and what to do; no app created, nothing uploaded', async () => {
  const dir = tempDir('dash-big');
  await writeBusyboxApp(dir);
  fs.writeFileSync(path.join(dir, 'data.bin'), randomBytes(3 * MiB));
  const page = await browser.newPage();
  await openPage(page, ts.url + '/');
  await signIn(page, user.email, user.password);
  await openPage(page, ts.url + '/#/new');
  await page.locator('#new-form input[name=name]').fill('too-big');
  await page.locator('#new-form select[name=source_type]').selectOption('archive');
  await page.locator('#new-form input[name=folder]').setInputFiles(dir);
  await page.getByRole('button', { name: 'Create and deploy' }).click();
  const error = page.locator('#error');
  await error.filter({ hasText: 'upload limit' }).waitFor();
  assert.match(
    await error.innerText(),
    /^The source is 3(\.0)? MiB packed, more than this server's upload limit of 1 MiB: leave files out with \.dockerignore \(dependencies, build output, data\), or ask the operator to raise SLIPWAY_MAX_UPLOAD_BYTES\. Nothing was created or uploaded\.$/,
  );
  assert.equal(await page.locator('#new-form progress').isHidden(), true, 'no progress bar');
  assert.doesNotMatch(await page.locator('#new-form [role=status]').innerText(), /%/);
  assert.deepEqual((await ts.request('GET', '/api/v1/deployments', { token: user.token })).json, []);
  assert.deepEqual(uploads, []);
  await page.close();
});
