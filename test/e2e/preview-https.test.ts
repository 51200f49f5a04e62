// HTTPS for previews (decisions §17, §8): a preview gets its certificate from a real ACME CA (pebble on loopback) like any app, and loses it when its pull request closes.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import http from 'node:http';
import path from 'node:path';
import tls from 'node:tls';
import { after, before, describe, test } from 'node:test';
import { openDatabase } from '../../src/db/database.js';
import { eventually } from '../helpers/apps.js';
import { BUSYBOX_IMAGE, ensureBusyboxImage } from '../helpers/busybox-image.js';
import { testEngine } from '../helpers/apps.js';
import { startGitServer, type GitServer } from '../helpers/git-server.js';
import { freePort } from '../helpers/net.js';
import { startPebble, type Pebble } from '../helpers/pebble.js';
import { pullRequestBody, pullRequestHeaders, type PullRequestSpec } from '../helpers/pull-requests.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

/** A GET over TLS with SNI and Host `servername`, the chain checked against `ca`. */
function tlsGet(port: number, servername: string, ca: string): Promise<{ status: number; body: string; authorized: boolean }> {
  return new Promise((resolve, reject) => {
    const socket = tls.connect({ host: '127.0.0.1', port, servername, ca, timeout: 10_000 }, () => {
      const authorized = socket.authorized;
      const req = http.request({ createConnection: () => socket, path: '/', headers: { host: servername, connection: 'close' }, timeout: 10_000 }, (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (body += chunk));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body, authorized }));
      });
      req.on('error', reject);
      req.end();
    });
    socket.on('timeout', () => socket.destroy(new Error('timeout')));
    socket.on('error', reject);
  });
}

describe('HTTPS for a preview (pebble on loopback)', () => {
  const DOMAIN = 'slipway.test';
  let pebble: Pebble;
  let git: GitServer;
  let s: TestServer;
  let root: string;

  before(async () => {
    await ensureBusyboxImage(testEngine());
    const httpPort = await freePort();
    pebble = await startPebble(httpPort);
    git = await startGitServer();
    s = await startTestServer({
      SLIPWAY_PORT: String(httpPort),
      SLIPWAY_DOMAIN: DOMAIN,
      SLIPWAY_HTTPS_PORT: '0',
      SLIPWAY_ACME_DIRECTORY_URL: pebble.directoryUrl,
      SLIPWAY_ACME_CA_FILE: pebble.caFile,
      SLIPWAY_ACME_EMAIL: 'ops@slipway.test',
      SLIPWAY_DATA_PLANE: 'node',
    });
    root = await pebble.issuingRoot();
  });
  after(async () => {
    await s?.close();
    await git?.close();
    await pebble?.stop();
  });

  test('an opened pull request is served over HTTPS at <subdomain>-pr-<n>; closing it drops the certificate with the route', async () => {
    const httpsPort = s.server.httpsPort;
    assert.ok(httpsPort !== undefined);
    const { token } = await s.newUser('pv-https');
    const repo = `pvtls-${crypto.randomUUID()}`;
    const dockerfile = [`FROM ${BUSYBOX_IMAGE}`, 'COPY index.html /www/index.html', 'EXPOSE 8080', 'CMD ["/bin/sh", "-c", "exec httpd -f -p $PORT -h /www"]', ''].join('\n');
    const { url } = await git.createRepo(repo, { Dockerfile: dockerfile, 'index.html': 'main\n' });
    const subdomain = `pvtls${crypto.randomBytes(3).toString('hex')}`;
    const created = await s.request('POST', '/api/v1/deployments', { token, body: { name: repo, subdomain, repo_url: url, branch: 'main', previews: true } });
    assert.equal(created.status, 201, created.text);
    const id = created.json.id as string;
    const secret = (await s.request('POST', `/api/v1/deployments/${id}/webhook`, { token })).json.secret as string;
    const deliver = (spec: PullRequestSpec) => {
      const body = pullRequestBody('github', spec);
      return s.request('POST', `/api/v1/hooks/${id}`, { raw: body, headers: pullRequestHeaders('github', secret, body) });
    };
    await git.commit(repo, { Dockerfile: dockerfile, 'index.html': 'preview over https\n' }, { branch: 'feature' });
    const sha = await git.setRef(repo, 'refs/pull/2/head');
    const opened = await deliver({ action: 'opened', number: 2, headSha: sha });
    assert.equal(opened.status, 202, opened.text);
    const host = `${subdomain}-pr-2.${DOMAIN}`;
    const served = await eventually(
      async () => {
        const res = await tlsGet(httpsPort, host, root).catch(() => undefined);
        return res?.authorized === true && res.status === 200 ? res : undefined;
      },
      180_000,
      `${host} over HTTPS with a certificate from the CA`,
    );
    assert.equal(served.body, 'preview over https\n');
    const preview = (await s.request('GET', `/api/v1/deployments/${id}/previews/2`, { token })).json;
    assert.ok(String(preview.url).includes(`//${host}`), preview.url);

    const closed = await deliver({ action: 'closed', number: 2, headSha: sha, merged: true });
    assert.equal(closed.status, 200, closed.text);
    // No certificate is presented for the name any more, and none is kept.
    await eventually(async () => ((await tlsGet(httpsPort, host, root).then(() => false, () => true)) ? true : undefined), 60_000, 'the handshake for the closed preview to fail');
    await s.server.close();
    const db = await openDatabase({ file: path.join(s.dataDir, 'slipway.db'), url: s.config.databaseUrl });
    try {
      const left = await db.selectFrom('certificates').select('hostname').where('hostname', '=', host).execute();
      assert.deepEqual(left, [], 'the certificate record is gone');
    } finally {
      await db.destroy();
    }
  });
});
