// The app page in Chromium (issue 26): a variable added in the dashboard reaches the running app
// through the pending-changes bar; the page is split into tabs that work by keyboard and keep the
// choice in the URL; names and headers do not break mid-word in narrow columns; carriage returns in
// a log rewrite the line; the rollback dialog says which configuration comes back.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { Page } from 'playwright-core';
import { appRequest, busyboxScriptArchive, createArchiveApp, deployAndWait, eventually, testEngine } from '../helpers/apps.js';
import { launchBrowser, openPage, reloadPage, signIn, type TestBrowser } from '../helpers/browser.js';
import { ensureBusyboxImage } from '../helpers/busybox-image.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

let ts: TestServer;
let browser: TestBrowser;
let user: Awaited<ReturnType<TestServer['newUser']>>;
let app: { id: string; subdomain: string };

/** An app that writes its environment to /www/env at start and serves /www on $PORT. */
async function envApp(): Promise<Buffer> {
  return busyboxScriptArchive('env > /www/env; echo "listening on $PORT"; exec httpd -f -v -p "$PORT" -h /www', { index: 'env app\n' });
}

before(async () => {
  await ensureBusyboxImage(testEngine());
  [ts, browser] = await Promise.all([startTestServer(), launchBrowser()]);
  user = await ts.newUser('tabs');
  app = await createArchiveApp(ts, user.token, await envApp());
  // Two builds: the older one can be rolled back to.
  for (let i = 0; i < 2; i += 1) {
    const done = await deployAndWait(ts, user.token, app.id);
    assert.equal(done.json.status, 'succeeded', done.text);
  }
  await eventually(async () => ((await ts.request('GET', `/api/v1/deployments/${app.id}`, { token: user.token })).json.status === 'running' ? true : undefined), 60_000, 'running');
});
after(async () => {
  await browser?.close();
  await ts?.close();
});

async function logIn(page: Page, hash = ''): Promise<void> {
  await openPage(page, `${ts.url}/${hash}`);
  await signIn(page, user.email, user.password);
}

const containerEnv = async (): Promise<string> => {
  const res = await appRequest(ts.port, app.subdomain, { path: '/env' });
  return res.status === 200 ? res.body : '';
};

test('a variable added in the dashboard reaches the running app through the pending-changes bar', async () => {
  const page = await browser.newPage();
  await logIn(page, `#/d/${app.id}/settings`);
  const bar = page.locator('#pending-bar');
  assert.equal(await bar.isHidden(), true, 'nothing pending yet');
  const form = page.locator('#env-form');
  await form.locator('input[name=key]').fill('ADDED_IN_DASHBOARD');
  await form.locator('input[name=value]').fill('from-the-browser');
  await form.getByRole('button', { name: 'Add variable' }).click();
  await page.locator('#env-rows tr', { hasText: 'ADDED_IN_DASHBOARD' }).waitFor();
  await bar.waitFor();
  assert.match(await bar.innerText(), /still has the old one until it restarts/);
  assert.ok(!(await containerEnv()).includes('ADDED_IN_DASHBOARD'), 'not applied before the restart');
  // The bar stays in view on every tab, and after a reload.
  await page.getByRole('tab', { name: 'Overview' }).click();
  await bar.waitFor();
  await reloadPage(page);
  await bar.waitFor();
  await page.getByRole('button', { name: 'Restart to apply' }).click();
  await bar.waitFor({ state: 'hidden', timeout: 120_000 });
  await page.locator('#action-note:not(:empty)').waitFor();
  await eventually(async () => ((await containerEnv()).includes('ADDED_IN_DASHBOARD=from-the-browser') ? true : undefined), 60_000, 'the new variable in the container');
  await page.close();
});

test('the rollback dialog says the build comes back with the configuration it was last released with', async () => {
  const page = await browser.newPage();
  await logIn(page, `#/d/${app.id}/builds`);
  const builds = (await ts.request('GET', `/api/v1/deployments/${app.id}/builds`, { token: user.token })).json;
  const older = builds.at(-1);
  await page.locator('#build-rows tr', { hasText: String(older.id).slice(0, 8) }).getByRole('button', { name: /Roll back/ }).click();
  const dialog = page.getByRole('dialog');
  await dialog.waitFor();
  assert.match(await dialog.innerText(), /the configuration it was last released with/);
  await page.keyboard.press('Escape');
  await dialog.waitFor({ state: 'hidden' });
  assert.equal((await ts.request('GET', `/api/v1/deployments/${app.id}`, { token: user.token })).json.live_build_id, builds[0].id, 'Escape rolled nothing back');
  await page.close();
});

test('tabs: one panel at a time, arrow keys move between them, the URL keeps the choice', async () => {
  const page = await browser.newPage();
  await logIn(page, `#/d/${app.id}`);
  const tabs = page.getByRole('tab');
  await tabs.first().waitFor();
  assert.deepEqual(await tabs.allInnerTexts(), ['Overview', 'Builds', 'Logs', 'Metrics', 'Settings', 'Jobs', 'Domains']);
  assert.equal(await page.getByRole('tab', { name: 'Overview' }).getAttribute('aria-selected'), 'true');
  assert.equal(await page.locator('#panel-builds').isHidden(), true);
  // Keyboard only: Tab reaches the selected tab (one stop for the whole list), arrows move.
  await page.getByRole('tab', { name: 'Overview' }).focus();
  await page.keyboard.press('ArrowRight');
  assert.equal(await page.evaluate<string | null>('document.activeElement?.textContent'), 'Builds');
  await page.locator('#panel-builds #build-rows tr').first().waitFor();
  assert.match(page.url(), new RegExp(`#/d/${app.id}/builds$`));
  await page.keyboard.press('End');
  assert.equal(await page.evaluate<string | null>('document.activeElement?.textContent'), 'Domains');
  await page.locator('#domain-form').waitFor();
  await page.keyboard.press('ArrowRight');
  assert.equal(await page.evaluate<string | null>('document.activeElement?.textContent'), 'Overview', 'wraps around');
  await page.keyboard.press('ArrowLeft');
  await page.keyboard.press('Tab');
  assert.equal(await page.evaluate<string | null>('document.activeElement?.closest("[role=tabpanel]")?.id ?? null'), 'panel-domains', 'Tab leaves the list into the panel');
  await reloadPage(page);
  assert.equal(await page.getByRole('tab', { name: 'Domains' }).getAttribute('aria-selected'), 'true', 'a reload opens the same tab');
  await page.close();
});

test('names and headers do not break mid-word in narrow columns (390 px and 700 px)', async () => {
  await ts.request('PATCH', `/api/v1/deployments/${app.id}/env`, { token: user.token, body: { vars: { API_TOKEN: 'x' }, secret: true } });
  await ts.request('PATCH', `/api/v1/deployments/${app.id}/env`, { token: user.token, body: { vars: { DATABASE_CONNECTION_POOL_SIZE: '10' } } });
  const page = await browser.newPage();
  await logIn(page, `#/d/${app.id}/settings`);
  for (const width of [390, 700]) {
    await page.setViewportSize({ width, height: 900 });
    await page.locator('#env-rows tr', { hasText: 'DATABASE_CONNECTION_POOL_SIZE' }).waitFor();
    // A word on one line has one client rect per line box; a broken one has two.
    const broken = await page.evaluate<string[]>(`(() => {
      const out = [];
      for (const el of document.querySelectorAll('#env-rows code, th')) {
        if (el.offsetParent === null) continue;
        const range = document.createRange();
        range.selectNodeContents(el);
        const lines = new Set([...range.getClientRects()].filter((r) => r.width > 0).map((r) => Math.round(r.top)));
        if (lines.size > 1) out.push(el.textContent);
      }
      return out;
    })()`);
    assert.deepEqual(broken, [], `at ${width} px these break across lines`);
    assert.ok((await page.evaluate<number>('document.scrollingElement.scrollWidth')) <= width, `no horizontal scroll at ${width} px`);
  }
  await page.close();
});

/** What the dashboard's log view shows after `pieces` arrive one by one. */
async function terminalText(pieces: string[]): Promise<string> {
  const page = await browser.newPage();
  try {
    await openPage(page, `${ts.url}/`);
    return await page.evaluate<string>(`(async () => {
      const { terminal } = await import('/ui/terminal.js');
      const pre = document.createElement('pre');
      document.body.append(pre);
      const t = terminal(pre);
      for (const piece of ${JSON.stringify(pieces)}) t.append(piece);
      return pre.textContent;
    })()`);
  } finally {
    await page.close();
  }
}

test("an app's colour codes are not shown as text: the log reads plain, also when a code is split across pieces", async () => {
  const pieces = ['\u001b[32mINFO\u001b[0m listening\n', 'status \u001b[1;', '31mERROR\u001b', '[0m done\n', '\u001b]0;title\u0007plain [brackets] stay\n'];
  assert.equal(await terminalText(pieces), 'INFO listening\nstatus ERROR done\nplain [brackets] stay\n');
});

test('a carriage return in a log rewrites the line, as in a terminal, also when split across pieces', async () => {
  const pieces = ['Cloning…\nReceiving objects:  10%\rReceiving', ' objects:  55%\r', 'Receiving objects: 100%, done.\r', '\nResolving deltas: 100%\r\n', 'Step 2/4\n'];
  assert.equal(await terminalText(pieces), 'Cloning…\nReceiving objects: 100%, done.\nResolving deltas: 100%\nStep 2/4\n');
});
