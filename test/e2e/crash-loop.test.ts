// End to end on the real engine (issue 33 item 1, as the person sees it): an app that serves, then exits with code 3 every few seconds, is `running` with a crash-loop health in the API, the list and the CLI, and is announced once as app.crashed.
import assert from 'node:assert/strict';
import fsp from 'node:fs/promises';
import { after, before, describe, test } from 'node:test';
import type { AppCrashedEvent } from '../../src/domain/app-events.js';
import { busyboxScriptArchive, createArchiveApp, deployAndWait, eventually, tempDir } from '../helpers/apps.js';
import { cli } from '../helpers/cli.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

/** An app that answers HTTP at once (so its release is healthy), then prints "boom" and exits with code 3 two seconds later, every run. */
async function crashLoopApp(): Promise<Buffer> {
  return busyboxScriptArchive('mkdir -p /www; echo ok > /www/index.html; httpd -p "${PORT:-8080}" -h /www; sleep 2; echo boom; exit 3');
}

interface Health {
  state: string;
  restarts: number;
  last_exit_code: number | null;
  last_line: string | null;
  since: string | null;
}

describe('a crash-looping app says so', () => {
  let ts: TestServer;
  let user: Awaited<ReturnType<TestServer['newUser']>>;
  let home: string;
  const crashed: AppCrashedEvent[] = [];

  before(async () => {
    ts = await startTestServer();
    user = await ts.newUser('crashloop');
    home = tempDir('crashloop-home');
    ts.server.appEvents.on('app.crashed', (event) => crashed.push(event));
  });
  after(async () => {
    await ts.close();
    await fsp.rm(home, { recursive: true, force: true });
  });

  test('running, health crash_loop with exit 3 and "boom" (API, list, slipway status and apps); one app.crashed per episode', async () => {
    const { id, subdomain } = await createArchiveApp(ts, user.token, await crashLoopApp());
    const deployed = await deployAndWait(ts, user.token, id);
    assert.equal(deployed.status, 200, deployed.text);

    const fresh = (await ts.request('GET', `/api/v1/deployments/${id}`, { token: user.token })).json;
    assert.equal(fresh.status, 'running');
    assert.deepEqual(fresh.health, { state: 'ok', restarts: 0, last_exit_code: null, last_line: null, since: null });

    const health = await eventually(async () => {
      const dep = (await ts.request('GET', `/api/v1/deployments/${id}`, { token: user.token })).json;
      return dep.health.state === 'crash_loop' ? (dep as { status: string; health: Health }) : undefined;
    }, 120_000, 'the crash loop to show');
    assert.equal(health.status, 'running', 'the spec keeps its status values');
    assert.equal(health.health.last_exit_code, 3);
    assert.equal(health.health.last_line, 'boom');
    assert.ok(health.health.restarts >= 3, JSON.stringify(health.health));
    assert.ok(health.health.since !== null && !Number.isNaN(Date.parse(health.health.since)));

    const list = (await ts.request('GET', '/api/v1/deployments', { token: user.token })).json as Array<{ id: string; status: string; health: Health }>;
    const listed = list.find((d) => d.id === id);
    assert.equal(listed?.status, 'running');
    assert.equal(listed?.health.state, 'crash_loop');

    const env = { SLIPWAY_URL: ts.url, SLIPWAY_API_KEY: user.apiKey };
    const status = await cli(['status', subdomain], { home, env });
    assert.equal(status.code, 0, status.stderr);
    assert.match(status.stdout, /^status:\s+running$/m);
    assert.match(status.stdout, /^health:\s+Crashed — restarting \(exit 3: boom\)$/m);
    const apps = await cli(['apps'], { home, env });
    assert.equal(apps.code, 0, apps.stderr);
    const row = apps.stdout.split('\n').find((line) => line.includes(subdomain));
    assert.match(row ?? '', /\sCrashed — restarting \(exit 3: boom\)\s/);

    // Announced once for the episode, however many restarts follow.
    const before = health.health.restarts;
    await eventually(async () => {
      const dep = (await ts.request('GET', `/api/v1/deployments/${id}`, { token: user.token })).json;
      return dep.health.restarts > before ? true : undefined;
    }, 120_000, 'another restart');
    const mine = crashed.filter((event) => event.deploymentId === id);
    assert.equal(mine.length, 1, JSON.stringify(mine));
    assert.equal(mine[0]?.subdomain, subdomain);
    assert.equal(mine[0]?.exitCode, 3);
    assert.equal(mine[0]?.lastLine, 'boom');

    // A stop ends it: a stopped app is not crash-looping.
    const stopped = await ts.request('POST', `/api/v1/deployments/${id}/stop`, { token: user.token });
    assert.equal(stopped.status, 200, stopped.text);
    await eventually(async () => {
      const dep = (await ts.request('GET', `/api/v1/deployments/${id}`, { token: user.token })).json;
      return dep.status === 'stopped' && dep.health.state === 'ok' ? true : undefined;
    }, 30_000, 'health back to ok once stopped');
  });
});
