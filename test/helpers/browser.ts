// A real browser for dashboard tests: Debian's Chromium (/usr/bin/chromium, installed by `npm test`)
// driven by playwright-core, headless, with a fresh profile. It never downloads a browser: when
// Chromium cannot start, the test fails.
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { chromium, type BrowserContext, type Page } from 'playwright-core';

export const CHROMIUM = '/usr/bin/chromium';

const ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

export interface TestBrowser {
  readonly context: BrowserContext;
  newPage(): Promise<Page>;
  close(): Promise<void>;
}

/** Starts Chromium with a fresh user-data directory (removed again by close()). */
export async function launchBrowser(): Promise<TestBrowser> {
  const profile = await mkdtemp(path.join(os.tmpdir(), 'slipway-chromium-'));
  let context: BrowserContext;
  try {
    context = await chromium.launchPersistentContext(profile, {
      executablePath: CHROMIUM,
      headless: true,
      args: ARGS,
      // Keep Chromium's back/forward cache on, as in a person's browser: a page kept for Back
      // must not show what it was asked to forget.
      ignoreDefaultArgs: ['--disable-back-forward-cache'],
      timeout: 60_000,
    });
  } catch (err) {
    await rm(profile, { recursive: true, force: true });
    throw err;
  }
  context.setDefaultTimeout(30_000);
  return {
    context,
    async newPage() {
      const page = await context.newPage();
      return page;
    },
    async close() {
      await context.close().catch(() => undefined);
      await rm(profile, { recursive: true, force: true });
    },
  };
}

/** Chromium's errors for a request lost to a network change (the engine adds and removes interfaces while tests run). */
const DROPPED = /ERR_NETWORK_CHANGED|ERR_NETWORK_IO_SUSPENDED|ERR_CONNECTION_RESET/;

/**
 * Opens `url` in `page` and resolves once the dashboard's script has run (`<html data-ready>`), so
 * callers never wait on timing. The page is loaded again (a read, safe to repeat) when Chromium
 * dropped one of its requests to a network change, or when the script did not start. A dropped
 * module request leaves the page inert (its script never runs): the load is repeated as soon as the
 * drop is seen, not after the wait for the script runs out.
 */
export async function openPage(page: Page, url: string): Promise<void> {
  await loadPage(page, url, false);
}

/** Loads the page again (a new page load, as the browser's reload button does), as sturdily as {@link openPage}. */
export async function reloadPage(page: Page): Promise<void> {
  await loadPage(page, page.url(), true);
}

/**
 * How long loads lost to network changes are repeated: each costs a second or so, but while the
 * engine starts and stops containers they come in bursts, so a short pause (growing to 2 s) comes
 * before the next try. A page whose script does not start for a minute is tried three times at most.
 */
const LOAD_DEADLINE_MS = 240_000;
const STALLS_ALLOWED = 3;

async function loadPage(page: Page, url: string, reload: boolean): Promise<void> {
  const problems: string[] = [];
  const deadline = Date.now() + LOAD_DEADLINE_MS;
  let stalls = 0;
  for (let attempt = 1; ; attempt += 1) {
    const dropped: string[] = [];
    let sawDrop: () => void = () => undefined;
    const drop = new Promise<void>((resolve) => { sawDrop = resolve; });
    const onFailed = (req: { url(): string; failure(): { errorText: string } | null }): void => {
      if (!DROPPED.test(req.failure()?.errorText ?? '')) return;
      dropped.push(req.url());
      sawDrop();
    };
    page.on('requestfailed', onFailed);
    try {
      if (page.url() !== url || (attempt === 1 && !reload)) await page.goto(url, { timeout: 90_000 });
      else await page.reload({ timeout: 90_000 });
      const ready = page.locator('html[data-ready]').waitFor({ state: 'attached', timeout: 60_000 });
      // The wait left behind when a drop wins ends with the next load (or the page): never unhandled.
      ready.catch(() => undefined);
      await Promise.race([ready, drop]);
      if (dropped.length === 0) return;
      problems.push(`dropped: ${dropped.join(', ')}`);
    } catch (err) {
      // The page's own request dropped: Chromium shows its error page instead ("interrupted by another
      // navigation"), and a reload asked meanwhile finds the page between its documents ("not attached").
      if (!DROPPED.test(String(err)) && !/Timeout|chrome-error:|Not attached to an active page/.test(String(err))) throw err;
      if (/Timeout/.test(String(err))) stalls += 1;
      problems.push(String(err).split('\n')[0] ?? '');
    } finally {
      page.off('requestfailed', onFailed);
    }
    if (stalls >= STALLS_ALLOWED || Date.now() > deadline) break;
    await new Promise((resolve) => setTimeout(resolve, Math.min(2000, 250 * attempt)));
  }
  throw new Error(`${url} did not load (${problems.length} tries): ${problems.slice(-6).join('; ')}`);
}

/**
 * Signs the page in as `email` on the page already open. The session is a cookie shared by the
 * browser's tabs, so the page may already be signed in (as `email`: nothing to do; as someone else:
 * log out first).
 */
export async function signIn(page: Page, email: string, password: string): Promise<void> {
  await page.locator('html[data-ready]').waitFor({ state: 'attached', timeout: 60_000 });
  if (((await page.locator('#who').textContent()) ?? '') === email) return;
  if (await page.locator('#logout').isVisible()) {
    await page.locator('#logout').click();
    await page.locator('#login').waitFor({ state: 'visible' });
  }
  await page.locator('#login-form input[name=email]').fill(email);
  await page.locator('#login-form input[name=password]').fill(password);
  await page.getByRole('button', { name: 'Log in' }).click();
  await page.locator('#who', { hasText: email }).waitFor();
}
