// Backups on the Databases page in a real browser: a destination added and tested, a database's schedule, "back up now" to verified, the download, a restore confirmed by a dialog that names what is replaced.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { launchBrowser, openPage, signIn, type TestBrowser } from '../helpers/browser.js';
import { STAND_IN_IMAGES, databaseContainer, runIn, waitForStatus } from '../helpers/databases.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

let ts: TestServer;
let browser: TestBrowser;
let user: Awaited<ReturnType<TestServer['newUser']>>;
let dbId: string;

before(async () => {
  // Chromium starts while the server starts and the database comes up.
  const launched = launchBrowser();
  launched.catch(() => undefined);
  ts = await startTestServer(STAND_IN_IMAGES);
  user = await ts.newUser('ui-backups');
  dbId = (await ts.request('POST', '/api/v1/databases', { token: user.token, body: { name: 'cache', engine: 'redis' } })).json.id;
  const [started, status] = await Promise.allSettled([launched, waitForStatus(ts, user.token, dbId)]);
  if (started.status === 'fulfilled') browser = started.value;
  if (started.status === 'rejected') throw started.reason;
  if (status.status === 'rejected') throw status.reason;
  assert.equal(status.value.status, 'running');
});
after(async () => {
  await browser?.close();
  await ts?.close();
});

test('destination, schedule, back up now, download and restore from the page', async () => {
  const password = (await ts.request('GET', `/api/v1/databases/${dbId}/credentials`, { token: user.token })).json.password as string;
  const redis = async (...args: string[]) => runIn((await databaseContainer(dbId))!.Id, ['redis-cli', '--no-auth-warning', ...args], { REDISCLI_AUTH: password });
  await redis('mset', 'a', '1', 'b', '2');

  const page = await browser.newPage();
  await openPage(page, ts.url);
  await signIn(page, user.email, user.password);
  await page.getByRole('link', { name: 'Databases' }).click();

  // A destination on this server, tested.
  await page.locator('#destinations-empty').waitFor();
  await page.locator('#destination-form input[name=name]').fill('here');
  await page.locator('#destination-form select[name=type]').selectOption('local');
  assert.equal(await page.locator('#destination-form input[name=bucket]').isHidden(), true, 'the S3 fields are hidden for a local destination');
  await page.getByRole('button', { name: 'Add destination' }).click();
  const destinationRow = page.locator('#destination-rows tr', { hasText: 'here' });
  await destinationRow.getByRole('button', { name: 'Test' }).click();
  await page.locator('#destination-status', { hasText: 'here works' }).waitFor();

  // The database's schedule.
  const row = page.locator('#database-rows tr', { hasText: 'cache' });
  await row.getByRole('button', { name: 'Details' }).click();
  await page.locator('#schedule-now', { hasText: 'No schedule' }).waitFor();
  await page.locator('#schedule-cron').fill('0 3 * * *');
  await page.locator('#schedule-destination').selectOption({ label: 'here' });
  await page.locator('#schedule-keep').fill('3');
  await page.getByRole('button', { name: 'Save schedule' }).click();
  await page.locator('#schedule-now', { hasText: 'Backed up 0 3 * * * (UTC) into here, keeping 3 verified backups' }).waitFor();
  assert.deepEqual((await ts.request('GET', `/api/v1/databases/${dbId}`, { token: user.token })).json.backup.keep, 3);

  // Back up now, until it is verified; its download is the decrypted RDB file.
  await page.getByRole('button', { name: 'Back up now' }).click();
  const backupRow = page.locator('#backup-rows tr').first();
  await backupRow.locator('.badge', { hasText: 'verified' }).waitFor({ timeout: 120_000 });
  const href = await backupRow.getByRole('link', { name: 'Download' }).getAttribute('href');
  const download = await page.request.get(new URL(href!, ts.url).href);
  assert.equal(download.status(), 200);
  assert.equal((await download.body()).subarray(0, 5).toString(), 'REDIS', 'the download is the RDB file, decrypted');

  // Restore in place: the dialog names the database whose data is replaced; cancelling changes nothing.
  await redis('set', 'c', '3');
  await backupRow.getByRole('button', { name: 'Restore' }).click();
  await page.locator('#confirm-body', { hasText: 'ALL the data of database cache is replaced with its backup of' }).waitFor();
  assert.match((await page.locator('#confirm-ok').textContent()) ?? '', /Replace cache's data/);
  await page.keyboard.press('Escape');
  await page.getByRole('button', { name: 'Restore' }).first().click();
  await page.locator('#confirm-ok').click();
  await page.locator('#restore-status', { hasText: 'Restored the backup of' }).waitFor({ timeout: 120_000 });
  assert.deepEqual((await redis('keys', '*')).split('\n').map((k) => k.trim()).filter(Boolean).sort(), ['a', 'b']);

  // A destination that a schedule uses is not deleted: the page shows the API's message naming the database.
  await destinationRow.getByRole('button', { name: 'Delete' }).click();
  await page.locator('#confirm-ok').click();
  await page.locator('#error', { hasText: 'cache' }).waitFor();
  for (const width of [1280, 390]) {
    await page.setViewportSize({ width, height: 900 });
    assert.ok((await page.evaluate<number>('document.scrollingElement.scrollWidth')) <= width, `the page with backups fits ${width} px`);
  }
});
