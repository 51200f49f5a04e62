// Replicas under load on the docker runtime: a redeploy of two replicas fails no request, on both data planes.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { appRequest, busyboxArchive, createArchiveApp, deployAndWait, eventually, testEngine, upload } from '../helpers/apps.js';
import { PLANES } from '../helpers/planes.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

async function deploymentContainers(id: string): Promise<number> {
  return (await testEngine().listContainers({ 'dev.slipway.deployment': id })).length;
}

for (const plane of PLANES) describe(`replicas under load (${plane} data plane)`, () => {
  let ts: TestServer;
  let token: string;

  before(async () => {
    ts = await startTestServer({ SLIPWAY_DATA_PLANE: plane });
    token = (await ts.newUser('replicas-load')).token;
  });
  after(async () => {
    await ts.close();
  });

  test('a redeploy of 2 replicas under constant load fails no request, and the new replicas take over', async () => {
    const first = await busyboxArchive({ body: 'first\n' });
    const { id, subdomain } = await createArchiveApp(ts, token, first.archive, { replicas: 2 });
    assert.equal((await deployAndWait(ts, token, id)).status, 200);
    let stop = false;
    const failures: string[] = [];
    const bodies = new Set<string>();
    let requests = 0;
    const visitor = async (): Promise<void> => {
      while (!stop) {
        const res = await appRequest(ts.port, subdomain, { timeoutMs: 30_000 }).catch((err: unknown) => ({ status: 0, body: String(err) }));
        requests += 1;
        if (res.status !== 200) failures.push(`${res.status} ${res.body.slice(0, 100)}`);
        else bodies.add(res.body);
      }
    };
    const visitors = [visitor(), visitor(), visitor()];
    try {
      await eventually(async () => (requests >= 10 ? true : undefined), 30_000, 'load to start');
      const second = await busyboxArchive({ body: 'second\n' });
      assert.equal((await upload(ts, token, id, second.archive)).status, 200);
      assert.equal((await deployAndWait(ts, token, id)).status, 200);
      await eventually(async () => ((await appRequest(ts.port, subdomain)).body === 'second\n' ? true : undefined), 30_000, 'the new release to serve');
      const after = requests;
      await eventually(async () => (requests >= after + 10 ? true : undefined), 30_000, 'load after the switch');
    } finally {
      stop = true;
      await Promise.all(visitors);
    }
    assert.deepEqual(failures, [], `${failures.length} of ${requests} requests failed`);
    assert.deepEqual([...bodies].sort(), ['first\n', 'second\n']);
    await eventually(async () => ((await deploymentContainers(id)) === 2 ? true : undefined), 60_000, 'the old replicas to be removed');
  });
});
