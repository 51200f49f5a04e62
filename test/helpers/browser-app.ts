// What a dashboard test of a running app starts from: a test server, a user, their busybox app deployed and serving, and Chromium.
import assert from 'node:assert/strict';
import { busyboxArchive, createArchiveApp, deployAndWait, testEngine } from './apps.js';
import { launchBrowser, type TestBrowser } from './browser.js';
import { ensureBusyboxImage } from './busybox-image.js';
import { startTestServer, type TestServer } from './server.js';

export interface RunningAppPage {
  readonly ts: TestServer;
  readonly browser: TestBrowser;
  readonly user: Awaited<ReturnType<TestServer['newUser']>>;
  readonly app: { id: string; subdomain: string };
}

/** Starts the server (with `settings`) and Chromium at once, then deploys a busybox app of a new user named from `userName`. */
export async function startWithRunningApp(userName: string, settings: Record<string, string> = {}): Promise<RunningAppPage> {
  await ensureBusyboxImage(testEngine());
  const [ts, browser] = await Promise.all([startTestServer(settings), launchBrowser()]);
  const user = await ts.newUser(userName);
  const app = await createArchiveApp(ts, user.token, (await busyboxArchive()).archive);
  const done = await deployAndWait(ts, user.token, app.id);
  assert.equal(done.json.status, 'succeeded', done.text);
  return { ts, browser, user, app };
}
