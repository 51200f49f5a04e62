// HTTPS end to end (decisions §8): certificates from a real ACME CA (pebble, HTTP-01 on loopback), SNI, 308, keys at rest, failures, the operator's certificate.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import tls from 'node:tls';
import { after, before, describe, test } from 'node:test';
import { busyboxArchive, createArchiveApp, deployAndWait, eventually } from '../helpers/apps.js';
import { freePort } from '../helpers/net.js';
import { makeLeaf, startPebble, type Pebble } from '../helpers/pebble.js';
import { PLANES } from '../helpers/planes.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

type User = Awaited<ReturnType<TestServer['newUser']>>;

interface Answer {
  status: number;
  body: string;
  headers: http.IncomingHttpHeaders;
}

/** A plain HTTP request to 127.0.0.1:port with the given Host. */
function plainRequest(port: number, host: string, urlPath = '/'): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, path: urlPath, headers: { host }, agent: false, timeout: 10_000 }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body, headers: res.headers }));
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', reject);
    req.end();
  });
}

/**
 * A GET over TLS to 127.0.0.1:port with SNI and Host `servername`, verifying the chain against `ca`;
 * resolves with the answer and the certificate the server presented.
 */
function tlsRequest(port: number, servername: string, ca: string, urlPath = '/'): Promise<Answer & { peer: tls.PeerCertificate; authorized: boolean }> {
  return new Promise((resolve, reject) => {
    const socket = tls.connect({ host: '127.0.0.1', port, servername, ca, timeout: 10_000 }, () => {
      const peer = socket.getPeerCertificate(true);
      const authorized = socket.authorized;
      const req = http.request(
        { createConnection: () => socket, path: urlPath, headers: { host: servername, connection: 'close' }, timeout: 10_000 },
        (res) => {
          let body = '';
          res.setEncoding('utf8');
          res.on('data', (chunk: string) => (body += chunk));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body, headers: res.headers, peer, authorized }));
        },
      );
      req.on('error', reject);
      req.end();
    });
    socket.on('timeout', () => socket.destroy(new Error('timeout')));
    socket.on('error', reject);
  });
}

/** Every file under `dir`, recursively. */
function filesUnder(dir: string): string[] {
  const out: string[] = [];
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) out.push(...filesUnder(full));
    else if (entry.isFile()) out.push(full);
  }
  return out;
}

for (const plane of PLANES) describe(`HTTPS with certificates from an ACME CA (pebble on loopback), ${plane} data plane`, () => {
  const DOMAIN = 'slipway.test';
  let pebble: Pebble;
  let s: TestServer;
  let user: User;
  let httpsPort: number;
  let root: string;
  let app: { id: string; subdomain: string };
  let appBody: string;

  before(async () => {
    const httpPort = await freePort();
    pebble = await startPebble(httpPort);
    s = await startTestServer({
      SLIPWAY_PORT: String(httpPort),
      SLIPWAY_DOMAIN: DOMAIN,
      SLIPWAY_HTTPS_PORT: '0',
      SLIPWAY_ACME_DIRECTORY_URL: pebble.directoryUrl,
      SLIPWAY_ACME_CA_FILE: pebble.caFile,
      SLIPWAY_ACME_EMAIL: 'ops@slipway.test',
      SLIPWAY_DATA_PLANE: plane,
    });
    assert.equal(s.server.dataPlane, plane);
    assert.ok(s.server.httpsPort !== undefined);
    httpsPort = s.server.httpsPort;
    root = await pebble.issuingRoot();
    user = await s.newUser('https');
    const { archive, body } = await busyboxArchive();
    appBody = body;
    app = await createArchiveApp(s, user.token, archive);
    const deployed = await deployAndWait(s, user.token, app.id);
    assert.equal(deployed.status, 200, deployed.text);
  });
  after(async () => {
    await s?.close();
    await pebble?.stop();
  });

  /** Waits until HTTPS with SNI `host` presents a certificate chaining to pebble's root. */
  const secured = (host: string, urlPath = '/'): Promise<Answer & { peer: tls.PeerCertificate; authorized: boolean }> =>
    eventually(
      async () => {
        const res = await tlsRequest(httpsPort, host, root, urlPath).catch(() => undefined);
        return res?.authorized === true ? res : undefined;
      },
      90_000,
      `a certificate for ${host}\n${pebble.output().slice(-2000)}`,
    );

  test("an app's subdomain gets a certificate at its first live release; HTTPS with its SNI reaches the app", async () => {
    const host = `${app.subdomain}.${DOMAIN}`;
    const res = await secured(host);
    assert.equal(res.status, 200);
    assert.equal(res.body, appBody);
    assert.equal(res.authorized, true, 'the chain verifies against pebble\'s root');
    assert.match(res.peer.subjectaltname ?? '', new RegExp(`DNS:${host.replaceAll('.', '\\.')}`));
    // Through TLS the app is told the visitor came over https.
    assert.ok(Date.parse(res.peer.valid_to) > Date.now() + 30 * 24 * 3_600_000);
  });

  test('the API host gets a certificate at start; the API answers over HTTPS', async () => {
    const res = await secured(DOMAIN, '/healthz');
    assert.equal(res.status, 200);
    assert.match(res.body, /"status"/);
  });

  test('a custom domain becomes tls_status active with its expiry, and serves the app through TLS', async () => {
    const host = `www-${process.pid}.example.org`;
    const added = await s.request('POST', `/api/v1/deployments/${app.id}/domains`, { token: user.token, body: { hostname: host } });
    assert.equal(added.status, 201, added.text);
    assert.ok(['pending', 'active'].includes(added.json.tls_status), added.text);
    const active = await eventually(
      async () => {
        const list = await s.request('GET', `/api/v1/deployments/${app.id}/domains`, { token: user.token });
        const domain = list.json.find((d: { hostname: string }) => d.hostname === host);
        return domain?.tls_status === 'active' ? domain : undefined;
      },
      90_000,
      `tls_status active for ${host}\n${pebble.output().slice(-2000)}`,
    );
    assert.equal(active.tls_error, null);
    assert.ok(Date.parse(active.certificate_expires_at) > Date.now());
    const res = await secured(host);
    assert.equal(res.status, 200);
    assert.equal(res.body, appBody);
    assert.equal(new Date(res.peer.valid_to).toISOString(), new Date(active.certificate_expires_at).toISOString());
  });

  test('once a host has a certificate, plain HTTP answers 308 to https:// (except ACME challenges); other hosts are served as before', async () => {
    const host = `${app.subdomain}.${DOMAIN}`;
    await secured(host);
    const redirected = await plainRequest(s.port, `${host}:${s.port}`, '/some/path?x=1');
    assert.equal(redirected.status, 308);
    assert.equal(redirected.headers.location, `https://${host}:${httpsPort}/some/path?x=1`);
    assert.equal((await plainRequest(s.port, DOMAIN, '/healthz')).status, 308, 'the API host too');
    const challenge = await plainRequest(s.port, host, '/.well-known/acme-challenge/unknown-token');
    assert.equal(challenge.status, 404, 'a challenge path is never redirected');
    // A name without a certificate (the API reached by address) is served over plain HTTP.
    const byAddress = await plainRequest(s.port, `127.0.0.1:${s.port}`, '/healthz');
    assert.equal(byAddress.status, 200);
    // An unknown name gets no certificate: the handshake fails, and nothing is recorded for it.
    await assert.rejects(tlsRequest(httpsPort, `nobody-${process.pid}.${DOMAIN}`, root));
    await assert.rejects(tlsRequest(httpsPort, `unknown-${process.pid}.example.net`, root));
  });

  test('a custom domain the CA cannot validate is failed with tls_error, and plain HTTP keeps serving it', async () => {
    const host = `unreachable-${process.pid}.example.org`;
    // The CA resolves this name to an address where nothing listens.
    await pebble.setAddress(host, '127.0.0.2');
    const added = await s.request('POST', `/api/v1/deployments/${app.id}/domains`, { token: user.token, body: { hostname: host } });
    assert.equal(added.status, 201, added.text);
    const failed = await eventually(
      async () => {
        const list = await s.request('GET', `/api/v1/deployments/${app.id}/domains`, { token: user.token });
        const domain = list.json.find((d: { hostname: string }) => d.hostname === host);
        return domain?.tls_status === 'failed' ? domain : undefined;
      },
      90_000,
      `tls_status failed for ${host}`,
    );
    assert.equal(typeof failed.tls_error, 'string');
    assert.ok(failed.tls_error.length > 0);
    assert.equal(failed.certificate_expires_at, null);
    const plain = await plainRequest(s.port, host);
    assert.equal(plain.status, 200, 'no certificate: no redirect, the app is served');
    assert.equal(plain.body, appBody);
    await assert.rejects(tlsRequest(httpsPort, host, root));
  });

  if (plane === 'haproxy') test('HAProxy terminates TLS: certificates are loaded over the runtime API without a reload, and again after HAProxy is killed', async () => {
    const host = `${app.subdomain}.${DOMAIN}`;
    const pid = s.server.haproxyPid();
    assert.ok(pid !== undefined);
    const fresh = `late-${process.pid}.example.org`;
    assert.equal((await s.request('POST', `/api/v1/deployments/${app.id}/domains`, { token: user.token, body: { hostname: fresh } })).status, 201);
    assert.equal((await secured(fresh)).body, appBody);
    assert.equal(s.server.haproxyPid(), pid, 'a certificate issued while serving needs no reload');
    process.kill(pid, 'SIGKILL');
    const next = await eventually(async () => {
      const now = s.server.haproxyPid();
      return now !== undefined && now !== pid ? now : undefined;
    }, 30_000, 'HAProxy to be started again');
    assert.notEqual(next, pid);
    for (const h of [host, fresh]) assert.equal((await secured(h)).body, appBody, h);
    assert.equal((await secured(DOMAIN, '/healthz')).status, 200);
  });

  test('removing a custom domain drops its certificate: its TLS handshake fails from then on', async () => {
    const host = `gone-${process.pid}.example.org`;
    const added = await s.request('POST', `/api/v1/deployments/${app.id}/domains`, { token: user.token, body: { hostname: host } });
    assert.equal(added.status, 201, added.text);
    assert.equal((await secured(host)).body, appBody);
    assert.equal((await s.request('DELETE', `/api/v1/deployments/${app.id}/domains/${added.json.id}`, { token: user.token })).status, 204);
    await eventually(async () => ((await tlsRequest(httpsPort, host, root).then(() => false, () => true)) ? true : undefined), 30_000, `the certificate of ${host} to be dropped`);
    await assert.rejects(tlsRequest(httpsPort, host, root));
  });

  test('private keys are not in plain text anywhere under the data directory', async () => {
    await secured(`${app.subdomain}.${DOMAIN}`);
    const suspicious: string[] = [];
    for (const file of filesUnder(s.dataDir)) {
      const text = fs.readFileSync(file).toString('latin1');
      if (/PRIVATE KEY/.test(text)) suspicious.push(file);
    }
    assert.deepEqual(suspicious, []);
    // And the keys the server holds do not appear in any file in any form (PEM body or DER).
    const held = await tlsKeyMaterial(`${app.subdomain}.${DOMAIN}`);
    for (const file of filesUnder(s.dataDir)) {
      const bytes = fs.readFileSync(file);
      for (const needle of held) assert.equal(bytes.includes(needle), false, `${path.basename(file)} holds key material`);
    }
  });

  /** Distinctive pieces of the private key behind a host's certificate, read back through the server's own store. */
  async function tlsKeyMaterial(host: string): Promise<Buffer[]> {
    const { DbCertificateStore } = await import('../../src/db/certificate-store.js');
    const { openDatabase } = await import('../../src/db/database.js');
    const { ValueCipher } = await import('../../src/secrets/value-cipher.js');
    const key = Buffer.from(fs.readFileSync(path.join(s.dataDir, 'secret.key'), 'utf8').trim(), 'base64');
    if (s.config.databaseUrl !== undefined) return [];
    const db = await openDatabase({ file: path.join(s.dataDir, 'slipway.db') });
    try {
      const record = await new DbCertificateStore(db, new ValueCipher(key)).get(host);
      assert.ok(record?.certificate !== undefined);
      const pem = record.certificate.keyPem;
      assert.match(pem, /PRIVATE KEY/);
      const der = crypto.createPrivateKey(pem).export({ type: 'pkcs8', format: 'der' });
      const body = pem.split('\n').filter((l) => !l.startsWith('-----')).join('');
      return [Buffer.from(body.slice(0, 40)), der.subarray(der.length - 32)];
    } finally {
      await db.destroy();
    }
  }
});

for (const plane of PLANES) describe(`HTTPS with the operator's certificate, ${plane} data plane`, () => {
  const DOMAIN = 'op.test';
  let dir: string;
  let s: TestServer;
  let user: User;
  let operatorPem: string;
  let pebble: Pebble;

  before(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'slipway-operator-cert-'));
    // A self-signed wildcard: the operator's own certificate for the domain, its apps and one more zone.
    const cert = await makeLeaf(dir, 'operator', [`DNS:${DOMAIN}`, `DNS:*.${DOMAIN}`, 'DNS:*.covered.example'], undefined);
    operatorPem = cert.certPem;
    const httpPort = await freePort();
    pebble = await startPebble(httpPort);
    s = await startTestServer({
      SLIPWAY_PORT: String(httpPort),
      SLIPWAY_DOMAIN: DOMAIN,
      SLIPWAY_HTTPS_PORT: '0',
      SLIPWAY_TLS_CERT_FILE: cert.certFile,
      SLIPWAY_TLS_KEY_FILE: cert.keyFile,
      SLIPWAY_ACME_DIRECTORY_URL: pebble.directoryUrl,
      SLIPWAY_ACME_CA_FILE: pebble.caFile,
      SLIPWAY_DATA_PLANE: plane,
    });
    user = await s.newUser('operator');
  });
  after(async () => {
    await s?.close();
    await pebble?.stop();
    if (dir !== undefined) fs.rmSync(dir, { recursive: true, force: true });
  });

  test('every host it covers is served with it (wildcards included) and redirected from HTTP; a custom domain it covers is active at once', async () => {
    const httpsPort = s.server.httpsPort ?? 0;
    const fingerprint = new crypto.X509Certificate(operatorPem).fingerprint256;
    const api = await tlsRequest(httpsPort, DOMAIN, operatorPem, '/healthz');
    assert.equal(api.status, 200);
    assert.equal(api.authorized, true);
    assert.equal(api.peer.fingerprint256, fingerprint);
    const sub = `opapp-${process.pid}`;
    const created = await s.request('POST', '/api/v1/deployments', { token: user.token, body: { name: sub, subdomain: sub, source_type: 'archive' } });
    assert.equal(created.status, 201, created.text);
    const appHost = await tlsRequest(httpsPort, `${sub}.${DOMAIN}`, operatorPem);
    assert.equal(appHost.peer.fingerprint256, fingerprint);
    assert.equal(appHost.status, 503, 'routed to the (never deployed) app through TLS');
    assert.equal((await plainRequest(s.port, `${sub}.${DOMAIN}`)).status, 308);
    // Two labels under the wildcard are not covered.
    await assert.rejects(tlsRequest(httpsPort, `a.b.${DOMAIN}`, operatorPem));

    const covered = `shop-${process.pid}.covered.example`;
    const added = await s.request('POST', `/api/v1/deployments/${created.json.id}/domains`, { token: user.token, body: { hostname: covered } });
    assert.equal(added.status, 201, added.text);
    assert.equal(added.json.tls_status, 'active');
    assert.equal(new Date(added.json.certificate_expires_at).toISOString(), new Date(new crypto.X509Certificate(operatorPem).validTo).toISOString());
    assert.equal((await tlsRequest(httpsPort, covered, operatorPem)).peer.fingerprint256, fingerprint);
    assert.equal((await plainRequest(s.port, covered, '/x')).headers.location, `https://${covered}:${httpsPort}/x`);
  });

  test('a custom domain it does not cover gets its own certificate from the ACME CA', async () => {
    const httpsPort = s.server.httpsPort ?? 0;
    const sub = `opother-${process.pid}`;
    const created = await s.request('POST', '/api/v1/deployments', { token: user.token, body: { name: sub, subdomain: sub, source_type: 'archive' } });
    const host = `other-${process.pid}.example.net`;
    assert.equal((await s.request('POST', `/api/v1/deployments/${created.json.id}/domains`, { token: user.token, body: { hostname: host } })).status, 201);
    const root = await pebble.issuingRoot();
    const res = await eventually(
      async () => {
        const r = await tlsRequest(httpsPort, host, root).catch(() => undefined);
        return r?.authorized === true ? r : undefined;
      },
      90_000,
      `an ACME certificate for ${host}`,
    );
    assert.equal(res.status, 503);
    const list = await s.request('GET', `/api/v1/deployments/${created.json.id}/domains`, { token: user.token });
    assert.equal(list.json[0].tls_status, 'active');
  });
  test('a tunnel connects over wss:// to the TLS port, and visitors reach it through TLS under the wildcard', async () => {
    const httpsPort = s.server.httpsPort ?? 0;
    const local = http.createServer((_req, res) => res.end('through the tunnel over TLS\n'));
    await new Promise<void>((resolve) => local.listen(0, '127.0.0.1', () => resolve()));
    const localPort = (local.address() as { port: number }).port;
    const { runTunnelClient } = await import('../../src/tunnel/tunnel-client.js');
    const { default: WebSocket } = await import('ws');
    type ClientOptions = import('ws').ClientOptions;
    // The client reaches the server by address; SNI names the API host, and the operator's certificate is trusted.
    class TrustingWebSocket extends WebSocket {
      constructor(url: string, options: ClientOptions) {
        // ws hands TLS options (servername, ca) to https.request as they are.
        const tlsOptions: ClientOptions & { servername: string } = { ...options, servername: DOMAIN, ca: operatorPem };
        super(url, tlsOptions);
      }
    }
    const stop = new AbortController();
    const sub = `optun-${process.pid}`;
    const connected = new Promise<string>((resolve) => {
      void runTunnelClient({
        serverUrl: `https://127.0.0.1:${httpsPort}`,
        apiKey: user.apiKey,
        port: localPort,
        subdomain: sub,
        signal: stop.signal,
        WebSocketImpl: TrustingWebSocket as unknown as typeof WebSocket,
        onEvent: (event) => {
          if (event.type === 'connected') resolve(event.subdomain);
        },
      }).catch(() => undefined);
    });
    try {
      const name = await Promise.race([connected, new Promise<never>((_, reject) => setTimeout(() => reject(new Error('the tunnel did not connect over TLS')), 30_000))]);
      assert.equal(name, sub);
      const res = await tlsRequest(httpsPort, `${sub}.${DOMAIN}`, operatorPem);
      assert.equal(res.authorized, true);
      assert.equal(res.status, 200);
      assert.equal(res.body, 'through the tunnel over TLS\n');
    } finally {
      stop.abort();
      local.close();
    }
  });
});
