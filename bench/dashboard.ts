// Benchmark (run by hand: `node dist/bench/dashboard.js`): the dashboard in Chromium: first paint of a 50-app list, and how long a build log line takes from the server's log file to the page.
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { busyboxArchive, createArchiveApp } from '../test/helpers/apps.js';
import { launchBrowser } from '../test/helpers/browser.js';
import { startTestServer } from '../test/helpers/server.js';

const { values: options } = parseArgs({ options: { runs: { type: 'string', default: '5' }, lines: { type: 'string', default: '5' } } });
const RUNS = Number(options.runs);
const LINES = Number(options.lines);

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? NaN;

const ts = await startTestServer();
const browser = await launchBrowser();
try {
  const user = await ts.newUser('bench');
  for (let i = 0; i < 50; i += 1) {
    const res = await ts.request('POST', '/api/v1/deployments', { token: user.token, body: { name: `bench app ${i}`, subdomain: `bench-${process.pid}-${i}`, source_type: 'archive' } });
    if (res.status !== 201) throw new Error(res.text);
  }

  // Baseline: the same 50 rows as a static page, from a bare Node server, with the same stylesheet.
  const css = fs.readFileSync(path.join(import.meta.dirname, '..', '..', 'public', 'ui', 'dashboard.css'));
  const rows = Array.from({ length: 50 }, (_, i) => `<tr><td><a href="#">bench app ${i}</a></td><td><span class="badge pending">pending</span></td><td>—</td><td>upload</td><td>just now</td></tr>`).join('');
  const html = `<!doctype html><html><head><meta charset="utf-8"><link rel="stylesheet" href="/s.css"></head><body><main><section class="card"><h1>Apps</h1><table><tbody>${rows}</tbody></table></section></main></body></html>`;
  const bare = http.createServer((req, res) => {
    if (req.url === '/s.css') res.writeHead(200, { 'content-type': 'text/css' }).end(css);
    else res.writeHead(200, { 'content-type': 'text/html' }).end(html);
  });
  await new Promise<void>((resolve) => bare.listen(0, '127.0.0.1', resolve));
  const bareUrl = `http://127.0.0.1:${(bare.address() as AddressInfo).port}/`;

  const page = await browser.newPage();
  // Stamps the moment the 50 rows are in the page (an init script: the page's CSP forbids eval).
  await page.addInitScript("new MutationObserver((_, observer) => { if (document.querySelectorAll('#app-rows tr').length >= 50) { window.listAt = performance.now(); observer.disconnect(); } }).observe(document, { childList: true, subtree: true });");
  await page.goto(ts.url + '/');
  await page.locator('#login-form input[name=email]').fill(user.email);
  await page.locator('#login-form input[name=password]').fill(user.password);
  await page.getByRole('button', { name: 'Log in' }).click();
  await page.locator('#app-rows tr').nth(49).waitFor();
  const fcp = "performance.getEntriesByName('first-contentful-paint')[0]?.startTime ?? NaN";
  const slipwayPaint: number[] = [];
  const slipwayList: number[] = [];
  const barePaint: number[] = [];
  for (let run = 0; run < RUNS; run += 1) {
    // The session stays in sessionStorage: a reload is a returning user opening the dashboard.
    await page.reload();
    await page.locator('#app-rows tr').nth(49).waitFor();
    slipwayPaint.push(await page.evaluate<number>(fcp));
    slipwayList.push(await page.evaluate<number>('window.listAt'));
    const other = await browser.newPage();
    await other.goto(bareUrl);
    await other.waitForFunction('performance.getEntriesByName("first-contentful-paint").length > 0');
    barePaint.push(await other.evaluate<number>(fcp));
    await other.close();
  }
  bare.close();

  // A build printing a marker every 2 s: the time from the line landing in the server's log file
  // (read every 5 ms) to the page showing it (a MutationObserver stamping Date.now()).
  const steps = Array.from({ length: LINES }, (_, i) => `RUN sleep 2 && echo bench-mark-${i}`).join('\n');
  const { archive } = await busyboxArchive({ extraDockerfile: steps });
  const app = await createArchiveApp(ts, user.token, archive);
  await page.goto(`${ts.url}/#/d/${app.id}`);
  await page.locator('#build-log').waitFor();
  await page.evaluate(`window.seen = {}; new MutationObserver(() => { for (const m of document.getElementById('build-log').textContent.matchAll(/^bench-mark-(\\d+)$/gm)) window.seen[m[1]] ??= Date.now(); }).observe(document.getElementById('build-log'), { childList: true, subtree: true, characterData: true });`);
  const started = await ts.request('POST', `/api/v1/deployments/${app.id}/deploy`, { token: user.token });
  const logFile = path.join(ts.dataDir, 'logs', app.id, `${started.json.id}.log`);
  const onServer: Record<string, number> = {};
  const deadline = Date.now() + 120_000;
  while (Object.keys(onServer).length < LINES && Date.now() < deadline) {
    const text = fs.existsSync(logFile) ? fs.readFileSync(logFile, 'utf8') : '';
    for (const m of text.matchAll(/^bench-mark-(\d+)$/gm)) onServer[m[1]!] ??= Date.now();
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  for (const until = Date.now() + 30_000; (await page.evaluate<number>('Object.keys(window.seen).length')) < LINES && Date.now() < until;) {
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  const seen = await page.evaluate<Record<string, number>>('window.seen');
  const delays = Object.keys(onServer).map((k) => (seen[k] ?? NaN) - onServer[k]!);

  const ms = (x: number): string => `${x.toFixed(0)} ms`;
  console.log(`first contentful paint, 50 apps: slipway ${ms(median(slipwayPaint))} (the 50 rows in the page at ${ms(median(slipwayList))}), static page ${ms(median(barePaint))}; ratio ${(median(slipwayPaint) / median(barePaint)).toFixed(2)} (median of ${RUNS})`);
  console.log(`build log line, server log file → page: median ${ms(median(delays))}, max ${ms(Math.max(...delays))} over ${delays.length} lines (${delays.map((d) => d.toFixed(0)).join(', ')})`);
} finally {
  await browser.close();
  await ts.close();
}
