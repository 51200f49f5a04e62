// A real ACME CA on loopback for the HTTPS tests: Debian's pebble with pebble-challtestsrv as its DNS, and throwaway TLS material.
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { freePort } from './net.js';

const run = promisify(execFile);

export const PEBBLE_BIN = '/usr/bin/pebble';
export const CHALLTESTSRV_BIN = '/usr/bin/pebble-challtestsrv';

/** A certificate and key written to files, with its PEM text. */
export interface CertFiles {
  readonly certFile: string;
  readonly keyFile: string;
  readonly certPem: string;
}

/** A throwaway CA (EC P-256, valid a day) in `dir`. */
export async function makeCa(dir: string, name: string): Promise<CertFiles & { keyFile: string }> {
  const keyFile = path.join(dir, `${name}.key`);
  const certFile = path.join(dir, `${name}.pem`);
  await run('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', keyFile, '-out', certFile, '-days', '1', '-subj', `/CN=${name}`], { timeout: 30_000 });
  return { certFile, keyFile, certPem: fs.readFileSync(certFile, 'utf8') };
}

/**
 * A leaf certificate for `names` (`DNS:…` or `IP:…` subjectAltName entries) signed by `ca`, or
 * self-signed when `ca` is undefined; a server's by default, a client's with `clientAuth`.
 */
export async function makeLeaf(dir: string, name: string, names: readonly string[], ca: CertFiles | undefined, usage: 'serverAuth' | 'clientAuth' = 'serverAuth'): Promise<CertFiles> {
  const keyFile = path.join(dir, `${name}.key`);
  const certFile = path.join(dir, `${name}.pem`);
  const csrFile = path.join(dir, `${name}.csr`);
  const extFile = path.join(dir, `${name}.ext`);
  fs.writeFileSync(extFile, `subjectAltName=${names.join(',')}\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature\nextendedKeyUsage=${usage}\n`);
  await run('openssl', ['req', '-new', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', keyFile, '-out', csrFile, '-subj', `/CN=${name}`], { timeout: 30_000 });
  const signer = ca === undefined ? ['-signkey', keyFile] : ['-CA', ca.certFile, '-CAkey', ca.keyFile, '-set_serial', String(Date.now())];
  await run('openssl', ['x509', '-req', '-in', csrFile, ...signer, '-out', certFile, '-days', '1', '-extfile', extFile], { timeout: 30_000 });
  return { certFile, keyFile, certPem: fs.readFileSync(certFile, 'utf8') };
}

export interface Pebble {
  /** The ACME directory URL. */
  readonly directoryUrl: string;
  /** PEM of the CA that pebble's own TLS certificate chains to (SLIPWAY_ACME_CA_FILE). */
  readonly caFile: string;
  /** PEM of pebble's issuing root: certificates it issues chain to it. */
  issuingRoot(): Promise<string>;
  /** Makes challtestsrv answer A queries for `host` with `address` (default for every name: 127.0.0.1). */
  setAddress(host: string, address: string): Promise<void>;
  /** What pebble and challtestsrv printed (for failure messages). */
  output(): string;
  stop(): Promise<void>;
}

/**
 * Starts pebble-challtestsrv (DNS on loopback, every name → 127.0.0.1, no AAAA) and pebble (ACME
 * on loopback, its VA validating HTTP-01 on `httpPort` and resolving through challtestsrv).
 */
export async function startPebble(httpPort: number): Promise<Pebble> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'slipway-pebble-'));
  const ca = await makeCa(dir, 'pebble-test-ca');
  const leaf = await makeLeaf(dir, 'pebble-listener', ['DNS:localhost', 'IP:127.0.0.1'], ca);
  const [acmePort, managementPort, tlsPort, dnsPort, dnsManagementPort] = await Promise.all([freePort(), freePort(), freePort(), freePort(), freePort()]);
  const config = {
    pebble: {
      listenAddress: `127.0.0.1:${acmePort}`,
      managementListenAddress: `127.0.0.1:${managementPort}`,
      certificate: leaf.certFile,
      privateKey: leaf.keyFile,
      httpPort,
      tlsPort,
      ocspResponderURL: '',
      externalAccountBindingRequired: false,
    },
  };
  const configFile = path.join(dir, 'pebble-config.json');
  fs.writeFileSync(configFile, JSON.stringify(config));
  let output = '';
  const collect = (child: ChildProcess, label: string): void => {
    child.stdout?.on('data', (chunk: Buffer) => (output += `[${label}] ${chunk.toString()}`));
    child.stderr?.on('data', (chunk: Buffer) => (output += `[${label}] ${chunk.toString()}`));
  };
  const dns = spawn(
    CHALLTESTSRV_BIN,
    ['-defaultIPv4', '127.0.0.1', '-defaultIPv6', '', '-dns01', `127.0.0.1:${dnsPort}`, '-http01', '', '-https01', '', '-tlsalpn01', '', '-management', `127.0.0.1:${dnsManagementPort}`],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  collect(dns, 'challtestsrv');
  const pebble = spawn(PEBBLE_BIN, ['-config', configFile, '-dnsserver', `127.0.0.1:${dnsPort}`], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { PATH: '/usr/bin:/bin', PEBBLE_VA_NOSLEEP: '1', PEBBLE_WFE_NONCEREJECT: '0', PEBBLE_AUTHZREUSE: '0' },
  });
  collect(pebble, 'pebble');
  const children = [pebble, dns];
  const stop = async (): Promise<void> => {
    await Promise.all(
      children.map(
        (child) =>
          new Promise<void>((resolve) => {
            if (child.exitCode !== null || child.signalCode !== null) return resolve();
            const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
            child.once('exit', () => {
              clearTimeout(timer);
              resolve();
            });
            child.kill('SIGTERM');
          }),
      ),
    );
    fs.rmSync(dir, { recursive: true, force: true });
  };
  const directoryUrl = `https://127.0.0.1:${acmePort}/dir`;
  const get = (url: string): Promise<{ status: number; body: string }> =>
    new Promise((resolve, reject) => {
      const req = https.get(url, { ca: ca.certPem, timeout: 5000 }, (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (body += chunk));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      });
      req.on('timeout', () => req.destroy(new Error('timeout')));
      req.on('error', reject);
    });
  const deadline = Date.now() + 60_000;
  for (;;) {
    const ready = await get(directoryUrl).then((r) => r.status === 200, () => false);
    if (ready) break;
    if (Date.now() > deadline || pebble.exitCode !== null || dns.exitCode !== null) {
      await stop();
      throw new Error(`pebble did not start:\n${output}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  return {
    directoryUrl,
    caFile: ca.certFile,
    async issuingRoot() {
      const res = await get(`https://127.0.0.1:${managementPort}/roots/0`);
      if (res.status !== 200) throw new Error(`pebble's root: ${res.status}`);
      return res.body;
    },
    async setAddress(host, address) {
      const res = await fetch(`http://127.0.0.1:${dnsManagementPort}/add-a`, {
        method: 'POST',
        body: JSON.stringify({ host: host.endsWith('.') ? host : `${host}.`, addresses: [address] }),
        signal: AbortSignal.timeout(5000),
      });
      if (res.status !== 200) throw new Error(`challtestsrv add-a: ${res.status} ${await res.text()}`);
    },
    output: () => output,
    stop,
  };
}
