// A client that goes away mid-request (a scraper's timeout, a closed tab) is not an internal error in the server's log.
import assert from 'node:assert/strict';
import net from 'node:net';
import { after, before, describe, test } from 'node:test';
import { busyboxArchive, createArchiveApp, deployAndWait, eventually } from '../helpers/apps.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

describe('client aborts', () => {
  let s: TestServer;
  let user: Awaited<ReturnType<TestServer['newUser']>>;
  let app: { id: string; subdomain: string };
  const logged: string[] = [];

  before(async () => {
    s = await startTestServer({}, undefined, { log: (level, msg) => logged.push(`${level}: ${msg}`) });
    user = await s.newUser('aborts');
    const { archive } = await busyboxArchive();
    app = await createArchiveApp(s, user.token, archive);
    const deployed = await deployAndWait(s, user.token, app.id);
    assert.equal(deployed.status, 200, deployed.text);
  });
  after(async () => {
    await s?.close();
  });

  /** Sends a GET and closes the connection once the server has started on it (before the answer). */
  const abandon = (urlPath: string, token: string): Promise<void> =>
    new Promise((resolve, reject) => {
      const socket = net.connect(s.port, '127.0.0.1', () => {
        socket.write(`GET ${urlPath} HTTP/1.1\r\nHost: 127.0.0.1:${s.port}\r\nAuthorization: Bearer ${token}\r\n\r\n`);
      });
      let answered = false;
      socket.on('data', () => (answered = true));
      socket.on('error', reject);
      // The engine's stats sample takes about a second: 100 ms in, the request is waiting on it.
      setTimeout(() => {
        socket.destroy();
        resolve();
        if (answered) reject(new Error('answered before the abort: nothing was tested'));
      }, 100);
    });

  test('the attack: scrapers that give up on /metrics and …/metrics leave no internal error in the log', async () => {
    for (let i = 0; i < 5; i += 1) {
      await abandon(`/api/v1/deployments/${app.id}/metrics`, user.token);
      await abandon('/metrics', s.adminToken);
    }
    // The abandoned requests have ended on the server when a later one is answered (one per turn, in order),
    // and the engine calls they started have been aborted.
    await eventually(async () => ((await s.request('GET', `/api/v1/deployments/${app.id}/metrics`, { token: user.token })).status === 200 ? true : undefined), 60_000, 'a later answer');
    assert.deepEqual(logged.filter((line) => line.startsWith('error')), []);
  });
});
