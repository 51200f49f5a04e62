// The dashboard end to end in Debian's Chromium against a real server and engine: log in by keyboard,
// create apps (folder upload packed in the browser, tar.gz upload, git form), watch the build log
// stream, act on an app through confirmation dialogs with buttons that follow the state table, edit
// the environment (secrets masked), add a domain, see changes made through the API without a reload,
// manage API keys, and check 390 px, CSP, console errors and that no request leaves the host.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { Page } from 'playwright-core';
import { busyboxArchive, eventually, tempDir } from '../helpers/apps.js';
import { launchBrowser, openPage, signIn, type TestBrowser } from '../helpers/browser.js';
import { ensureBusyboxImage, writeBusyboxApp } from '../helpers/busybox-image.js';
import { startGitServer, type GitServer } from '../helpers/git-server.js';
import { testEngine } from '../helpers/apps.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

let ts: TestServer;
let git: GitServer;
let browser: TestBrowser;
let user: Awaited<ReturnType<TestServer['newUser']>>;
const shots = fs.mkdtempSync(path.join(os.tmpdir(), 'slipway-dashboard-shots-'));
/** Every URL any page asked for, and every console error or uncaught exception. */
const requested: string[] = [];
const problems: string[] = [];

before(async () => {
  await ensureBusyboxImage(testEngine());
  [ts, git, browser] = await Promise.all([startTestServer(), startGitServer(), launchBrowser()]);
  user = await ts.newUser('dash');
  browser.context.on('request', (req) => requested.push(req.url()));
  browser.context.on('console', (msg) => {
    // A failed API call (a 409 or 404 the page shows as a message) is logged by Chromium as a
    // resource error; script errors and CSP violations are what must not happen.
    // A request Chromium dropped because the engine changed the host's interfaces (the page
    // retries its reads, openPage reloads) is the machine's doing, not the page's.
    if (msg.type() === 'error' && !/^Failed to load resource: (the server responded with a status of (4\d\d)|net::ERR_NETWORK_CHANGED)/.test(msg.text())) problems.push(msg.text());
  });
  browser.context.on('weberror', (err) => problems.push(String(err.error())));
  process.stdout.write(`# screenshots of each page: ${shots}\n`);
});
after(async () => {
  await browser?.close();
  await git?.close();
  await ts?.close();
});

async function shot(page: Page, name: string): Promise<void> {
  await page.screenshot({ path: path.join(shots, `${name}.png`), fullPage: true });
}

async function logIn(page: Page): Promise<void> {
  await openPage(page, ts.url + '/');
  await signIn(page, user.email, user.password);
}

async function statusOf(id: string): Promise<string> {
  return (await ts.request('GET', `/api/v1/deployments/${id}`, { token: user.token })).json.status;
}

/** The deployment id of the page on screen (`#/d/<id>`). */
async function pageDeploymentId(page: Page): Promise<string> {
  await page.waitForURL(/#\/d\/[0-9a-f-]{36}(\/[a-z-]+)?$/);
  return /#\/d\/([0-9a-f-]{36})/.exec(page.url())![1]!;
}

async function waitForBadge(page: Page, status: string, timeout = 90_000): Promise<void> {
  await page.locator('#status .badge', { hasText: new RegExp(`^${status}$`) }).waitFor({ timeout });
}

describe('dashboard', () => {
  let folderAppId: string;

  test('log in and move between pages with the keyboard alone; focus is visible', async () => {
    const page = await browser.newPage();
    await openPage(page, ts.url + '/');
    await page.locator('#login-form input[name=email]').waitFor();
    // Tab from the top of the page: the skip link first, then the login form.
    await page.keyboard.press('Tab');
    assert.equal(await page.evaluate<string | null>('document.activeElement?.textContent'), 'Skip to content');
    await page.keyboard.press('Tab');
    assert.equal(await page.evaluate<string | null>('document.activeElement?.textContent'), 'Slipway');
    await page.keyboard.press('Tab');
    assert.equal(await page.evaluate<string>('document.activeElement.name'), 'email');
    const outline = await page.evaluate<string>('getComputedStyle(document.activeElement).outlineStyle');
    assert.notEqual(outline, 'none', 'the focused field shows a focus ring');
    await page.keyboard.type(user.email);
    await page.keyboard.press('Tab');
    await page.keyboard.type(user.password);
    await page.keyboard.press('Enter');
    await page.locator('#who', { hasText: user.email }).waitFor();
    await page.locator('#apps h1').waitFor();
    // Through the navigation by Tab to "API keys", then Enter.
    for (let i = 0; i < 10; i += 1) {
      await page.keyboard.press('Tab');
      if ((await page.evaluate<string | null>('document.activeElement?.textContent')) === 'API keys') break;
    }
    assert.equal(await page.evaluate<string | null>('document.activeElement?.textContent'), 'API keys');
    await page.keyboard.press('Enter');
    await page.locator('#keys h1').waitFor();
    assert.equal(await page.evaluate<string | null>('document.activeElement?.textContent'), 'API keys', 'focus moves to the new page heading');
    await page.close();
  });

  test('an API error is shown with the API message', async () => {
    const page = await browser.newPage();
    await logIn(page);
    await openPage(page, ts.url + '/#/new');
    await page.locator('#new-form input[name=name]').fill('Reserved');
    await page.locator('#new-form input[name=subdomain]').fill('admin');
    await page.locator('#new-form input[name=repo_url]').fill(`${git.url}/none.git`);
    await page.getByRole('button', { name: 'Create and deploy' }).click();
    const direct = await ts.request('POST', '/api/v1/deployments', { token: user.token, body: { name: 'x', subdomain: 'admin', repo_url: `${git.url}/none.git` } });
    assert.equal(direct.status, 400);
    await page.locator('#error', { hasText: direct.json.message }).waitFor();
    await page.close();
  });

  test('create from a folder: packed in the browser (.dockerignore honoured), uploaded with progress, build log streams live', async () => {
    const dir = tempDir('dash-folder');
    await writeBusyboxApp(dir, { body: 'folder app\n' });
    // The build fails if the ignored file arrives, and takes a few seconds between two lines so the
    // page is seen streaming while the build runs. The lines are printed with printf so the step
    // headings ("Step 4/8 : RUN ... printf 'step-%s\n' one") never contain the output itself: the
    // next step's heading is on the page as soon as the first step ends.
    const dockerfile = fs.readFileSync(path.join(dir, 'Dockerfile'), 'utf8').split('\n');
    // A step unique to this run first: the engine's build cache (an earlier run on this machine)
    // would otherwise skip the sleep and print both steps at once.
    dockerfile.splice(1, 0, `RUN echo run-${crypto.randomUUID()}`, 'COPY . /src', 'RUN test ! -e /src/ignored/big.bin && test -e /src/lib/deep/kept.txt && printf \'step-%s\\n\' one', 'RUN sleep 4 && printf \'step-%s\\n\' two');
    fs.writeFileSync(path.join(dir, 'Dockerfile'), dockerfile.join('\n'));
    fs.mkdirSync(path.join(dir, 'ignored'));
    fs.writeFileSync(path.join(dir, 'ignored', 'big.bin'), 'x'.repeat(1000));
    fs.mkdirSync(path.join(dir, 'lib', 'deep'), { recursive: true });
    fs.writeFileSync(path.join(dir, 'lib', 'deep', 'kept.txt'), 'kept');
    fs.writeFileSync(path.join(dir, '.dockerignore'), '# test\nignored\n');

    const page = await browser.newPage();
    await logIn(page);
    await page.getByRole('link', { name: 'New app' }).first().click();
    await page.locator('#new-form input[name=name]').fill('Folder App');
    assert.equal(await page.locator('#new-form input[name=subdomain]').inputValue(), 'folder-app', 'subdomain suggested from the name');
    const subdomain = `folder-${process.pid}`;
    await page.locator('#new-form input[name=subdomain]').fill(subdomain);
    await page.locator('#new-form select[name=source_type]').selectOption('archive');
    await page.locator('#new-form input[name=folder]').setInputFiles(dir);
    await shot(page, 'new-app');
    await page.getByRole('button', { name: 'Create and deploy' }).click();
    folderAppId = await pageDeploymentId(page);
    // The build log streams while the build runs: step-one is on the page before the build ends.
    await page.locator('#build-log', { hasText: 'step-one' }).waitFor({ timeout: 60_000 });
    const builds = (await ts.request('GET', `/api/v1/deployments/${folderAppId}/builds`, { token: user.token })).json;
    assert.equal(builds.length, 1);
    const whileShown = (await ts.request('GET', `/api/v1/deployments/${folderAppId}/builds/${builds[0].id}`, { token: user.token })).json.status;
    assert.equal(whileShown, 'building', 'the line was shown while the build was still running');
    assert.ok(!(await page.locator('#build-log').innerText()).includes('step-two'), 'the next step has not run yet');
    await page.locator('#build-log', { hasText: 'step-two' }).waitFor({ timeout: 60_000 });
    await waitForBadge(page, 'running');
    assert.equal(await statusOf(folderAppId), 'running');
    // The live metrics appear once it runs.
    await page.getByRole('tab', { name: 'Metrics' }).click();
    await page.locator('#metric-memory', { hasText: ' of ' }).waitFor({ timeout: 30_000 });
    await shot(page, 'deployment-running');
    await page.close();
  });

  test('the build log sticks to the bottom like a terminal unless scrolled up', async () => {
    const page = await browser.newPage();
    await logIn(page);
    await openPage(page, `${ts.url}/#/d/${folderAppId}/builds`);
    const log = page.locator('#build-log');
    await log.filter({ hasText: 'step-two' }).waitFor();
    const atBottom = () => log.evaluate((el) => el.scrollHeight - el.scrollTop - el.clientHeight < 24);
    // A log longer than the box ends scrolled to its bottom.
    if (await log.evaluate((el) => el.scrollHeight > el.clientHeight)) assert.equal(await atBottom(), true);
    // Under the log: the Dockerfile the build used (the folder's own here, so nothing was detected).
    await page.locator('#build-dockerfile-section summary', { hasText: 'Dockerfile (Dockerfile, from the source)' }).waitFor();
    assert.match((await page.locator('#build-dockerfile').textContent()) ?? '', /^FROM /m);
    assert.equal(await page.locator('#build-detection li').count(), 0);
    await page.close();
  });

  test('lifecycle: buttons follow the state table; Stop needs a confirmation (Escape cancels, Enter confirms)', async () => {
    const page = await browser.newPage();
    await logIn(page);
    await openPage(page, `${ts.url}/#/d/${folderAppId}`);
    await waitForBadge(page, 'running');
    const button = (name: string) => page.locator('#actions').getByRole('button', { name, exact: true });
    assert.equal(await button('Stop').isEnabled(), true);
    assert.equal(await button('Restart').isEnabled(), true);
    assert.equal(await button('Cancel build').isDisabled(), true, 'nothing builds: no cancel');
    await button('Stop').click();
    const dialog = page.getByRole('dialog');
    await dialog.waitFor();
    await shot(page, 'confirm-dialog');
    await page.keyboard.press('Escape');
    await dialog.waitFor({ state: 'hidden' });
    assert.equal(await statusOf(folderAppId), 'running', 'Escape changed nothing');
    await button('Stop').click();
    await dialog.waitFor();
    await page.keyboard.press('Enter');
    await waitForBadge(page, 'stopped', 30_000);
    assert.equal(await statusOf(folderAppId), 'stopped');
    assert.equal(await button('Stop').isDisabled(), true, 'stopping a stopped app does nothing: disabled');
    assert.equal(await button('Restart').isEnabled(), true);
    await page.locator('#action-note', { hasText: 'stopped' }).waitFor();
    await page.close();
  });

  test('a status change and a build made through the API show up without a reload', async () => {
    const page = await browser.newPage();
    await logIn(page);
    const row = page.locator('#app-rows tr', { hasText: 'Folder App' });
    await row.locator('.badge', { hasText: 'stopped' }).waitFor();
    const restarted = await ts.request('POST', `/api/v1/deployments/${folderAppId}/restart`, { token: user.token });
    assert.equal(restarted.status, 200, restarted.text);
    await row.locator('.badge', { hasText: 'running' }).waitFor({ timeout: 15_000 });
    await row.getByRole('link', { name: 'Folder App' }).click();
    await waitForBadge(page, 'running');
    await page.getByRole('tab', { name: 'Builds' }).click();
    await page.locator('#build-rows tr').first().waitFor();
    const count = await page.locator('#build-rows tr').count();
    // A deploy started elsewhere (the CLI): the new build appears and its log streams here.
    const started = await ts.request('POST', `/api/v1/deployments/${folderAppId}/deploy`, { token: user.token });
    assert.equal(started.status, 202, started.text);
    await page.locator('#build-rows tr').nth(count).waitFor({ timeout: 15_000 });
    await page.locator('#log-title', { hasText: String(started.json.id).slice(0, 8) }).waitFor({ timeout: 15_000 });
    // Every step of this build comes from the engine's cache, so no step prints: its headings do.
    await page.locator('#build-log', { hasText: "printf 'step-%s" }).waitFor({ timeout: 60_000 });
    await waitForBadge(page, 'running', 90_000);
    await eventually(async () => ((await statusOf(folderAppId)) === 'running' ? true : undefined), 60_000, 'running');
    await page.close();
  });

  test('roll back to the first build, confirmed in the dialog', async () => {
    const page = await browser.newPage();
    await logIn(page);
    await openPage(page, `${ts.url}/#/d/${folderAppId}/builds`);
    await waitForBadge(page, 'running');
    const builds = (await ts.request('GET', `/api/v1/deployments/${folderAppId}/builds`, { token: user.token })).json;
    const first = builds.at(-1);
    const live = page.locator('#build-rows tr', { hasText: String(builds[0].id).slice(0, 8) });
    assert.equal(await live.getByRole('button', { name: /Roll back/ }).isDisabled(), true, 'the live, running build cannot be rolled back to');
    await page.locator('#build-rows tr', { hasText: String(first.id).slice(0, 8) }).getByRole('button', { name: /Roll back/ }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Roll back' }).click();
    await page.locator('#action-note', { hasText: String(first.id).slice(0, 8) }).waitFor({ timeout: 60_000 });
    const dep = (await ts.request('GET', `/api/v1/deployments/${folderAppId}`, { token: user.token })).json;
    assert.equal(dep.live_build_id, first.id);
    await page.close();
  });

  test('environment: add a variable and a secret (masked afterwards), edit in place', async () => {
    const page = await browser.newPage();
    await logIn(page);
    await openPage(page, `${ts.url}/#/d/${folderAppId}/settings`);
    const form = page.locator('#env-form');
    await form.locator('input[name=key]').fill('GREETING');
    await form.locator('input[name=value]').fill('hello');
    await form.getByRole('button', { name: 'Add variable' }).click();
    await page.locator('#env-rows tr', { hasText: 'GREETING' }).locator('code.value', { hasText: 'hello' }).waitFor();
    const secretValue = `s3cret-${process.pid}`;
    await form.locator('input[name=key]').fill('API_TOKEN');
    await form.locator('input[name=value]').fill(secretValue);
    await form.locator('input[name=secret]').check();
    await form.getByRole('button', { name: 'Add variable' }).click();
    const secretRow = page.locator('#env-rows tr', { hasText: 'API_TOKEN' });
    await secretRow.locator('.masked').waitFor();
    assert.ok(!(await page.content()).includes(secretValue), 'the secret is nowhere in the page');
    // Edit in place: Enter saves.
    await page.locator('#env-rows tr', { hasText: 'GREETING' }).getByRole('button', { name: 'Edit GREETING' }).click();
    const input = page.locator('#env-rows input[name=edit-value]');
    await input.fill('bonjour');
    await input.press('Enter');
    await page.locator('#env-rows tr', { hasText: 'GREETING' }).locator('code.value', { hasText: 'bonjour' }).waitFor();
    const env = (await ts.request('GET', `/api/v1/deployments/${folderAppId}/env`, { token: user.token })).json;
    assert.deepEqual(env.vars.map((v: { key: string; value: string | null; secret: boolean }) => [v.key, v.value, v.secret]), [['API_TOKEN', null, true], ['GREETING', 'bonjour', false]]);
    await shot(page, 'deployment-env');
    await page.close();
  });

  test('domains: add one, shown with its TLS status; volumes: add one', async () => {
    const page = await browser.newPage();
    await logIn(page);
    await openPage(page, `${ts.url}/#/d/${folderAppId}/domains`);
    const hostname = `shop-${process.pid}.example.com`;
    await page.locator('#domain-form input[name=hostname]').fill(hostname);
    await page.locator('#domain-form').getByRole('button', { name: 'Add domain' }).click();
    const row = page.locator('#domain-rows tr', { hasText: hostname });
    await row.locator('.badge').waitFor();
    const domains = (await ts.request('GET', `/api/v1/deployments/${folderAppId}/domains`, { token: user.token })).json;
    assert.equal(domains[0].hostname, hostname);
    assert.equal(await row.locator('.badge').innerText(), domains[0].tls_status === 'none' ? 'no HTTPS' : domains[0].tls_status);
    await page.getByRole('tab', { name: 'Settings' }).click();
    await page.locator('#volume-form input[name=name]').fill('data');
    await page.locator('#volume-form input[name=mount_path]').fill('/data');
    await page.locator('#volume-form').getByRole('button', { name: 'Add volume' }).click();
    await page.locator('#volume-rows tr', { hasText: '/data' }).waitFor();
    const dep = (await ts.request('GET', `/api/v1/deployments/${folderAppId}`, { token: user.token })).json;
    assert.deepEqual(dep.volumes, [{ name: 'data', mount_path: '/data' }]);
    await page.close();
  });

  test('create from a .tar.gz file with upload progress', async () => {
    const { archive } = await busyboxArchive({ body: 'tarball app\n' });
    const file = path.join(tempDir('dash-tgz'), 'app.tar.gz');
    fs.writeFileSync(file, archive);
    const page = await browser.newPage();
    await logIn(page);
    await openPage(page, ts.url + '/#/new');
    await page.locator('#new-form input[name=name]').fill(`tgz-${process.pid}`);
    await page.locator('#new-form select[name=source_type]').selectOption('archive');
    await page.locator('#new-form input[name=archive]').setInputFiles(file);
    await page.getByRole('button', { name: 'Create and deploy' }).click();
    const id = await pageDeploymentId(page);
    await waitForBadge(page, 'running');
    const builds = (await ts.request('GET', `/api/v1/deployments/${id}/builds`, { token: user.token })).json;
    assert.equal(builds[0].status, 'succeeded');
    await page.close();
  });

  test('create from a git repository with the form; deploy on push set up from the page', async () => {
    const appDir = tempDir('dash-git');
    await writeBusyboxApp(appDir, { body: 'git app\n' });
    const files = Object.fromEntries(fs.readdirSync(appDir).map((f) => [f, fs.readFileSync(path.join(appDir, f), 'utf8')]));
    const repo = await git.createRepo(`dash-${process.pid}`, files);
    const page = await browser.newPage();
    await logIn(page);
    await openPage(page, ts.url + '/#/new');
    await page.locator('#new-form input[name=name]').fill(`git-${process.pid}`);
    await page.locator('#new-form input[name=repo_url]').fill(repo.url);
    await page.getByRole('button', { name: 'Create and deploy' }).click();
    const id = await pageDeploymentId(page);
    await waitForBadge(page, 'running');
    const builds = (await ts.request('GET', `/api/v1/deployments/${id}/builds`, { token: user.token })).json;
    assert.equal(builds[0].commit_sha, repo.sha);
    // Deploy on push, set up from the page: auto-deploy on, a webhook secret shown once.
    await page.getByRole('tab', { name: 'Settings' }).click();
    await page.locator('#auto-deploy').check();
    await eventually(async () => ((await ts.request('GET', `/api/v1/deployments/${id}`, { token: user.token })).json.auto_deploy === true ? true : undefined), 10_000, 'auto_deploy on');
    await page.locator('#webhook').getByRole('button', { name: 'Create webhook' }).click();
    const secret = await page.locator('#webhook-secret').innerText();
    await page.locator('#webhook-url', { hasText: `/api/v1/hooks/${id}` }).waitFor();
    await page.locator('#webhook').getByRole('button', { name: 'Rotate secret' }).waitFor();
    // A signed push of a new commit: the delivery and its build show up on the page.
    const pushed = await git.commit(`dash-${process.pid}`, { 'index.html': 'git app v2\n' });
    const body = Buffer.from(JSON.stringify({ ref: 'refs/heads/main', before: repo.sha, after: pushed, repository: { full_name: 'o/r' } }));
    const delivered = await fetch(`${ts.url}/api/v1/hooks/${id}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-github-event': 'push', 'x-github-delivery': crypto.randomUUID(), 'x-hub-signature-256': `sha256=${crypto.createHmac('sha256', secret).update(body).digest('hex')}` },
      body,
    });
    assert.equal(delivered.status, 202, await delivered.text());
    await page.locator('#delivery-rows tr', { hasText: 'deployed' }).waitFor({ timeout: 15_000 });
    await page.getByRole('tab', { name: 'Builds' }).click();
    await page.locator('#build-rows tr', { hasText: pushed.slice(0, 12) }).waitFor({ timeout: 15_000 });
    await waitForBadge(page, 'running');
    await shot(page, 'deployment-git');
    await page.close();
  });

  test('API keys: create (shown once, copy button), revoke; password change; log out', async () => {
    const page = await browser.newPage();
    await logIn(page);
    await openPage(page, ts.url + '/#/keys');
    await page.locator('#key-form input[name=name]').fill('dash-key');
    await page.getByRole('button', { name: 'Create key' }).click();
    const secret = await page.locator('#new-key-value').innerText();
    assert.match(secret, /^slw_k1_\w{32,}$/);
    await page.locator('#new-key').getByRole('button', { name: 'Copy' }).waitFor();
    assert.equal((await ts.request('GET', '/api/v1/users/me', { token: secret })).status, 200);
    await shot(page, 'keys');
    await page.locator('#key-rows tr', { hasText: 'dash-key' }).getByRole('button', { name: 'Revoke dash-key' }).click();
    await page.locator('#key-rows tr', { hasText: 'dash-key' }).waitFor({ state: 'detached' });
    assert.equal((await ts.request('GET', '/api/v1/users/me', { token: secret })).status, 401);

    await page.getByRole('link', { name: 'Account' }).click();
    await page.locator('#password-form input[name=current_password]').fill('wrong-password');
    await page.locator('#password-form input[name=new_password]').fill('another-password-1');
    await page.locator('#password-form input[name=again]').fill('another-password-1');
    await page.getByRole('button', { name: 'Change password' }).click();
    await page.locator('#error:not(:empty)').waitFor();
    await page.locator('#password-form input[name=current_password]').fill(user.password);
    await page.locator('#password-form input[name=new_password]').fill('another-password-1');
    await page.locator('#password-form input[name=again]').fill('another-password-1');
    await page.getByRole('button', { name: 'Change password' }).click();
    await page.locator('#password-form .note', { hasText: 'Password updated' }).waitFor();
    user.password = 'another-password-1';
    await shot(page, 'account');
    await page.getByRole('button', { name: 'Log out' }).click();
    await page.locator('#login').waitFor({ state: 'visible' });
    assert.equal(await page.locator('#view').innerText(), '');
    await page.close();
  });

  test('at 390 px wide no page overflows horizontally', async () => {
    const page = await browser.newPage();
    await page.setViewportSize({ width: 390, height: 844 });
    await logIn(page);
    for (const [name, hash, ready] of [
      ['list', '#/', '#app-rows tr'],
      ['new', '#/new', '#new-form'],
      ['deployment', `#/d/${folderAppId}/settings`, '#env-rows tr'],
      ['keys', '#/keys', '#key-rows tr'],
      ['account', '#/account', '#password-form'],
    ] as const) {
      await openPage(page, `${ts.url}/${hash}`);
      await page.locator(ready).first().waitFor();
      await page.waitForTimeout(300); // let the first poll render
      const width = await page.evaluate<number>('document.scrollingElement.scrollWidth');
      await shot(page, `390-${name}`);
      assert.ok(width <= 390, `${name} is ${width} px wide at 390 px`);
    }
    await page.close();
  });

  test('text on every page meets WCAG AA contrast (4.5:1, 3:1 for large text)', async () => {
    const page = await browser.newPage();
    await logIn(page);
    // For each element with its own text: its colour against the first opaque background behind it.
    const audit = `(() => {
      const rgb = (c) => (c.match(/[\\d.]+/g) || []).map(Number);
      const lum = ([r, g, b]) => { const f = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; }; return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b); };
      const bad = [];
      for (const el of document.querySelectorAll('body *')) {
        if (![...el.childNodes].some((n) => n.nodeType === 3 && n.textContent.trim() !== '')) continue;
        const style = getComputedStyle(el);
        if (style.visibility === 'hidden' || el.offsetParent === null && style.position !== 'fixed') continue;
        if (el.closest('.skip') && el.getBoundingClientRect().left < 0) continue;
        let bg = null;
        for (let e = el; e; e = e.parentElement) { const c = rgb(getComputedStyle(e).backgroundColor); if (c.length === 3 || (c.length === 4 && c[3] > 0.99)) { bg = c; break; } }
        bg = bg || [255, 255, 255];
        const fg = rgb(style.color);
        const [a, b] = [lum(fg), lum(bg)].sort((x, y) => y - x);
        const ratio = (a + 0.05) / (b + 0.05);
        const size = parseFloat(style.fontSize);
        const large = size >= 24 || (size >= 18.66 && Number(style.fontWeight) >= 700);
        if (ratio < (large ? 3 : 4.5)) bad.push(el.tagName + '.' + el.className + ' "' + el.textContent.trim().slice(0, 30) + '" ' + ratio.toFixed(2));
      }
      return bad;
    })()`;
    for (const hash of ['#/', '#/new', `#/d/${folderAppId}`, '#/keys', '#/account']) {
      await openPage(page, `${ts.url}/${hash}`);
      await page.locator('#view h1').waitFor();
      await page.waitForTimeout(500);
      assert.deepEqual(await page.evaluate<string[]>(audit), [], hash);
    }
    // The audit catches pale text (grey #999 on white is 2.85:1).
    await page.evaluate("const p = document.createElement('p'); p.textContent = 'pale words'; p.style.color = '#999'; document.querySelector('#view section').append(p);");
    assert.equal((await page.evaluate<string[]>(audit)).filter((line) => line.includes('pale words')).length, 1);
    await page.close();
  });

  test('no request left the host, and no page logged an error or CSP violation', () => {
    const origin = new URL(ts.url).origin;
    assert.ok(requested.length > 20, 'requests were recorded');
    const foreign = requested.filter((url) => new URL(url).origin !== origin);
    assert.deepEqual(foreign, []);
    assert.deepEqual(problems, []);
  });
});
