// Unit tests of the HAProxy plane's small parts: runtime API words, PROXY v2 headers, error bodies and the host map.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import fs from 'node:fs';
import { connect, createServer } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { describe, it } from 'node:test';
import { loadConfig } from '../../src/config.js';
import { errorPageFiles, renderCountMap, renderHaproxyConfig, renderHostMap } from '../../src/proxy/haproxy/haproxy-config.js';
import { haproxyFiles, listenForHaproxy } from '../../src/proxy/haproxy/haproxy-data-plane.js';
import { processEnded } from '../../src/proxy/haproxy/haproxy-process.js';
import { eventually } from '../helpers/apps.js';
import { isSafeWord, RuntimeApi, RuntimeApiError } from '../../src/proxy/haproxy/runtime-api.js';
import { LATE_HEAD_MARK, parseProxyV2 } from '../../src/proxy/proxy-protocol.js';

const SIGNATURE = Buffer.from([0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d, 0x0a, 0x51, 0x55, 0x49, 0x54, 0x0a]);

function proxyV2(family: number, addresses: Buffer, tail = Buffer.alloc(0)): Buffer {
  const head = Buffer.alloc(4);
  head[0] = 0x21; // version 2, PROXY
  head[1] = (family << 4) | 1; // STREAM
  head.writeUInt16BE(addresses.length, 2);
  return Buffer.concat([SIGNATURE, head, addresses, tail]);
}

describe('runtime API words', () => {
  it('accepts host names, server names, addresses and paths; refuses what the CLI would split or interpret', () => {
    for (const word of ['app-1.apps.example.com', 'apps/u32768_1', '127.0.0.1:32768', '/var/lib/slipway/haproxy/hosts.map']) assert.ok(isSafeWord(word), word);
    for (const word of ['', 'a b', 'a;b', 'a\nb', 'a\rb', 'a#b', 'a\\b', "a'b", 'a"b', 'a<<b', 'a\tb']) assert.equal(isSafeWord(word), false, JSON.stringify(word));
  });

  it('refuses to send a command holding an unsafe word, without connecting', async () => {
    let connected = false;
    const socketPath = path.join(os.tmpdir(), `slipway-api-test-${process.pid}.sock`);
    const server = createServer(() => (connected = true));
    await new Promise<void>((resolve) => server.listen(socketPath, resolve));
    try {
      const api = new RuntimeApi(socketPath, 1000);
      await assert.rejects(api.run(['set', 'map', '/x.map', 'evil.example; shutdown sessions', 'u1']), RuntimeApiError);
      await assert.rejects(api.run(['del', 'map', '/x.map', 'a\ndel server apps/u1']), RuntimeApiError);
      assert.equal(connected, false);
    } finally {
      server.close();
    }
  });

  it('times out when the socket never answers', async () => {
    const socketPath = path.join(os.tmpdir(), `slipway-api-silent-${process.pid}.sock`);
    const server = createServer(() => undefined);
    await new Promise<void>((resolve) => server.listen(socketPath, resolve));
    try {
      await assert.rejects(new RuntimeApi(socketPath, 200).run(['show', 'info']), /did not answer/);
    } finally {
      server.close();
    }
  });
});

describe('PROXY protocol v2', () => {
  it('reads an IPv4 source address and port, and where the request starts', () => {
    const addresses = Buffer.from([203, 0, 113, 7, 127, 0, 0, 1, 0xd4, 0x31, 0x00, 0x50]);
    const data = proxyV2(1, addresses, Buffer.from('GET / HTTP/1.1\r\n'));
    const parsed = parseProxyV2(data);
    assert.ok(typeof parsed === 'object' && !(parsed instanceof Error));
    assert.deepEqual(parsed.source, { address: '203.0.113.7', port: 0xd431 });
    assert.equal(data.subarray(parsed.length).toString(), 'GET / HTTP/1.1\r\n');
  });

  it('reads an IPv6 source address in its short form', () => {
    const addresses = Buffer.alloc(36);
    Buffer.from([0x20, 0x01, 0x0d, 0xb8]).copy(addresses, 0);
    addresses[15] = 1;
    addresses[31] = 1;
    addresses.writeUInt16BE(4242, 32);
    const parsed = parseProxyV2(proxyV2(2, addresses));
    assert.ok(typeof parsed === 'object' && !(parsed instanceof Error));
    assert.deepEqual(parsed.source, { address: '2001:db8::1', port: 4242 });
  });

  it('reads the unique-id TLV after the addresses (HAProxy marks a head it waited for in vain), skipping other TLVs', () => {
    const tlv = (type: number, value: string): Buffer => {
      const head = Buffer.from([type, 0, 0]);
      head.writeUInt16BE(Buffer.byteLength(value), 1);
      return Buffer.concat([head, Buffer.from(value, 'latin1')]);
    };
    const addresses = Buffer.concat([Buffer.from([203, 0, 113, 7, 127, 0, 0, 1, 0xd4, 0x31, 0x00, 0x50]), tlv(0x01, 'h2'), tlv(0x05, LATE_HEAD_MARK)]);
    const data = proxyV2(1, addresses, Buffer.from('GET / HT'));
    const parsed = parseProxyV2(data);
    assert.ok(typeof parsed === 'object' && !(parsed instanceof Error));
    assert.deepEqual([parsed.source, parsed.uniqueId], [{ address: '203.0.113.7', port: 0xd431 }, 'late']);
    assert.equal(data.subarray(parsed.length).toString(), 'GET / HT');
    // No TLV, or one cut short: no unique id.
    const plain = parseProxyV2(proxyV2(1, addresses.subarray(0, 12)));
    assert.ok(typeof plain === 'object' && !(plain instanceof Error) && plain.uniqueId === undefined);
    const cut = parseProxyV2(proxyV2(1, Buffer.concat([addresses.subarray(0, 12), Buffer.from([0x05, 0x00, 0x09, 0x6c])])));
    assert.ok(typeof cut === 'object' && !(cut instanceof Error) && cut.uniqueId === undefined);
  });

  it('waits for more bytes, and refuses what is not a header', () => {
    assert.equal(parseProxyV2(SIGNATURE.subarray(0, 7)), 'incomplete');
    assert.equal(parseProxyV2(proxyV2(1, Buffer.alloc(12)).subarray(0, 20)), 'incomplete');
    assert.ok(parseProxyV2(Buffer.from('GET / HTTP/1.1\r\n')) instanceof Error);
    assert.ok(parseProxyV2(Buffer.from('PROXY TCP4 1.2.3.4 5.6.7.8 1 2\r\n')) instanceof Error);
  });
});

describe('HAProxy files', () => {
  it('error bodies are the Node plane pages with the host as a log-format expression, and no stray %', () => {
    for (const [name, body] of Object.entries(errorPageFiles())) {
      if (!name.endsWith('.html')) continue;
      if (name.startsWith('node-')) {
        assert.match(body, /%\[var\(txn\.apphost\)\]/, name);
        continue;
      }
      assert.match(body, /%\[var\(txn\.host\)\]/, name);
      assert.equal(body.replaceAll('%[var(txn.host)]', '').replaceAll('%%', '').includes('%'), false, name);
    }
  });

  it('HAProxy\'s answers for Node: JSON for the API host, pages for hosts under the domain (their Host cut to DNS-name characters)', () => {
    const base = { files: haproxyFiles('/var/lib/slipway'), bindHost: '0.0.0.0', bindPort: 80, limits: loadConfig({}).edge, publicProtocol: 'http', servers: [] };
    const config = renderHaproxyConfig({ ...base, fastPath: true, domain: 'apps.example.com' });
    assert.match(config, /set-var\(txn\.apphost\) req\.hdr\(host\),field\(1,:\),lower,regsub\("\[\^a-z0-9\.-\]","",g\) if \{ req\.hdr\(host\),field\(1,:\),lower -m end \.apps\.example\.com \}/);
    assert.match(config, /use_backend node_apps if \{ var\(txn\.apphost\) -m found \}\n  default_backend node/);
    assert.match(config, /backend node\n(?:  .*\n|\n)*?  http-error status 502 content-type "application\/json; charset=utf-8" file \/var\/lib\/slipway\/haproxy\/node-502\.json/);
    assert.match(config, /backend node_apps\n(?:  .*\n)*?  http-error status 502 content-type "text\/html; charset=utf-8" lf-file \/var\/lib\/slipway\/haproxy\/node-502\.html/);
    for (const status of [502, 503, 504]) assert.deepEqual(Object.keys(JSON.parse(errorPageFiles()[`node-${status}.json`] ?? '')), ['error', 'message']);
  });

  it('the host map has one "host/i server" line per replica, the count map one "host n" line per host', () => {
    const hosts = new Map([['a.apps.test', ['u1_1']], ['b.apps.test', ['u2_2', 'u3_3']]]);
    assert.equal(renderHostMap(hosts), 'a.apps.test/0 u1_1\nb.apps.test/0 u2_2\nb.apps.test/1 u3_3\n');
    assert.equal(renderCountMap(hosts), 'a.apps.test 1\nb.apps.test 2\n');
  });

  it('with HTTPS, a TLS bind on an empty crt-list (strict SNI), the fast path for TLS requests only, and TLS requests to Node on their own port', () => {
    const base = { files: haproxyFiles('/var/lib/slipway'), bindHost: '0.0.0.0', bindPort: 80, limits: loadConfig({}).edge, publicProtocol: 'http', servers: [] };
    const plain = renderHaproxyConfig({ ...base, fastPath: true });
    assert.doesNotMatch(plain, /ssl|node_tls/);
    const tls = renderHaproxyConfig({ ...base, fastPath: false, tls: { bindPort: 443 } });
    assert.match(tls, /bind 0\.0\.0\.0:443 ssl crt-list \/var\/lib\/slipway\/haproxy\/certs\.list strict-sni/);
    assert.match(tls, /set-var\(txn\.host\) .* if \{ ssl_fc \} \{ req\.hdr_cnt\(host\) eq 1 \}/);
    assert.match(tls, /use_backend node_tls if \{ ssl_fc \}/);
    assert.match(tls, /set-header x-forwarded-proto https if \{ ssl_fc \}/);
    assert.match(plain, /server node unix@\/var\/lib\/slipway\/haproxy\/node\.sock send-proxy-v2/);
    assert.match(tls, /server node_tls unix@\/var\/lib\/slipway\/haproxy\/node-tls\.sock send-proxy-v2/);
    assert.doesNotMatch(plain, /nbthread/);
    assert.match(renderHaproxyConfig({ ...base, fastPath: true, threads: 3 }), /^global\n(?:  .*\n)*  nbthread 3\n/m);
  });

  it('a runtime API payload (a certificate) may hold no empty line', async () => {
    const api = new RuntimeApi(path.join(os.tmpdir(), `slipway-api-payload-${process.pid}.sock`));
    await assert.rejects(api.runWithPayload(['set', 'ssl', 'cert', '/x.pem'], 'a\n\nset server apps/x state ready'), RuntimeApiError);
    await assert.rejects(api.runWithPayload(['set', 'ssl', 'cert', '/x.pem'], ''), RuntimeApiError);
  });

  it('files go under <data>/haproxy unless that path is unsafe for the runtime API or too long for a socket', () => {
    assert.equal(haproxyFiles('/var/lib/slipway').config, '/var/lib/slipway/haproxy/haproxy.cfg');
    assert.ok(haproxyFiles('/srv/my data').dir.startsWith(path.join(os.tmpdir(), 'slipway-haproxy-')));
    assert.ok(haproxyFiles(`/${'x'.repeat(120)}`).dir.startsWith(path.join(os.tmpdir(), 'slipway-haproxy-')));
  });
});

describe("Node's listener for HAProxy", () => {
  it('binds a Unix socket in a private (0700) directory, replacing the socket file a crashed process left', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'slipway-node-sock-'));
    const files = haproxyFiles(dir);
    const first = createServer();
    await listenForHaproxy(first, files.nodeSocket);
    assert.equal(fs.statSync(files.dir).mode & 0o777, 0o700, 'the directory is created private');
    await new Promise((resolve) => first.close(resolve));
    // What a killed server leaves: a file at the socket's path (Node unlinks it only on a clean close).
    fs.writeFileSync(files.nodeSocket, '');
    const server = createServer((socket) => socket.end('hello'));
    try {
      await listenForHaproxy(server, files.nodeSocket);
      assert.ok(fs.statSync(files.nodeSocket).isSocket());
      const answer = await new Promise<string>((resolve, reject) => {
        let text = '';
        connect(files.nodeSocket).on('data', (chunk) => (text += chunk)).on('end', () => resolve(text)).on('error', reject);
      });
      assert.equal(answer, 'hello');
    } finally {
      server.close();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('a previous HAProxy', () => {
  it('counts as ended once it is a zombie, not only once its parent reaps it', async () => {
    // A shell starts `sleep 0` in the background, prints its pid and becomes `sleep 5`, which never
    // reaps it: the pid is a zombie until the test ends the parent.
    const parent = spawn('sh', ['-c', 'sleep 0 & echo $!; exec sleep 5'], { stdio: ['ignore', 'pipe', 'ignore'] });
    try {
      const [line] = (await once(parent.stdout, 'data')) as [Buffer];
      const zombie = Number(line.toString().trim());
      await eventually(async () => (fs.readFileSync(`/proc/${zombie}/stat`, 'utf8').includes(') Z ') ? true : undefined), 5000, 'a zombie');
      assert.equal(await processEnded(zombie), true, 'a zombie has ended');
      assert.equal(await processEnded(parent.pid as number), false, 'a live process has not');
    } finally {
      parent.kill('SIGKILL');
    }
    await once(parent, 'exit');
    assert.equal(await processEnded(parent.pid as number), true, 'a reaped process has ended');
  });
});
