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
