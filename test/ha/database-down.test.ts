// The database unreachable (decisions §15): /healthz and API calls answer 503 with the reason, apps keep serving; back when it is.
import assert from 'node:assert/strict';
import net from 'node:net';
import { after, describe, test } from 'node:test';
import { appRequest, busyboxArchive, createArchiveApp, deployAndWait, eventually } from '../helpers/apps.js';
import { startTestServer, testDatabase, type TestServer } from '../helpers/server.js';

/** A TCP relay to PostgreSQL that the test can cut (every connection dropped, new ones refused) and restore. */
async function relay(target: URL): Promise<{ port: number; cut(): Promise<void>; restore(): Promise<void>; close(): Promise<void> }> {
  const sockets = new Set<net.Socket>();
  let server: net.Server | undefined;
  let port = 0;
  const listen = async (): Promise<void> => {
    server = net.createServer((client) => {
      const upstream = net.connect(Number(target.port || 5432), target.hostname);
      for (const s of [client, upstream]) {
        sockets.add(s);
        s.on('close', () => sockets.delete(s));
        s.on('error', () => s.destroy());
      }
      client.pipe(upstream).pipe(client);
    });
    await new Promise<void>((resolve) => server?.listen(port, '127.0.0.1', () => resolve()));
    port = (server.address() as net.AddressInfo).port;
  };
  const cut = async (): Promise<void> => {
    const closed = new Promise<void>((resolve) => (server === undefined ? resolve() : server.close(() => resolve())));
    for (const s of sockets) s.destroy();
    await closed;
    server = undefined;
  };
  await listen();
  return { port, cut, restore: listen, close: cut };
}

describe('the database unreachable', async () => {
  const database = await testDatabase();
  // The SQLite pass has no PostgreSQL: scripts/test.mjs runs test/ha in its PostgreSQL pass only.
  if (database === undefined) return;
  const target = new URL(database.url);
  const pgRelay = await relay(target);
  let s: TestServer | undefined;
  after(async () => {
    await s?.close();
    await pgRelay.close();
    await database.drop();
  });

  test('/healthz and API calls answer 503 with the reason while apps keep serving; all answers again once it is back', async () => {
    const viaRelay = new URL(database.url);
    viaRelay.port = String(pgRelay.port);
    s = await startTestServer({ SLIPWAY_DATABASE_URL: viaRelay.href });
    const user = await s.newUser('dbdown');
    const app = await createArchiveApp(s, user.token, (await busyboxArchive({ body: 'still here\n' })).archive);
    assert.equal((await deployAndWait(s, user.token, app.id)).status, 200);

    await pgRelay.cut();
    const health = await eventually(async () => {
      const res = await s?.request('GET', '/healthz');
      return res?.status === 503 ? res : undefined;
    }, 30_000, '/healthz to answer 503');
    assert.equal(health.json.checks.database.ok, false);
    assert.match(health.json.checks.database.detail, /unreachable|ECONNREFUSED|connect/i);
    const api = await s.request('GET', '/api/v1/deployments', { token: user.token });
    assert.equal(api.status, 503, api.text);
    assert.equal(api.json.error, 'unavailable');
    assert.match(api.json.message, /database is unreachable/);
    // The edge serves from its last routes.
    const served = await appRequest(s.port, app.subdomain);
    assert.deepEqual([served.status, served.body], [200, 'still here\n']);

    await pgRelay.restore();
    await eventually(async () => ((await s?.request('GET', '/healthz'))?.status === 200 ? true : undefined), 60_000, '/healthz to answer 200 again');
    assert.equal((await s.request('GET', '/api/v1/deployments', { token: user.token })).status, 200);
  });
});
