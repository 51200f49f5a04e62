// Requests for the Node process (API, dashboard, pages) reach it over one connection per visitor connection, on both data planes: HAProxy keeps its connection to Node alive with the visitor's.
import assert from 'node:assert/strict';
import http from 'node:http';
import { after, before, describe, it } from 'node:test';
import { PLANES, startPlane, type PlaneUnderTest } from '../helpers/planes.js';

/** One keep-alive GET on `agent` to a host no app has (so Node answers it). */
function get(port: number, agent: http.Agent): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = http.get({ host: '127.0.0.1', port, path: '/api/v1/deployments', headers: { host: `127.0.0.1:${port}` }, agent }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => resolve(body));
      res.on('error', reject);
    });
    req.setTimeout(20_000, () => req.destroy(new Error('no answer within 20 s')));
    req.on('error', reject);
  });
}

for (const kind of PLANES) {
  describe(`connections to Node (${kind} plane)`, () => {
    let plane: PlaneUnderTest;
    before(async () => {
      plane = await startPlane(kind, 'apps.test');
    });
    after(async () => {
      await plane.close();
    });

    it('each visitor connection, however many requests it carries, is one connection to Node (also after earlier visitors left)', async () => {
      const visitors = 3;
      const requests = 20;
      const before = plane.nodeConnections();
      for (let v = 0; v < visitors; v += 1) {
        // One socket per visitor: every request of the visitor goes over the same connection.
        const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
        const sockets = new Set<unknown>();
        agent.on('free', (socket) => sockets.add(socket));
        for (let i = 0; i < requests; i += 1) assert.equal(await get(plane.port, agent), 'api');
        assert.equal(sockets.size, 1, 'the visitor kept its one connection');
        agent.destroy();
      }
      assert.equal(plane.nodeConnections() - before, visitors, `${visitors * requests} requests over ${visitors} visitor connections`);
    });
  });
}
