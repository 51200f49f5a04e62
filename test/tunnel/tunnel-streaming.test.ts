// Tunnels streaming large bodies end to end: a 100 MiB upload and download with bounded memory, a paused visitor stalling the app.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { once } from 'node:events';
import { request, type IncomingMessage } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, it } from 'node:test';
import { patternSha, patternStream, startLocalApp, type LocalApp } from '../helpers/tunnel-app.js';
import { DOMAIN, startClient, startStack, type Client, type Stack } from '../helpers/tunnel-stack.js';
import { MiB, peakRssGrowth, visit, visitorAgent, type Visit } from '../helpers/tunnel-visitors.js';

let app: LocalApp;
before(async () => {
  app = await startLocalApp();
});
after(async () => {
  visitorAgent.destroy();
  await app.close();
});

// Visitors are served through the front door's raw pipe (the public port, HAProxy's hand-off) and
// through the HTTP server (the Node plane's TLS port): the same behaviour either way.
// Behind HAProxy, a tunnel's visitors always reach Node through the front door (there is no TLS port of Node's own).
const VISITOR_PATHS = [['raw pipe', false, 'node'], ['HTTP server', true, 'node'], ['raw pipe', false, 'haproxy']] as const;
for (const [path, httpOnly, plane] of VISITOR_PATHS) {
  describe(`tunnel: serving visitors, large bodies (${path}, ${plane} data plane)`, () => {
    let stack: Stack;
    let client: Client;
    let name: string;
  
    before(async () => {
      stack = await startStack({ plane, httpOnly });
      const created = stack.authority.addKey('user-a');
      client = startClient(stack, { apiKey: created.key, port: app.port, subdomain: 'demo' });
      const ready = await client.connected();
      name = ready.subdomain;
    });
    after(async () => {
      await client.stop();
      await stack.close();
    });
  
    it('streams a 100 MiB upload with bounded memory', async (t) => {
      const total = 100 * MiB;
      let answer: Visit | undefined;
      const growth = await peakRssGrowth(async () => {
        answer = await visit(stack.port, name, '/upload', { method: 'POST', body: patternStream(total) });
      });
      assert.equal(answer?.status, 200);
      assert.deepEqual(JSON.parse(answer?.body.toString() ?? '{}'), { bytes: total, sha256: patternSha(total) });
      t.diagnostic(`peak RSS growth ${(growth / MiB).toFixed(1)} MiB`);
      assert.ok(growth < 60 * MiB, `RSS grew ${(growth / MiB).toFixed(1)} MiB`);
    });
  
    it('streams a 100 MiB download with bounded memory, and a paused visitor stalls the app', async (t) => {
      const total = 100 * MiB;
      let received = 0;
      let stalledAt = -1;
      let stalledLater = -1;
      const hash = createHash('sha256');
      const growth = await peakRssGrowth(async () => {
        const req = request({ host: '127.0.0.1', port: stack.port, path: `/download?bytes=${total}`, headers: { host: `${name}.${DOMAIN}` }, agent: visitorAgent });
        req.end();
        const [res] = (await once(req, 'response')) as [IncomingMessage];
        assert.equal(res.statusCode, 200);
        assert.equal(res.headers['content-length'], String(total));
        let paused = false;
        res.on('data', (chunk: Buffer) => {
          received += chunk.length;
          hash.update(chunk);
          if (!paused && received > 10 * MiB) {
            // A visitor that stops reading: back-pressure must reach the app, which stops writing.
            paused = true;
            res.pause();
            void (async () => {
              // Stalled: the app wrote nothing for 300 ms (waited for up to 20 s: buffers fill slowly on a loaded machine).
              const deadline = Date.now() + 20_000;
              do {
                stalledAt = app.written;
                await sleep(300);
                stalledLater = app.written;
              } while (stalledAt !== stalledLater && Date.now() < deadline);
              res.resume();
            })();
          }
        });
        await once(res, 'end');
      });
      assert.equal(received, total);
      assert.equal(hash.digest('hex'), patternSha(total));
      assert.equal(stalledAt, stalledLater, 'the app kept writing while the visitor was paused');
      assert.ok(stalledAt < total, 'the app finished writing while the visitor was paused');
      t.diagnostic(`peak RSS growth ${(growth / MiB).toFixed(1)} MiB`);
      assert.ok(growth < 60 * MiB, `RSS grew ${(growth / MiB).toFixed(1)} MiB`);
    });
  });
}
