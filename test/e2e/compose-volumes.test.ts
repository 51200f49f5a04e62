// End to end on the real engine: a compose set's named volume keeps its data across a release, a rollback and a failed release, with one writer at a time (the holder is stopped before its successor starts).
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { LABEL_DEPLOYMENT, LABEL_MANAGED, type ContainerInfo } from '../../src/runtime/engine.js';
import { appRequest, deployAndWait, eventually, testEngine, uniqueSubdomain, upload } from '../helpers/apps.js';
import { BUSYBOX_IMAGE } from '../helpers/busybox-image.js';
import { composeArchive } from '../helpers/compose-stack.js';
import { runIn } from '../helpers/databases.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

/** The store service: refuses to start while another writer holds /data (its lock file, as a database's pid file), appends `mark`, and frees the lock when stopped. */
function storeCompose(mark: string, webCheck: readonly string[] = ['CMD', 'true']): string {
  return `
x-slipway: {web: web}
services:
  web:
    build: ./web
    expose: ["8080"]
    depends_on: [store]
    healthcheck: {test: ${JSON.stringify(webCheck)}, interval: 1s, retries: 2}
  store:
    image: ${BUSYBOX_IMAGE}
    environment: {MARK: ${mark}}
    command: ["sh", "-c", "if [ -e /data/lock ]; then echo 'two writers'; exit 1; fi; touch /data/lock; echo $$MARK >> /data/history; trap 'rm -f /data/lock; exit 0' TERM; while true; do sleep 1; done"]
    volumes: ["data:/data"]
volumes:
  data: {}
`;
}

describe('compose sets: named volumes', () => {
  let ts: TestServer;
  let token: string;
  let id = '';
  const engine = testEngine();
  const stores = async (): Promise<ContainerInfo[]> => (await engine.listContainers({ [LABEL_MANAGED]: 'true', [LABEL_DEPLOYMENT]: id })).filter((c) => c.name.includes('-store-'));

  before(async () => {
    ts = await startTestServer({ SLIPWAY_STARTUP_TIMEOUT_SECONDS: '90' });
    token = (await ts.newUser('volumes')).token;
  });
  after(async () => {
    if (id !== '') await ts.request('DELETE', `/api/v1/deployments/${id}`, { token }).catch(() => undefined);
    await ts.close();
  });

  test('a named volume keeps its data across a release, a rollback and a failed release; one writer at a time', async () => {
    const subdomain = uniqueSubdomain('vol');
    const created = await ts.request('POST', '/api/v1/deployments', { token, body: { name: subdomain, subdomain, source_type: 'archive', compose_path: 'compose.yaml' } });
    assert.equal(created.status, 201, created.text);
    id = created.json.id;
    const deploy = async (mark: string, webCheck?: readonly string[]): Promise<{ status: number; message: string }> => {
      assert.equal((await upload(ts, token, id, await composeArchive(storeCompose(mark, webCheck), `store ${mark}\n`))).status, 200);
      const res = await deployAndWait(ts, token, id);
      return { status: res.status, message: String(res.json?.message ?? '') };
    };
    /** The one running store's history (the live set's). */
    const history = async (): Promise<string> => {
      const running = (await stores()).filter((c) => c.running);
      assert.equal(running.length, 1, running.map((c) => c.name).join(', '));
      return runIn(running[0]!.id, ['cat', '/data/history']);
    };

    assert.equal((await deploy('one')).status, 200);
    const first = (await ts.request('GET', `/api/v1/deployments/${id}`, { token })).json.live_build_id as string;
    assert.equal(await history(), 'one\n');

    // Start-first would run two stores on /data at once: the new one would find the lock and exit ("two writers").
    assert.equal((await deploy('two')).status, 200);
    assert.equal((await appRequest(ts.port, subdomain)).body, 'store two\n');
    assert.equal(await history(), 'one\ntwo\n', "the new set's store sees the old set's data");
    const newest = (await ts.request('GET', `/api/v1/deployments/${id}/builds?limit=1`, { token })).json[0];
    const log = (await ts.request('GET', `/api/v1/deployments/${id}/builds/${newest.id}/logs`, { token })).text;
    assert.match(log, /==> stopping \S+-store-\S+: it holds the volume the next service mounts \(one writer at a time\)/);

    const rolled = await ts.request('POST', `/api/v1/deployments/${id}/rollback`, { token, body: { build_id: first } });
    assert.ok(rolled.status < 300, rolled.text);
    await eventually(async () => ((await appRequest(ts.port, subdomain)).body === 'store one\n' ? true : undefined), 60_000, 'the first set served again');
    await eventually(async () => ((await stores()).length === 1 ? true : undefined), 60_000, 'the replaced set removed');
    assert.equal(await history(), 'one\ntwo\none\n');

    // A release that fails after its store took the volume: that store is stopped cleanly (its lock freed) and the live one runs again, on the same data.
    const failed = await deploy('three', ['CMD', 'false']);
    assert.equal(failed.status, 500);
    assert.match(failed.message, /service "web" is unhealthy/);
    assert.equal((await appRequest(ts.port, subdomain)).body, 'store one\n');
    const store = await eventually(async () => {
      const list = await stores();
      return list.length === 1 && list[0]!.running ? list[0] : undefined;
    }, 30_000, "the live set's store running again, the failed set's gone");
    assert.equal(store.labels['dev.slipway.build'], first);
    assert.equal(await runIn(store.id, ['cat', '/data/history']), 'one\ntwo\none\nthree\none\n');
  });
});
