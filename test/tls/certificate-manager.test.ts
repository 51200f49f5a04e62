// Unit tests of the certificate manager's decisions (which host, when, backoff, renewal) over a fake issuer and a real SQLite store.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { DbCertificateStore } from '../../src/db/certificate-store.js';
import { openDatabase, type Db } from '../../src/db/database.js';
import { ValueCipher } from '../../src/secrets/value-cipher.js';
import { CertificateManager } from '../../src/tls/certificate-manager.js';
import type { CertificateIssuer, TlsCertificate } from '../../src/tls/certificates.js';
import { operatorCertificate } from '../../src/tls/operator-certificate.js';
import { memoryCoordination } from '../../src/deploy/memory-coordination.js';
import { makeLeaf, type CertFiles } from '../helpers/pebble.js';

const DAY = 24 * 3_600_000;

/** An issuer that records each request and answers from `plan` (a certificate valid `validDays`, or an error). */
class FakeIssuer implements CertificateIssuer {
  readonly requests: string[] = [];
  /** Awaited before answering (an order the CA takes its time over). */
  hold: Promise<void> = Promise.resolve();
  plan: (hostname: string) => { validDays: number } | Error = () => ({ validDays: 90 });
  constructor(
    readonly pem: CertFiles,
    readonly clock: () => Date,
  ) {}
  async issue(hostname: string): Promise<TlsCertificate> {
    this.requests.push(hostname);
    await this.hold;
    const outcome = this.plan(hostname);
    if (outcome instanceof Error) throw outcome;
    return { certPem: this.pem.certPem, keyPem: fs.readFileSync(this.pem.keyFile, 'utf8'), expiresAt: new Date(this.clock().getTime() + outcome.validDays * DAY) };
  }
}

describe('certificate manager', () => {
  let dir: string;
  let db: Db;
  let pem: CertFiles;
  const cipher = new ValueCipher(crypto.randomBytes(32));

  before(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'slipway-certs-'));
    db = await openDatabase({ file: path.join(dir, 'slipway.db') });
    pem = await makeLeaf(dir, 'unit', ['DNS:unit.test'], undefined);
  });
  after(async () => {
    await db.destroy();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  /** A manager over a fresh table, a settable clock, and `served` as the set of served hosts. */
  async function setup(served: Set<string>, options: { operatorNames?: string[] } = {}) {
    await db.deleteFrom('certificates').execute();
    let now = new Date('2027-01-01T00:00:00Z');
    const clock = (): Date => now;
    const issuer = new FakeIssuer(pem, clock);
    const repository = new DbCertificateStore(db, cipher);
    /** What `onFailure` was told (each becomes a `certificate.failed` notification). */
    const failures: Array<[string, string]> = [];
    const operator = options.operatorNames === undefined ? undefined : operatorCertificate({ certPem: pem.certPem, keyPem: fs.readFileSync(pem.keyFile, 'utf8'), expiresAt: new Date('2028-01-01T00:00:00Z') }, options.operatorNames);
    const manager = new CertificateManager({
      repository,
      issuer,
      operator,
      isServed: (host) => served.has(host),
      log: () => undefined,
      retryFirstMs: 60_000,
      retryMaxMs: 3_600_000,
      now: clock,
      onFailure: (host, message) => failures.push([host, message]),
    });
    await manager.start();
    /** Runs the worker until it is idle. */
    const settle = async (): Promise<void> => {
      for (let i = 0; i < 50; i++) await new Promise((resolve) => setImmediate(resolve));
      await new Promise((resolve) => setTimeout(resolve, 50));
    };
    return { manager, issuer, repository, settle, failures, advance: (ms: number) => (now = new Date(now.getTime() + ms)) };
  }

  test('a flood of names that are not served never reaches the CA', async () => {
    const { manager, issuer, repository, settle } = await setup(new Set(['app.example.com']));
    for (let i = 0; i < 200; i++) manager.ensure(`random-${i}.example.com`);
    await settle();
    assert.deepEqual(issuer.requests, []);
    assert.deepEqual(await repository.all(), [], 'nothing recorded for them either');
    manager.ensure('app.example.com');
    await settle();
    assert.deepEqual(issuer.requests, ['app.example.com']);
    assert.equal(manager.hasCertificate('app.example.com'), true);
    assert.ok(manager.secureContextFor('APP.example.com.') !== undefined, 'SNI names are matched case-insensitively, trailing dot dropped');
    await manager.close();
  });

  test('a held certificate is not requested again until 30 days before it expires, then it is renewed', async () => {
    const { manager, issuer, settle, advance } = await setup(new Set(['a.example.com']));
    manager.ensure('a.example.com');
    await settle();
    advance(59 * DAY);
    manager.ensure('a.example.com');
    await settle();
    assert.equal(issuer.requests.length, 1, '31 days left: not yet');
    advance(1 * DAY + 1000);
    manager.ensure('a.example.com');
    await settle();
    assert.equal(issuer.requests.length, 2, '30 days left: renewed');
    const [status] = (await manager.statuses(['a.example.com'])).values();
    assert.equal(status?.tls_status, 'active');
    await manager.close();
  });

  test('failures are recorded (failed + tls_error) and retried with doubling backoff; a failed renewal keeps the valid certificate active', async () => {
    const { manager, issuer, settle, advance, failures } = await setup(new Set(['b.example.com']));
    issuer.plan = () => new Error('urn:ietf:params:acme:error:connection: refused');
    manager.ensure('b.example.com');
    await settle();
    let status = (await manager.statuses(['b.example.com'])).get('b.example.com');
    assert.equal(status?.tls_status, 'failed');
    assert.match(status?.tls_error ?? '', /refused/);
    manager.ensure('b.example.com');
    await settle();
    assert.equal(issuer.requests.length, 1, 'within the first backoff: no new attempt');
    advance(60_000);
    manager.ensure('b.example.com');
    await settle();
    assert.equal(issuer.requests.length, 2, 'after 1 minute: second attempt');
    advance(60_000);
    manager.ensure('b.example.com');
    await settle();
    assert.equal(issuer.requests.length, 2, 'the second backoff is 2 minutes');
    advance(60_000);
    issuer.plan = () => ({ validDays: 90 });
    manager.ensure('b.example.com');
    await settle();
    assert.equal(issuer.requests.length, 3);
    status = (await manager.statuses(['b.example.com'])).get('b.example.com');
    assert.deepEqual([status?.tls_status, status?.tls_error], ['active', null]);

    // Renewal time, and the CA fails: the certificate still valid keeps serving, the error is shown.
    advance(61 * DAY);
    issuer.plan = () => new Error('CA down');
    manager.ensure('b.example.com');
    await settle();
    status = (await manager.statuses(['b.example.com'])).get('b.example.com');
    assert.deepEqual([status?.tls_status, status?.tls_error], ['active', 'CA down']);
    assert.equal(manager.hasCertificate('b.example.com'), true);
    // Each failed attempt (issuance or renewal) was told once, with the reason the owner sees.
    assert.deepEqual(failures.map(([host]) => host), ['b.example.com', 'b.example.com', 'b.example.com']);
    assert.match(failures[0]?.[1] ?? '', /refused/);
    assert.equal(failures[2]?.[1], 'CA down');
    await manager.close();
  });

  test("a host removed while the CA works never keeps the certificate; removal drops record and context", async () => {
    const served = new Set(['c.example.com']);
    const { manager, issuer, repository, settle } = await setup(served);
    issuer.plan = () => {
      served.delete('c.example.com');
      return { validDays: 90 };
    };
    manager.ensure('c.example.com');
    await settle();
    assert.equal(manager.hasCertificate('c.example.com'), false);
    assert.equal(await repository.get('c.example.com'), undefined);

    served.add('d.example.com');
    issuer.plan = () => ({ validDays: 90 });
    const changes: Array<[string, boolean]> = [];
    manager.subscribe((host, cert) => changes.push([host, cert !== undefined]));
    manager.ensure('d.example.com');
    await settle();
    assert.equal(manager.hasCertificate('d.example.com'), true);
    await manager.hostRemoved('d.example.com');
    assert.equal(manager.hasCertificate('d.example.com'), false);
    assert.equal(manager.secureContextFor('d.example.com'), undefined);
    assert.deepEqual(changes, [['d.example.com', true], ['d.example.com', false]]);
    await manager.close();
  });

  test("hosts the operator's certificate covers are never requested; one label under a wildcard only", async () => {
    const served = new Set(['x.apps.example.com', 'apps.example.com', 'a.b.apps.example.com']);
    const { manager, issuer, settle } = await setup(served, { operatorNames: ['apps.example.com', '*.apps.example.com'] });
    for (const host of served) manager.ensure(host);
    await settle();
    assert.deepEqual(issuer.requests, ['a.b.apps.example.com']);
    assert.equal((await manager.statuses(['x.apps.example.com'])).get('x.apps.example.com')?.tls_status, 'active');
    assert.equal(manager.certificateFor('x.apps.example.com')?.expiresAt.toISOString(), '2028-01-01T00:00:00.000Z');
    await manager.close();
  });

  test('several instances: a host is issued once and then held by all; renewals only on the leader; refresh and resync carry changes', async () => {
    await db.deleteFrom('certificates').execute();
    const host = 'multi.example.com';
    const served = new Set([host]);
    let now = new Date('2027-01-01T00:00:00Z');
    const clock = (): Date => now;
    const issuer = new FakeIssuer(pem, clock);
    const coordination = memoryCoordination();
    const announced: string[] = [];
    let aLeads = true;
    const instance = (leader: () => boolean): CertificateManager =>
      new CertificateManager({
        repository: new DbCertificateStore(db, cipher),
        issuer,
        operator: undefined,
        isServed: (h) => served.has(h),
        log: () => undefined,
        now: clock,
        lock: (h, signal) => coordination.lockHost(h, signal),
        announce: (h) => announced.push(h),
        isLeader: leader,
      });
    const a = instance(() => aLeads);
    const b = instance(() => !aLeads);
    await a.start();
    await b.start();
    const until = async (what: string, check: () => boolean): Promise<void> => {
      const deadline = Date.now() + 10_000;
      while (!check()) {
        if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
    };
    try {
      let answer = (): void => undefined;
      issuer.hold = new Promise<void>((resolve) => (answer = resolve));
      a.ensure(host);
      await until('a to order', () => issuer.requests.length === 1);
      // b is told the host is served while a's order is open: it waits for the host's lock.
      b.ensure(host);
      await new Promise((resolve) => setTimeout(resolve, 100));
      assert.equal(issuer.requests.length, 1);
      assert.equal(b.hasCertificate(host), false);
      answer();
      await until('b to serve the stored certificate', () => b.hasCertificate(host));
      assert.deepEqual(issuer.requests, [host], 'issued once');
      assert.deepEqual(announced, [host], 'announced by the instance that obtained it');
      assert.equal(b.certificateFor(host)?.expiresAt.getTime(), a.certificateFor(host)?.expiresAt.getTime());

      // Renewal time: the follower leaves it to the leader.
      now = new Date(now.getTime() + 61 * DAY);
      b.ensure(host);
      await b.renewDue();
      await new Promise((resolve) => setTimeout(resolve, 100));
      assert.equal(issuer.requests.length, 1, 'no renewal by a follower');
      const before = b.certificateFor(host)?.expiresAt.getTime();
      await a.renewDue();
      await until('the leader to renew', () => issuer.requests.length === 2 && a.certificateFor(host)?.expiresAt.getTime() !== before);
      // The announcement makes the others read it from the store.
      await until('the renewal to be announced', () => announced.length === 2);
      await b.refresh(host);
      assert.equal(b.certificateFor(host)?.expiresAt.getTime(), a.certificateFor(host)?.expiresAt.getTime());

      // Leadership moves: the new leader renews.
      aLeads = false;
      now = new Date(now.getTime() + 61 * DAY);
      await a.renewDue();
      await new Promise((resolve) => setTimeout(resolve, 100));
      assert.equal(issuer.requests.length, 2, 'the old leader no longer renews');
      await b.renewDue();
      await until('the new leader to renew', () => issuer.requests.length === 3);

      // A missed announcement: the resync finds the stored certificate differs from the held one, or is gone.
      await until('b to hold its renewal', () => b.certificateFor(host)?.expiresAt.getTime() !== a.certificateFor(host)?.expiresAt.getTime());
      await a.resync();
      assert.equal(a.certificateFor(host)?.expiresAt.getTime(), b.certificateFor(host)?.expiresAt.getTime());
      await db.deleteFrom('certificates').where('hostname', '=', host).execute();
      await a.resync();
      assert.equal(a.hasCertificate(host), false, 'a record gone: the certificate is dropped');
    } finally {
      await a.close();
      await b.close();
    }
  });

  test('private keys are stored encrypted and bound to their host', async () => {
    const { manager, settle } = await setup(new Set(['e.example.com']));
    manager.ensure('e.example.com');
    await settle();
    const row = await db.selectFrom('certificates').select(['key_pem']).where('hostname', '=', 'e.example.com').executeTakeFirstOrThrow();
    assert.match(row.key_pem ?? '', /^v1:/);
    assert.doesNotMatch(row.key_pem ?? '', /PRIVATE KEY/);
    // Moved to another host's row, it does not decrypt.
    await db.insertInto('certificates').values({ hostname: 'f.example.com', status: 'active', cert_pem: pem.certPem, key_pem: row.key_pem, expires_at: '2030-01-01T00:00:00Z', updated_at: 'x' }).execute();
    await assert.rejects(new DbCertificateStore(db, cipher).get('f.example.com'));
    await db.deleteFrom('certificates').where('hostname', '=', 'f.example.com').execute();
    await manager.close();

    // Key rotation moves the keys (and the ACME account key) to the new key with everything else.
    await new DbCertificateStore(db, cipher).saveAccountKey('https://ca.example/dir', 'account key pem');
    const next = new ValueCipher(crypto.randomBytes(32));
    const { reencryptAll } = await import('../../src/db/app-config-store.js');
    assert.ok((await reencryptAll(db, cipher, next)) >= 2);
    const moved = await new DbCertificateStore(db, next).get('e.example.com');
    assert.match(moved?.certificate?.keyPem ?? '', /PRIVATE KEY/);
    assert.equal(await new DbCertificateStore(db, next).accountKey('https://ca.example/dir'), 'account key pem');
    await assert.rejects(new DbCertificateStore(db, cipher).get('e.example.com'), 'the old key no longer opens it');
  });
});
