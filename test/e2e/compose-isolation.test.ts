// End to end on the real engine, as an attack: from inside another deployment's containers, a compose set's services, its linked database and its containers are neither resolved nor reached.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { after, before, describe, test } from 'node:test';
import { LABEL_DEPLOYMENT, LABEL_MANAGED, type ContainerInfo } from '../../src/runtime/engine.js';
import { appRequest, busyboxArchive, createArchiveApp, deployAndWait, testEngine, uniqueSubdomain, upload } from '../helpers/apps.js';
import { BUSYBOX_IMAGE } from '../helpers/busybox-image.js';
import { composeArchive } from '../helpers/compose-stack.js';
import { STAND_IN_IMAGES, canConnect, databaseContainer, docker, waitForStatus } from '../helpers/databases.js';
import { execIn } from '../helpers/engine-exec.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

/** A busybox service that serves `text` on port 80 of its set's network. */
const serving = (text: string): string => `
    image: ${BUSYBOX_IMAGE}
    command: ["sh", "-c", "mkdir -p /s && echo '${text}' > /s/index.html && exec httpd -f -p 80 -h /s"]
    expose: ["80"]`;

/** What busybox nc prints when nothing answers: nothing (the connection timed out), or why it could not connect. */
const NO_ANSWER = /^(nc: timed out\n|nc: can't connect to remote host \([^)]+\): (Connection refused|No route to host|Network is unreachable)\n)?exit=1\n$/;

describe('compose sets: isolation between deployments', () => {
  let ts: TestServer;
  let alice: string;
  let bob: string;
  const engine = testEngine();
  const ids: Array<{ id: string; token: string }> = [];

  /** The running container of `service` in the deployment's set (the web one is the published one). */
  const serviceContainer = async (id: string, service: string): Promise<ContainerInfo> => {
    const list = (await engine.listContainers({ [LABEL_MANAGED]: 'true', [LABEL_DEPLOYMENT]: id })).filter((c) => c.running);
    const found = service === 'web' ? list.find((c) => c.hostPort !== null) : list.find((c) => c.name.includes(`-${service}-`));
    assert.ok(found !== undefined, `${service} of ${id}: ${list.map((c) => c.name).join(', ')}`);
    return found;
  };
  /** An HTTP request from inside `container` by busybox nc (this static busybox's wget crashes resolving names): its output and exit code. */
  const dial = (container: string, host: string, port = 80): Promise<string> =>
    execIn(docker, container, ['sh', '-c', 'printf "GET / HTTP/1.0\\r\\n\\r\\n" | nc -w 3 "$0" "$1" 2>&1; echo "exit=$?"', host, String(port)]);

  /** The attacker's networks and routes, the vault's networks, and the host's isolation rules: said when an attack got through. */
  const whereItWent = async (attacker: string, vault: Awaited<ReturnType<ReturnType<typeof docker.getContainer>['inspect']>>): Promise<string> => {
    const run = (file: string, args: string[]): string => {
      try {
        return execFileSync(file, args, { encoding: 'utf8' });
      } catch (err) {
        return String(err);
      }
    };
    const networks = async (id: string) => Object.entries((await docker.getContainer(id).inspect()).NetworkSettings.Networks).map(([name, n]) => `${name} ${n.IPAddress} gw ${n.Gateway}`);
    return [
      `attacker: ${(await networks(attacker)).join('; ')}`,
      `attacker's routes: ${await execIn(docker, attacker, ['ip', 'route']).catch((err: unknown) => String(err))}`,
      `vault: ${(await networks(vault.Id)).join('; ')}`,
      run('iptables', ['-w', '5', '-S', 'DOCKER-ISOLATION-STAGE-1']),
      run('iptables', ['-w', '5', '-S', 'FORWARD']),
      run('iptables', ['-w', '5', '-S', 'DOCKER-USER']),
      run('iptables', ['-w', '5', '-t', 'mangle', '-S', 'SLIPWAY-INTERNAL']),
      `bridge-nf-call-iptables: ${run('cat', ['/proc/sys/net/bridge/bridge-nf-call-iptables'])}`,
    ].join('\n');
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

  /** Creates a compose deployment for `token` (`link`: a database linked first), deploys `compose` and checks its web serves `body`. */
  async function composeApp(token: string, compose: string, body: string, link?: string): Promise<string> {
    const subdomain = uniqueSubdomain('iso');
    const created = await ts.request('POST', '/api/v1/deployments', { token, body: { name: subdomain, subdomain, source_type: 'archive', compose_path: 'compose.yaml' } });
    assert.equal(created.status, 201, created.text);
    const id = created.json.id as string;
    ids.push({ id, token });
    if (link !== undefined) assert.equal((await ts.request('POST', `/api/v1/deployments/${id}/databases`, { token, body: { database_id: link, env: 'CACHE_URL' } })).status, 201);
    assert.equal((await upload(ts, token, id, await composeArchive(compose, body))).status, 200);
    const res = await deployAndWait(ts, token, id);
    assert.equal(res.status, 200, res.text);
    assert.equal((await appRequest(ts.port, subdomain)).body, body);
    return id;
  }

  test("from inside another deployment's containers, a set's services, its database and its containers resolve to nothing or are not reached", async () => {
    const db = await ts.request('POST', '/api/v1/databases', { token: alice, body: { name: 'alice-cache', engine: 'redis' } });
    assert.equal(db.status, 201, db.text);
    // The attackers: bob's set (web and his own `shared`), and a plain app of alice's (another deployment, same owner); deployed together.
    const [b, plain] = await Promise.all([
      composeApp(bob, `
x-slipway: {web: web}
services:
  web: {build: ./web, expose: ["8080"]}
  shared:${serving('bob shared')}
`, 'bob web\n'),
      (async () => {
        const app = await createArchiveApp(ts, alice, (await busyboxArchive({ body: 'plain\n' })).archive);
        ids.push({ id: app.id, token: alice });
        assert.equal((await deployAndWait(ts, alice, app.id)).status, 200);
        return app;
      })(),
    ]);
    // The target: alice's set, with an internal `vault`, a `shared` of its own, linked to her redis.
    assert.equal((await waitForStatus(ts, alice, db.json.id)).status, 'running');
    const a = await composeApp(alice, `
x-slipway: {web: web}
services:
  web: {build: ./web, expose: ["8080"]}
  vault:${serving('alice vault secret')}
  shared:${serving('alice shared')}
`, 'alice web\n', db.json.id);

    const aWeb = await serviceContainer(a, 'web');
    const aVault = await serviceContainer(a, 'vault');
    const vault = await docker.getContainer(aVault.id).inspect();
    const vaultAddresses = Object.values(vault.NetworkSettings.Networks).map((n) => n.IPAddress).filter((ip) => ip !== '');
    assert.equal(vaultAddresses.length, 3, "the vault sits on its set's network, the apps network and its linked database's network");
    const dbAddress = Object.values((await databaseContainer(db.json.id))!.NetworkSettings.Networks)[0]!.IPAddress;

    // Control: from inside alice's set the same attempts succeed, so a failure below is the isolation, not the probe.
    assert.match(await dial(aWeb.id, 'vault'), /alice vault secret\nexit=0/);
    assert.match(await dial(aWeb.id, 'shared'), /alice shared\nexit=0/);
    assert.equal(await canConnect(aWeb.id, 'alice-cache', 6379), true, "alice's set reaches her linked database");

    const attackers = [
      { who: "bob's web", id: (await serviceContainer(b, 'web')).id },
      { who: "bob's internal service", id: (await serviceContainer(b, 'shared')).id },
      { who: "alice's other deployment", id: (await serviceContainer(plain.id, 'web')).id },
    ];
    // Each attacker on its own at the same time (most of a dial that nothing answers is nc's 3 s wait).
    await Promise.all(attackers.map(async (attacker) => {
      // By service name, and by the database's host name: not in its DNS at all.
      assert.equal(await dial(attacker.id, 'vault'), "nc: bad address 'vault'\nexit=1\n", `${attacker.who}: vault`);
      assert.equal(await dial(attacker.id, 'alice-cache', 6379), "nc: bad address 'alice-cache'\nexit=1\n", `${attacker.who}: alice-cache`);
      // By the container's engine name (the apps network's DNS knows container names): it may resolve; nothing answers.
      assert.match(await dial(attacker.id, aVault.name), NO_ANSWER, `${attacker.who}: by container name`);
      // By address, on each of the vault's networks, and the database's: nothing answers.
      for (const address of vaultAddresses) {
        const answer = await dial(attacker.id, address);
        // Seen once under a full suite's load (2026-11-29): the engine's isolation lapses while it creates any network; closed by the internal networks' guard (docs/decisions.md).
        assert.match(answer, NO_ANSWER, NO_ANSWER.test(answer) ? '' : `${attacker.who}: ${address}\n${await whereItWent(attacker.id, vault)}`);
      }
      assert.match(await dial(attacker.id, dbAddress, 6379), NO_ANSWER, `${attacker.who}: the database at ${dbAddress}`);
    }));
    // A name both sets use resolves, in bob's, to bob's own service only.
    for (const attacker of attackers.slice(0, 2)) {
      const own = await dial(attacker.id, 'shared');
      assert.match(own, /bob shared\nexit=0/);
      assert.doesNotMatch(own, /alice/);
    }
  });
});
