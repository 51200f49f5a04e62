// Certificates across three real instances on one PostgreSQL (decisions §15, §8): the ACME CA (pebble) validates on an instance other than the one that ordered; issued once, served by every edge.
import assert from 'node:assert/strict';
import http from 'node:http';
import tls from 'node:tls';
import { after, before, describe, test } from 'node:test';
import { busyboxArchive, createArchiveApp, deployAndWait, eventually, testEngine } from '../helpers/apps.js';
import { ensureBusyboxImage } from '../helpers/busybox-image.js';
import { startCluster, type Cluster, type Instance } from '../helpers/instances.js';
import { freePort } from '../helpers/net.js';
import { startPebble, type Pebble } from '../helpers/pebble.js';
import { dropClusterDatabase, testDatabase } from '../helpers/server.js';

const DOMAIN = 'slipway.test';

interface Secured {
  status: number;
  body: string;
  fingerprint: string;
}

/** A GET over TLS to 127.0.0.1:port with SNI and Host `servername`, the chain verified against `ca`. */
function tlsGet(port: number, servername: string, ca: string): Promise<Secured> {
  return new Promise((resolve, reject) => {
    const socket = tls.connect({ host: '127.0.0.1', port, servername, ca, timeout: 10_000 }, () => {
      const fingerprint = socket.getPeerCertificate().fingerprint256;
      const req = http.request({ createConnection: () => socket, path: '/', headers: { host: servername, connection: 'close' }, timeout: 10_000 }, (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (body += chunk));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body, fingerprint }));
      });
      req.on('error', reject);
      req.end();
    });
    socket.on('timeout', () => socket.destroy(new Error('timeout')));
    socket.on('error', reject);
  });
}

/** How many times `text` occurs in `haystack`. */
const occurrences = (haystack: string, text: string): number => haystack.split(text).length - 1;

describe('certificates across instances on one PostgreSQL', async () => {
  const database = await testDatabase();
  // The SQLite pass has no PostgreSQL: scripts/test.mjs runs test/ha in its PostgreSQL pass only.
  if (database === undefined) return;
  let pebble: Pebble;
  let cluster: Cluster;
  let root: string;
  let httpsPorts: number[];
  let app: { id: string; subdomain: string };
  let appBody: string;

  before(async () => {
    await ensureBusyboxImage(testEngine());
    const ports = [await freePort(), await freePort(), await freePort()];
    httpsPorts = [await freePort(), await freePort(), await freePort()];
    // The CA validates every HTTP-01 challenge on instance 0's plain port (every name resolves to 127.0.0.1).
    pebble = await startPebble(ports[0] ?? 0);
    root = await pebble.issuingRoot();
    cluster = await startCluster(
      database.url,
      3,
      { SLIPWAY_DOMAIN: DOMAIN, SLIPWAY_ACME_DIRECTORY_URL: pebble.directoryUrl, SLIPWAY_ACME_CA_FILE: pebble.caFile, SLIPWAY_ACME_EMAIL: 'ops@slipway.test' },
      httpsPorts.map((port) => ({ SLIPWAY_HTTPS_PORT: String(port) })),
      ports,
    );
    const built = await busyboxArchive({ body: 'secured everywhere\n' });
    appBody = built.body;
    const [, a] = cluster.instances as [Instance, Instance, Instance];
    app = await createArchiveApp(a, cluster.adminToken, built.archive);
    const deployed = await deployAndWait(a, cluster.adminToken, app.id);
    assert.equal(deployed.status, 200, deployed.text);
  });
  after(async () => {
    await cluster?.close();
    await pebble?.stop();
    await dropClusterDatabase(database);
  });

  const output = (): string => cluster.instances.map((i) => `--- ${i.name}\n${i.process?.output() ?? ''}`).join('\n');

  /** Waits until every instance's TLS port presents a certificate for `host` chaining to pebble's root; returns each one's answer. */
  const securedEverywhere = async (host: string, status?: number): Promise<Secured[]> => {
    const answers: Secured[] = [];
    for (const [index, instance] of cluster.instances.entries()) {
      const port = httpsPorts[index] ?? 0;
      answers.push(
        await eventually(() => tlsGet(port, host, root).then((x) => (status === undefined || x.status === status ? x : undefined), () => undefined), 90_000, `a certificate for ${host} on ${instance.name}\n${pebble.output().slice(-2000)}\n${output().slice(-6000)}`),
      );
    }
    return answers;
  };

  test("the app's subdomain and the API host, wanted by all three instances at once, are each issued once and served by every edge", async () => {
    for (const host of [`${app.subdomain}.${DOMAIN}`, DOMAIN]) {
      const answers = await securedEverywhere(host);
      assert.equal(new Set(answers.map((x) => x.fingerprint)).size, 1, `the same certificate for ${host} on every edge`);
      assert.equal(occurrences(output(), `certificate for ${host} obtained`), 1, `${host} issued once:\n${output().slice(-6000)}`);
    }
  });

  test("a custom domain added on one instance while the CA validates on another: one certificate, issued once, served by all three edges", async () => {
    const [, a, c] = cluster.instances as [Instance, Instance, Instance];
    const host = 'shop.example.com';
    // Added on instance 1 (every instance idle now): it orders; pebble fetches the challenge from instance 0, which reads it from the database.
    const added = await a.request('POST', `/api/v1/deployments/${app.id}/domains`, { token: cluster.adminToken, body: { hostname: host } });
    assert.equal(added.status, 201, added.text);
    const answers = await securedEverywhere(host, 200);
    for (const answer of answers) assert.deepEqual([answer.status, answer.body], [200, appBody]);
    assert.equal(new Set(answers.map((x) => x.fingerprint)).size, 1, 'the same certificate on every edge');
    const obtained = `certificate for ${host} obtained`;
    assert.equal(occurrences(output(), obtained), 1, `issued once:\n${output().slice(-6000)}`);
    const by = cluster.instances.filter((i) => (i.process?.output() ?? '').includes(obtained)).map((i) => i.name);
    const mentions = cluster.instances.map((i) => `${i.name}: ${(i.process?.output() ?? '').split('\n').filter((line) => line.includes(host)).join('\n')}`).join('\n');
    assert.deepEqual(by, [a.name], `by the instance it was added on, not the one the CA validated on\n${mentions}`);
    const listed = await c.request('GET', `/api/v1/deployments/${app.id}/domains`, { token: cluster.adminToken });
    assert.equal(listed.status, 200, listed.text);
    assert.equal((listed.json as Array<{ hostname: string; tls_status: string }>).find((d) => d.hostname === host)?.tls_status, 'active');
  });
});
