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
 * Opens `url` in `page`, loading it again when Chromium dropped one of the page's own requests
 * (the document, a script or stylesheet) to a network change: a read, safe to repeat. Resolves once
 * the dashboard's script has run (`<html data-ready>`), so callers never wait on timing.
 */
export async function openPage(page: Page, url: string): Promise<void> {
  for (let attempt = 1; ; attempt += 1) {
    const dropped: string[] = [];
    const onFailed = (req: { url(): string; failure(): { errorText: string } | null }): void => {
      if (DROPPED.test(req.failure()?.errorText ?? '')) dropped.push(req.url());
    };
    page.on('requestfailed', onFailed);
    try {
      await page.goto(url);
      await page.locator('html[data-ready]').waitFor({ state: 'attached', timeout: 30_000 });
      if (dropped.length === 0) return;
    } catch (err) {
      if (attempt >= 4 || (dropped.length === 0 && !DROPPED.test(String(err)))) throw err;
    } finally {
      page.off('requestfailed', onFailed);
    }
    if (attempt >= 4) throw new Error(`${url}: requests kept failing: ${dropped.join(', ')}`);
  }
}
