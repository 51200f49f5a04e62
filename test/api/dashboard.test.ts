// The dashboard: served on the API host with a strict CSP, and never on an app host.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { appRequest } from '../helpers/apps.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

let ts: TestServer;
before(async () => {
  ts = await startTestServer();
});
after(async () => {
  await ts.close();
});

test('GET / serves the dashboard page, its script and its style, without auth', async () => {
  const page = await ts.request('GET', '/');
  assert.equal(page.status, 200);
  assert.match(page.headers.get('content-type') ?? '', /^text\/html/);
  assert.match(page.text, /<script src="\/dashboard.js"><\/script>/);
  assert.match(page.headers.get('content-security-policy') ?? '', /script-src 'self'/);
  assert.equal(page.headers.get('x-frame-options'), 'DENY');
  const script = await ts.request('GET', '/dashboard.js');
  assert.equal(script.status, 200);
  assert.match(script.headers.get('content-type') ?? '', /^text\/javascript/);
  assert.match(script.text, /\/api\/v1/);
  // The page renders data with textContent only: no HTML injection from app names.
  assert.doesNotMatch(script.text, /innerHTML/);
  const style = await ts.request('GET', '/dashboard.css');
  assert.equal(style.status, 200);
});

test('an app host never serves the dashboard', async () => {
  const res = await appRequest(ts.port, 'no-such-app');
  assert.equal(res.status, 404);
  assert.doesNotMatch(res.body, /dashboard\.js/);
});
