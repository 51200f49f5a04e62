// End to end on the real engine (issue 23 item 5, as the attack): one user floods the two build slots with slow builds; another user's short build starts and finishes while they still run. And the concurrent_builds quota.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { busyboxArchive, createArchiveApp, deployAndWait, eventually } from '../helpers/apps.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

describe('fair build slots', () => {
  let ts: TestServer;

  before(async () => {
    ts = await startTestServer({ SLIPWAY_MAX_CONCURRENT_BUILDS: '2' });
  });
  after(async () => {
    await ts.close();
  });

  test("user A queues four slow builds; user B's short build starts without waiting for A's to finish", async (t) => {
    const alice = await ts.newUser('flooder');
    const bob = await ts.newUser('neighbour');
    // Slow enough that none of them can end during the test (they are stopped at its end).
    const slow = await busyboxArchive({ body: 'slow\n', extraDockerfile: 'RUN sleep 600' });
    const flood: Array<{ id: string; buildId: string }> = [];
    for (let i = 0; i < 4; i += 1) {
      const { id } = await createArchiveApp(ts, alice.token, slow.archive);
      const res = await ts.request('POST', `/api/v1/deployments/${id}/deploy`, { token: alice.token });
      assert.equal(res.status, 202, res.text);
      flood.push({ id, buildId: res.json.id });
    }
    const logOf = async (app: { id: string; buildId: string }): Promise<string> =>
      (await ts.request('GET', `/api/v1/deployments/${app.id}/builds/${app.buildId}/logs`, { token: alice.token })).text;
    try {
      // A's first build is on the engine (its slow step started) before B arrives.
      await eventually(async () => ((await logOf(flood[0]!)).includes('sleep 600') ? true : undefined), 120_000, "A's first build to reach its slow step");

      const quick = await busyboxArchive({ body: 'quick\n' });
      const app = await createArchiveApp(ts, bob.token, quick.archive);
      const started = performance.now();
      const done = await deployAndWait(ts, bob.token, app.id);
      const seconds = (performance.now() - started) / 1000;
      assert.equal(done.status, 200, done.text);
      assert.equal(done.json.status, 'succeeded', String(done.json.error));
      t.diagnostic(`B's build took ${seconds.toFixed(1)} s while A's four builds were queued or running`);

      // None of A's builds has ended: B did not wait for any of them.
      for (const a of flood) {
        const build = (await ts.request('GET', `/api/v1/deployments/${a.id}/builds/${a.buildId}`, { token: alice.token })).json;
        assert.equal(build.status, 'building', `A's build ${a.buildId}`);
      }
    } finally {
      // Stopping a deployment cancels its build in flight.
      for (const a of flood) await ts.request('POST', `/api/v1/deployments/${a.id}/stop`, { token: alice.token });
      for (const a of flood) {
        await eventually(
          async () => {
            const build = (await ts.request('GET', `/api/v1/deployments/${a.id}/builds/${a.buildId}`, { token: alice.token })).json;
            return build.status === 'building' ? undefined : true;
          },
          120_000,
          `A's build ${a.buildId} to be cancelled`,
        );
      }
    }
  });

  test('concurrent_builds quota: a deploy beyond the builds in progress an admin allows → 429 naming it; a redeploy of the same deployment replaces its build', async () => {
    const user = await ts.newUser('one-build');
    assert.equal((await ts.request('PATCH', `/api/v1/users/${user.userId}/quotas`, { token: ts.adminToken, body: { concurrent_builds: 1 } })).status, 200);
    const slow = await busyboxArchive({ body: 'slow\n', extraDockerfile: 'RUN sleep 600' });
    const first = await createArchiveApp(ts, user.token, slow.archive);
    const second = await createArchiveApp(ts, user.token, slow.archive);
    const building = await ts.request('POST', `/api/v1/deployments/${first.id}/deploy`, { token: user.token });
    assert.equal(building.status, 202, building.text);
    try {
      const over = await ts.request('POST', `/api/v1/deployments/${second.id}/deploy`, { token: user.token });
      assert.equal(over.status, 429, over.text);
      assert.equal(over.json.error, 'quota_exceeded');
      assert.match(over.json.message, /concurrent_builds \(1 of 1/);
      assert.deepEqual((await ts.request('GET', `/api/v1/deployments/${second.id}/builds`, { token: user.token })).json, [], 'no build recorded');
      const again = await ts.request('POST', `/api/v1/deployments/${first.id}/deploy`, { token: user.token });
      assert.equal(again.status, 202, again.text);
    } finally {
      assert.equal((await ts.request('POST', `/api/v1/deployments/${first.id}/stop`, { token: user.token })).status, 200);
    }
    await eventually(
      async () => {
        const builds = (await ts.request('GET', `/api/v1/deployments/${first.id}/builds`, { token: user.token })).json as Array<{ status: string }>;
        return builds.every((b) => b.status !== 'building') ? true : undefined;
      },
      120_000,
      'the builds to be cancelled',
    );
    // Nothing in progress any more: the other deployment may build.
    const now = await ts.request('POST', `/api/v1/deployments/${second.id}/deploy`, { token: user.token });
    assert.equal(now.status, 202, now.text);
    await ts.request('POST', `/api/v1/deployments/${second.id}/stop`, { token: user.token });
    await eventually(
      async () => ((await ts.request('GET', `/api/v1/deployments/${second.id}/builds/${now.json.id}`, { token: user.token })).json.status !== 'building' ? true : undefined),
      120_000,
      'the last build to be cancelled',
    );
  });
});
