// The dashboard: served on the API host with a strict CSP (plain ES modules, no inline script or style), never on an app host.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { appRequest } from '../helpers/apps.js';
import { PROJECT_ROOT, startTestServer, type TestServer } from '../helpers/server.js';

let ts: TestServer;
before(async () => {
  ts = await startTestServer();
});
after(async () => {
  await ts.close();
});

test('GET / serves the dashboard page and every module and style of public/ui, without auth, under the CSP', async () => {
  const page = await ts.request('GET', '/');
  assert.equal(page.status, 200);
  assert.match(page.headers.get('content-type') ?? '', /^text\/html/);
  assert.match(page.text, /<script type="module" src="\/ui\/app.js"><\/script>/);
  const csp = page.headers.get('content-security-policy') ?? '';
  assert.match(csp, /default-src 'self'/);
  assert.match(csp, /script-src 'self';/);
  assert.match(csp, /style-src 'self';/);
  assert.doesNotMatch(csp, /unsafe-inline|unsafe-eval|https?:/);
  assert.equal(page.headers.get('x-frame-options'), 'DENY');
  // No inline script, no inline style, nothing from another origin.
  assert.doesNotMatch(page.text, /<script(?![^>]*\ssrc=)[^>]*>/);
  assert.doesNotMatch(page.text, /\sstyle=|<style/);
  assert.doesNotMatch(page.text, /(src|href)="(https?:)?\/\//);
  const files = fs.readdirSync(path.join(PROJECT_ROOT, 'public', 'ui'), { withFileTypes: true }).filter((f) => f.isFile()).map((f) => f.name);
  assert.ok(files.includes('app.js') && files.includes('dashboard.css'));
  for (const file of files) {
    const res = await ts.request('GET', `/ui/${file}`);
    assert.equal(res.status, 200, file);
    assert.match(res.headers.get('content-type') ?? '', file.endsWith('.js') ? /^text\/javascript/ : /^text\/css/, file);
    assert.equal(res.headers.get('x-content-type-options'), 'nosniff');
    // The page renders data with textContent only: no HTML injection from app names or logs.
    assert.doesNotMatch(res.text, /innerHTML|outerHTML|insertAdjacentHTML|document\.write|eval\(|new Function/, file);
    // A vendored library's comments name its sites; the CSP still lets the page load nothing from them.
    assert.doesNotMatch(res.text, /https?:\/\/(?!www\.w3\.org\/2000\/svg|github\.com\/you)/, `${file} names no other origin`);
  }
  assert.equal((await ts.request('GET', '/ui/nope.js')).status, 404);
  // The browser libraries (npm dependencies, served at /ui/vendor) come from here too, with their
  // licence; their comments name other sites, but the CSP lets the page load nothing from them.
  for (const [file, type] of [['uplot.esm.js', /^text\/javascript/], ['uplot.min.css', /^text\/css/], ['uplot.LICENSE.txt', /^text\/plain/], ['qrcode.js', /^text\/javascript/]] as const) {
    const res = await ts.request('GET', `/ui/vendor/${file}`);
    assert.equal(res.status, 200, file);
    assert.match(res.headers.get('content-type') ?? '', type, file);
    assert.equal(res.headers.get('x-content-type-options'), 'nosniff');
    assert.doesNotMatch(res.text, /innerHTML|outerHTML|insertAdjacentHTML|document\.write|eval\(|new Function/, file);
  }
});

test('an app host never serves the dashboard', async () => {
  const res = await appRequest(ts.port, 'no-such-app');
  assert.equal(res.status, 404);
  assert.doesNotMatch(res.body, /app\.js/);
});
