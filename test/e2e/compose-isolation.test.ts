// End to end on the real engine: a compose set's services are its own (another deployment's containers neither resolve nor reach them, nor its database), and a named volume keeps its data across releases, a failed one and a rollback, with one writer at a time.
import assert from 'node:assert/strict';
import fsp from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { LABEL_DEPLOYMENT, LABEL_MANAGED, type ContainerInfo } from '../../src/runtime/engine.js';
import { appRequest, busyboxArchive, createArchiveApp, deployAndWait, eventually, tarGzOf, tempDir, testEngine, uniqueSubdomain, upload } from '../helpers/apps.js';
import { BUSYBOX_IMAGE, ensureBusyboxImage, writeBusyboxApp } from '../helpers/busybox-image.js';
import { STAND_IN_IMAGES, canConnect, databaseContainer, docker, runIn, waitForStatus } from '../helpers/databases.js';
import { execIn } from '../helpers/engine-exec.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

/** A busybox service that serves `text` on port 80 of its set's network. */
const serving = (text: string): string => `
    image: ${BUSYBOX_IMAGE}
    command: ["sh", "-c", "mkdir -p /s && echo '${text}' > /s/index.html && exec httpd -f -p 80 -h /s"]
    expose: ["80"]`;

/** A source archive: `compose` and a busybox web service serving `body`. */
async function stackArchive(compose: string, body: string): Promise<Buffer> {
  await ensureBusyboxImage(testEngine());
  const dir = tempDir('compose-iso');
  try {
    await writeBusyboxApp(path.join(dir, 'web'), { body });
    await fsp.writeFile(path.join(dir, 'compose.yaml'), compose);
    return await tarGzOf(dir);
  } finally {
    await fsp.rm(dir, { recursive: true, force: true });
  }
}

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

describe('compose sets: isolation between deployments, and named volumes', () => {
  let ts: TestServer;
  let alice: string;
  let bob: string;
  const engine = testEngine();
  const ids: Array<{ id: string; token: string }> = [];
  const containersOf = (id: string): Promise<ContainerInfo[]> => engine.listContainers({ [LABEL_MANAGED]: 'true', [LABEL_DEPLOYMENT]: id });
  /** The running container of `service` in the deployment's set (the web one is the published one). */
  const serviceContainer = async (id: string, service: string): Promise<ContainerInfo> => {
    const list = (await containersOf(id)).filter((c) => c.running);
    const found = service === 'web' ? list.find((c) => c.hostPort !== null) : list.find((c) => c.name.includes(`-${service}-`));
    assert.ok(found !== undefined, `${service} of ${id}: ${list.map((c) => c.name).join(', ')}`);
    return found;
  };

  before(async () => {
    ts = await startTestServer({ ...STAND_IN_IMAGES, SLIPWAY_STARTUP_TIMEOUT_SECONDS: '90' });
    alice = (await ts.newUser('alice-iso')).token;
    bob = (await ts.newUser('bob-iso')).token;
  });
  after(async () => {
    for (const { id, token } of ids) await ts.request('DELETE', `/api/v1/deployments/${id}`, { token }).catch(() => undefined);
    await ts.close();
  });

  /** Creates a compose deployment for `token` from `archive`, deploys it and checks it serves `body`. */
  async function composeApp(token: string, archive: Buffer, body: string): Promise<{ id: string; subdomain: string }> {
    const subdomain = uniqueSubdomain('iso');
    const created = await ts.request('POST', '/api/v1/deployments', { token, body: { name: subdomain, subdomain, source_type: 'archive', compose_path: 'compose.yaml' } });
    assert.equal(created.status, 201, created.text);
    ids.push({ id: created.json.id, token });
    return { id: created.json.id, subdomain, ...(await redeploy(token, created.json.id, subdomain, archive, body)) };
  }
  async function redeploy(token: string, id: string, subdomain: string, archive: Buffer, body: string): Promise<{ buildId: string }> {
    assert.equal((await upload(ts, token, id, archive)).status, 200);
    const res = await deployAndWait(ts, token, id);
    assert.equal(res.status, 200, res.text);
    assert.equal((await appRequest(ts.port, subdomain)).body, body);
    return { buildId: (await ts.request('GET', `/api/v1/deployments/${id}`, { token })).json.live_build_id };
  }

  test("from inside another deployment's containers, a set's services, its database and its containers resolve to nothing or are not reached", async () => {
    // Alice's set: web, an internal `vault`, and `shared` (a name bob's set uses too), linked to her redis.
    const db = await ts.request('POST', '/api/v1/databases', { token: alice, body: { name: 'alice-cache', engine: 'redis' } });
    assert.equal(db.status, 201, db.text);
    const aliceCompose = `
x-slipway: {web: web}
services:
  web:
    build: ./web
    expose: ["8080"]
  vault:${serving('alice vault secret')}
  shared:${serving('alice shared')}
`;
    const a = await composeApp(alice, await stackArchive(aliceCompose, 'alice web\n'), 'alice web\n');
    assert.equal((await waitForStatus(ts, alice, db.json.id)).status, 'running');
    assert.equal((await ts.request('POST', `/api/v1/deployments/${a.id}/databases`, { token: alice, body: { database_id: db.json.id, env: 'CACHE_URL' } })).status, 201);
    await redeploy(alice, a.id, a.subdomain, await stackArchive(aliceCompose, 'alice web\n'), 'alice web\n');

    // Bob's set: web and his own `shared`; and a plain app of alice's (another deployment, same tenant).
    const bobCompose = `
x-slipway: {web: web}
services:
  web:
    build: ./web
    expose: ["8080"]
  shared:${serving('bob shared')}
`;
    const b = await composeApp(bob, await stackArchive(bobCompose, 'bob web\n'), 'bob web\n');
    const plain = await createArchiveApp(ts, alice, (await busyboxArchive({ body: 'plain\n' })).archive);
    ids.push({ id: plain.id, token: alice });
    assert.equal((await deployAndWait(ts, alice, plain.id)).status, 200);

    const aWeb = await serviceContainer(a.id, 'web');
    const aVault = await serviceContainer(a.id, 'vault');
    const vault = await docker.getContainer(aVault.id).inspect();
    const vaultAddresses = Object.values(vault.NetworkSettings.Networks).map((n) => n.IPAddress).filter((ip) => ip !== '');
    assert.equal(vaultAddresses.length, 3, "the vault sits on its set's network, the apps network and its linked database's network");
    const dbAddress = Object.values((await databaseContainer(db.json.id))!.NetworkSettings.Networks)[0]!.IPAddress;

    // Control: inside alice's set the same attempts succeed, so a failure below is the isolation, not the probe.
    const wget = (container: string, url: string): Promise<string> => execIn(docker, container, ['sh', '-c', `wget -q -T 3 -O - ${url} 2>&1; echo "exit=$?"`]);
    assert.match(await wget(aWeb.id, 'http://vault/'), /alice vault secret\nexit=0/);
    assert.match(await wget(aWeb.id, 'http://shared/'), /alice shared\nexit=0/);
    assert.equal(await canConnect(aWeb.id, 'alice-cache', 6379), true, "alice's set reaches her linked database");

    const attackers = [
      { who: "bob's web", id: (await serviceContainer(b.id, 'web')).id },
      { who: "bob's internal service", id: (await serviceContainer(b.id, 'shared')).id },
      { who: "alice's other deployment", id: (await serviceContainer(plain.id, 'web')).id },
    ];
    for (const attacker of attackers) {
      // By service name: the name is not in its DNS at all.
      assert.match(await wget(attacker.id, 'http://vault/'), /wget: bad address 'vault'\nexit=1/, `${attacker.who}: vault`);
      // By the database's host name: likewise.
      assert.match(await wget(attacker.id, 'http://alice-cache:6379/'), /wget: bad address 'alice-cache'\nexit=1/, `${attacker.who}: alice-cache`);
      // By the container's engine name (the apps network's DNS knows it): the name resolves, the connection never opens.
      const byName = await wget(attacker.id, `http://${aVault.name}/`);
      assert.doesNotMatch(byName, /alice/, `${attacker.who}: by container name`);
      assert.match(byName, /wget: download timed out\nexit=1|wget: bad address '[^']+'\nexit=1/, `${attacker.who}: by container name`);
      // By address, on each of the vault's networks and the database's: nothing answers.
      for (const address of [...vaultAddresses, dbAddress]) {
        const out = await wget(attacker.id, `http://${address}/`);
        assert.doesNotMatch(out, /alice/, `${attacker.who}: ${address}`);
        assert.match(out, /wget: download timed out\nexit=1|wget: can't connect to remote host \([^)]+\): (No route to host|Connection refused|Network unreachable)\nexit=1/, `${attacker.who}: ${address}: ${out}`);
      }
      assert.equal(await canConnect(attacker.id, dbAddress, 6379), false, `${attacker.who}: the database's port`);
    }
    // A name both sets use resolves, in each, to its own service only.
    assert.match(await wget(attackers[0]!.id, 'http://shared/'), /^bob shared\nexit=0/);
    assert.match(await wget(attackers[1]!.id, 'http://shared/'), /^bob shared\nexit=0/);
  });

  test('a named volume keeps its data across a release, a failed release and a rollback; one writer at a time', async () => {
    const s = await composeApp(alice, await stackArchive(storeCompose('one'), 'store one\n'), 'store one\n');
    const history = async (): Promise<string> => runIn((await serviceContainer(s.id, 'store')).id, ['cat', '/data/history']);
    assert.equal(await history(), 'one\n');

    // Start-first would run two stores on /data at once: the new one would find the lock and exit ("two writers").
    await redeploy(alice, s.id, s.subdomain, await stackArchive(storeCompose('two'), 'store two\n'), 'store two\n');
    assert.equal(await history(), 'one\ntwo\n', "the new set's store sees the old set's data");
    const log = (await ts.request('GET', `/api/v1/deployments/${s.id}/builds?limit=1`, { token: alice })).json[0];
    const text = (await ts.request('GET', `/api/v1/deployments/${s.id}/builds/${log.id}/logs`, { token: alice })).text;
    assert.match(text, /==> stopping \S+-store-\S+: it holds the volume the next service mounts \(one writer at a time\)/);

    const first = (await ts.request('GET', `/api/v1/deployments/${s.id}/builds?limit=2`, { token: alice })).json[1].id as string;
    const rolled = await ts.request('POST', `/api/v1/deployments/${s.id}/rollback`, { token: alice, body: { build_id: first } });
    assert.ok(rolled.status < 300, rolled.text);
    await eventually(async () => ((await appRequest(ts.port, s.subdomain)).body === 'store one\n' ? true : undefined), 60_000, 'the first set served again');
    assert.equal(await history(), 'one\ntwo\none\n');

    // A release that fails after its store took the volume: the store is stopped cleanly and the live one runs again, on the same data.
    assert.equal((await upload(ts, alice, s.id, await stackArchive(storeCompose('three', ['CMD', 'false']), 'store three\n'))).status, 200);
    const failed = await deployAndWait(ts, alice, s.id);
    assert.equal(failed.status, 500, failed.text);
    assert.match(failed.json.message, /service "web" is unhealthy/);
    assert.equal((await appRequest(ts.port, s.subdomain)).body, 'store one\n');
    const store = await eventually(async () => {
      const list = (await containersOf(s.id)).filter((c) => c.name.includes('-store-'));
      return list.length === 1 && list[0]!.running ? list[0] : undefined;
    }, 30_000, "the live set's store running again, the failed set's gone");
    assert.equal(store.labels['dev.slipway.build'], first);
    assert.equal(await runIn(store.id, ['cat', '/data/history']), 'one\ntwo\none\nthree\none\n');
  });
});
