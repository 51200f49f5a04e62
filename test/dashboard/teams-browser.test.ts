// The dashboard in a real browser (issue 28): a team set up with members and roles, the team switcher,
// the audit log page with filters, and two-factor setup from a QR code drawn in the page, then a login with a code.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { Page } from 'playwright-core';
import jsqr from 'jsqr';
import { launchBrowser, openPage, reloadPage, type TestBrowser } from '../helpers/browser.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { base32Decode, hotp, stepAt } from '../../src/domain/totp.js';

let ts: TestServer;
let browser: TestBrowser;
let owner: Awaited<ReturnType<TestServer['newUser']>>;
let dev: Awaited<ReturnType<TestServer['newUser']>>;
const requests: string[] = [];
/** jsQR's default export (a CommonJS module: its type is seen as the namespace). */
const jsQR = jsqr as unknown as (data: Uint8ClampedArray, width: number, height: number) => { data: string } | null;

before(async () => {
  [ts, browser] = await Promise.all([startTestServer(), launchBrowser()]);
  owner = await ts.newUser('ui-owner');
  dev = await ts.newUser('ui-dev');
});
after(async () => {
  await browser?.close();
  await ts?.close();
});

async function open(): Promise<Page> {
  const page = await browser.newPage();
  page.on('request', (request) => requests.push(request.url()));
  await openPage(page, ts.url);
  return page;
}

async function logIn(page: Page, email: string, password: string): Promise<void> {
  await page.locator('#login-form input[name=email]').fill(email);
  await page.locator('#login-form input[name=password]').fill(password);
  await page.getByRole('button', { name: 'Log in' }).click();
  await page.locator('#who', { hasText: email }).waitFor();
}

/** Reads the QR code the page drew (its SVG path of dark modules) and decodes it. */
async function decodeQr(page: Page): Promise<string> {
  const svg = page.locator('svg.qr');
  await svg.waitFor();
  const { d, n } = await svg.evaluate((el) => ({ d: el.querySelector('path')?.getAttribute('d') ?? '', n: Number(el.getAttribute('data-modules')) }));
  const scale = 4;
  const size = (n + 8) * scale;
  const pixels = new Uint8ClampedArray(size * size * 4).fill(255);
  for (const m of d.matchAll(/M(\d+) (\d+)h1v1h-1z/g)) {
    const [x, y] = [Number(m[1]), Number(m[2])];
    for (let dy = 0; dy < scale; dy += 1) {
      for (let dx = 0; dx < scale; dx += 1) {
        const i = ((y * scale + dy) * size + (x * scale + dx)) * 4;
        pixels[i] = pixels[i + 1] = pixels[i + 2] = 0;
      }
    }
  }
  const found = jsQR(pixels, size, size);
  assert.ok(found !== null, 'the QR code does not decode');
  return found.data;
}

test('an owner sets up a team: members and roles, a team app in the switcher, the audit log filtered by team', async () => {
  const page = await open();
  await logIn(page, owner.email, owner.password);
  await page.getByRole('link', { name: 'Teams' }).click();
  await page.locator('#team-form input[name=name]').fill('acme');
  await page.getByRole('button', { name: 'Create team' }).click();
  await page.getByRole('heading', { name: 'Team acme' }).waitFor();
  await page.locator('#member-form input[name=email]').fill(dev.email);
  await page.locator('#member-form select[name=role]').selectOption('developer');
  await page.getByRole('button', { name: 'Add member' }).click();
  const row = page.locator('#member-rows tr', { hasText: dev.email });
  await row.waitFor();
  assert.equal(await row.getByRole('combobox').inputValue(), 'developer');
  await row.getByRole('combobox').selectOption('viewer');
  const team = (await ts.request('GET', '/api/v1/teams', { token: owner.token })).json[0];
  await waitFor(async () => (await ts.request('GET', `/api/v1/teams/${team.id}/members`, { token: owner.token })).json.some((m: { role: string }) => m.role === 'viewer'));
  // The API's message shows when a change is refused: the last owner cannot step down.
  await page.locator('#member-rows tr', { hasText: owner.email }).getByRole('combobox').selectOption('viewer');
  await page.locator('#error', { hasText: 'last owner' }).waitFor();

  // The switcher: one team's apps, personal ones, or all.
  const mine = await ts.request('POST', '/api/v1/deployments', { token: owner.token, body: { name: 'mine', subdomain: `ui-mine-${process.pid}`, source_type: 'archive' } });
  const theirs = await ts.request('POST', '/api/v1/deployments', { token: owner.token, body: { name: 'team app', subdomain: `ui-team-${process.pid}`, source_type: 'archive', team_id: team.id } });
  assert.equal(theirs.status, 201, theirs.text);
  await reloadPage(page);
  await page.locator('#team-switch option', { hasText: 'acme (owner)' }).waitFor({ state: 'attached' });
  await page.getByRole('link', { name: 'Apps' }).click();
  await page.locator(`#app-rows tr[data-id="${mine.json.id}"]`).waitFor();
  await page.locator('#team-switch').selectOption(team.id);
  await page.locator(`#app-rows tr[data-id="${theirs.json.id}"]`).waitFor();
  await page.locator(`#app-rows tr[data-id="${mine.json.id}"]`).waitFor({ state: 'detached' });
  await page.locator('#team-switch').selectOption('personal');
  await page.locator(`#app-rows tr[data-id="${theirs.json.id}"]`).waitFor({ state: 'detached' });
  await page.locator('#team-switch').selectOption('');

  await page.getByRole('link', { name: 'Audit log' }).click();
  await page.locator('#audit-rows tr[data-action="deployment.create"]').first().waitFor();
  await page.locator('#audit-team').selectOption(team.id);
  await page.getByRole('button', { name: 'Filter' }).click();
  await page.locator('#audit-rows tr[data-action="team.member.add"]').waitFor();
  await waitFor(async () => (await page.locator('#audit-rows tr').evaluateAll((rows) => rows.map((r) => r.getAttribute('data-action') ?? undefined))).every((a) => a !== undefined) &&
    (await page.locator('#audit-rows tr[data-action="deployment.create"]').count()) === 1);
  // The session is the browser's (a cookie shared by its tabs): end it for the next test.
  await page.getByRole('button', { name: 'Log out' }).click();
  await page.locator('#login-form input[name=email]').waitFor();
  await page.close();
});

test('two-factor setup from the QR code, then login asks for the code', async () => {
  const page = await open();
  await logIn(page, dev.email, dev.password);
  await page.getByRole('link', { name: 'Account' }).click();
  await page.getByRole('button', { name: 'Set up two-factor login' }).click();
  const url = await decodeQr(page);
  const secret = await page.locator('#twofa-secret').innerText();
  assert.match(url, new RegExp(`^otpauth://totp/.*\\?secret=${secret}&`), 'the QR code is the otpauth URL of the secret shown');
  const key = base32Decode(secret);
  const now = stepAt(Date.now());
  await page.locator('#twofa input[name=code]').fill(hotp(key, now - 1));
  await page.getByRole('button', { name: 'Turn on' }).click();
  await page.locator('#twofa-state', { hasText: 'Two-factor login is on' }).waitFor();

  await page.getByRole('button', { name: 'Log out' }).click();
  await page.locator('#login-form input[name=email]').fill(dev.email);
  await page.locator('#login-form input[name=password]').fill(dev.password);
  await page.getByRole('button', { name: 'Log in' }).click();
  await page.locator('#error', { hasText: 'two-factor code' }).waitFor();
  await page.locator('#otp-label').waitFor();
  // The form keeps what was typed; the code is added.
  await page.locator('#login-form input[name=password]').fill(dev.password);
  await page.locator('#login-form input[name=otp]').fill(hotp(key, now));
  await page.getByRole('button', { name: 'Log in' }).click();
  await page.locator('#who', { hasText: dev.email }).waitFor();
  assert.equal(await page.locator('#otp-label').isHidden(), true);
  const origin = new URL(ts.url).origin;
  assert.deepEqual(requests.filter((u) => !u.startsWith(origin) && !u.startsWith('data:')), [], 'no request leaves the host');
  await page.close();
});

async function waitFor(check: () => Promise<boolean>, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}
