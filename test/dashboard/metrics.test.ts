// Metrics in Chromium (issue 26 item 6): the server keeps a history sampled while the app runs, and
// the Metrics tab draws it with the vendored uPlot (axes, units, hover values in the legend), at
// 1280 and 390 px, with a table for keyboard users; nothing is loaded from another host.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { eventually } from '../helpers/apps.js';
import { openPage, reloadPage, signIn, type TestBrowser } from '../helpers/browser.js';
import { startWithRunningApp } from '../helpers/browser-app.js';
import type { TestServer } from '../helpers/server.js';

let ts: TestServer;
let browser: TestBrowser;
let user: Awaited<ReturnType<TestServer['newUser']>>;
let app: { id: string; subdomain: string };
const requested: string[] = [];

before(async () => {
  // One sample a second, so the history fills within the test.
  ({ ts, browser, user, app } = await startWithRunningApp('metrics', { SLIPWAY_METRICS_INTERVAL_SECONDS: '1' }));
  browser.context.on('request', (req) => requested.push(req.url()));
});
after(async () => {
  await browser?.close();
  await ts?.close();
});

test('the server keeps a history of the running app; another user cannot read it', async () => {
  const history = await eventually(async () => {
    const res = await ts.request('GET', `/api/v1/deployments/${app.id}/metrics/history`, { token: user.token });
    assert.equal(res.status, 200, res.text);
    return res.json.points.length >= 3 ? res.json : undefined;
  }, 90_000, 'three samples');
  assert.equal(history.interval_seconds, 1);
  const last = history.points.at(-1);
  assert.ok(last.memory_bytes > 0 && last.memory_limit_bytes >= last.memory_bytes);
  assert.equal(typeof last.cpu_percent, 'number');
  assert.ok(Date.parse(last.at) <= Date.now());
  const other = await ts.newUser('metrics-other');
  assert.equal((await ts.request('GET', `/api/v1/deployments/${app.id}/metrics/history`, { token: other.token })).status, 404);
});

test('the Metrics tab draws the history with axes, units and hover values, at 1280 and 390 px', async () => {
  const page = await browser.newPage();
  await page.setViewportSize({ width: 1280, height: 900 });
  await openPage(page, `${ts.url}/#/d/${app.id}/metrics`);
  await signIn(page, user.email, user.password);
  for (const chart of ['cpu', 'memory', 'network']) await page.locator(`#chart-${chart} .uplot canvas`).first().waitFor();
  await page.locator('#metric-memory', { hasText: ' of ' }).waitFor({ timeout: 30_000 });
  assert.match(await page.locator('#chart-cpu figcaption').innerText(), /% of one CPU, last hour/);
  assert.match(await page.locator('#chart-network figcaption').innerText(), /bytes per second/);
  // Hovering the memory chart shows the values under the pointer in its legend, with units.
  const over = page.locator('#chart-memory .u-over');
  await over.scrollIntoViewIfNeeded();
  const box = await over.boundingBox();
  assert.ok(box);
  await page.mouse.move(box.x + box.width / 2, box.y + box.height / 2);
  await page.mouse.move(box.x + box.width - 3, box.y + box.height / 2, { steps: 5 });
  await page.locator('#chart-memory .u-legend .u-value', { hasText: /\d/ }).first().waitFor();
  const values = await page.locator('#chart-memory .u-legend .u-value').allInnerTexts();
  assert.ok(values.some((v) => /\d:\d\d/.test(v)), `a time in the legend: ${values.join(' | ')}`);
  assert.ok(values.some((v) => /\d (B|KiB|MiB|GiB)$/.test(v)), `a memory value with its unit: ${values.join(' | ')}`);
  // Keyboard and screen readers: the samples as a table.
  await page.locator('.metrics-table summary').focus();
  await page.keyboard.press('Enter');
  await page.locator('#metrics-table-rows tr').first().waitFor();
  assert.match(await page.locator('#metrics-table-rows tr').first().innerText(), /%/);

  await page.setViewportSize({ width: 390, height: 844 });
  await eventually(async () => (((await page.locator('#chart-cpu canvas').first().boundingBox())?.width ?? 9999) <= 390 ? true : undefined), 30_000, 'the chart narrowed');
  assert.ok((await page.evaluate<number>('document.scrollingElement.scrollWidth')) <= 390, 'no horizontal scroll at 390 px');
  const origin = new URL(ts.url).origin;
  assert.deepEqual(requested.filter((u) => !u.startsWith(origin) && !u.startsWith('data:')), [], 'nothing from another host');
  await page.close();
});

test('the time labels under the charts never overlap, at 1280 and 390 px (issue 33)', async () => {
  const page = await browser.newPage();
  await openPage(page, `${ts.url}/#/d/${app.id}/metrics`);
  await signIn(page, user.email, user.password);
  for (const width of [1280, 390]) {
    await page.setViewportSize({ width, height: 900 });
    await reloadPage(page);
    await page.locator('#chart-cpu .uplot canvas').first().waitFor({ timeout: 60_000 });
    // Where each label of the time axis is drawn, and how wide it is in the axis font.
    const labels = await eventually(async () => {
      const found = await page.evaluate<Array<{ text: string; x: number; width: number }>>(`(() => {
        const u = document.querySelector('#chart-cpu').uplot;
        const axis = u.axes[0];
        const ctx = document.createElement('canvas').getContext('2d');
        ctx.font = axis.font[0];
        return (axis._values || []).map((text, i) => ({ text: String(text), x: u.valToPos(axis._splits[i], 'x'), width: ctx.measureText(String(text)).width }));
      })()`);
      return found.length > 0 ? found : undefined;
    }, 60_000, 'time labels');
    for (let i = 1; i < labels.length; i += 1) {
      const a = labels[i - 1]!;
      const b = labels[i]!;
      assert.ok(b.x - a.x >= (a.width + b.width) / 2 + 4, `at ${width} px, "${a.text}" at ${a.x} and "${b.text}" at ${b.x} overlap`);
    }
    assert.ok(labels.every((l) => /^\d{1,2}:\d\d(:\d\d)?( ?[AP]M)?$/i.test(l.text)), JSON.stringify(labels));
  }
  await page.close();
});
