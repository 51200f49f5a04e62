// Certificate records in the database: one row per host, private keys (and the ACME account key) encrypted at rest.
import type { Kysely, Selectable } from 'kysely';
import type { CertificateRecord, CertificateRepository, TlsCertificate } from '../tls/certificates.js';
import type { ValueCipher } from '../secrets/value-cipher.js';
import { nowIso, type Db } from './database.js';
import type { CertificatesTable, Database } from './schema.js';

/** Associated data of a host's private key: a ciphertext moved to another host does not decrypt. */
const keyContext = (hostname: string): string => `tls-key:${hostname}`;
const accountContext = (directoryUrl: string): string => `acme-account:${directoryUrl}`;

/** The certificate repository over the database; every private key goes through `cipher`. */
export class DbCertificateStore implements CertificateRepository {
  readonly #db: Db;
  readonly #cipher: ValueCipher;

  constructor(db: Db, cipher: ValueCipher) {
    this.#db = db;
    this.#cipher = cipher;
  }

  async get(hostname: string): Promise<CertificateRecord | undefined> {
    const row = await this.#db.selectFrom('certificates').selectAll().where('hostname', '=', hostname).executeTakeFirst();
    return row === undefined ? undefined : this.#record(row);
  }

  async all(): Promise<CertificateRecord[]> {
    const rows = await this.#db.selectFrom('certificates').selectAll().orderBy('hostname').execute();
    return rows.map((row) => this.#record(row));
  }

  async summaries(): Promise<Array<{ hostname: string; expiresAt: Date | undefined }>> {
    // `expires_at` is set with the certificate (saveIssued) and only then.
    const rows = await this.#db.selectFrom('certificates').select(['hostname', 'expires_at']).execute();
    return rows.map((r) => ({ hostname: r.hostname, expiresAt: r.expires_at === null ? undefined : new Date(r.expires_at) }));
  }

  async want(hostname: string): Promise<void> {
    await this.#db
      .insertInto('certificates')
      .values({ hostname, status: 'pending', updated_at: nowIso() })
      .onConflict((oc) => oc.column('hostname').doNothing())
      .execute();
  }

  async saveIssued(hostname: string, certificate: TlsCertificate): Promise<void> {
    const values = {
      status: 'active' as const,
      error: null,
      cert_pem: certificate.certPem,
      key_pem: this.#cipher.encrypt(certificate.keyPem, keyContext(hostname)),
      expires_at: certificate.expiresAt.toISOString(),
      attempts: 0,
      next_attempt_at: null,
      updated_at: nowIso(),
    };
    await this.#db
      .insertInto('certificates')
      .values({ hostname, ...values })
      .onConflict((oc) => oc.column('hostname').doUpdateSet(values))
      .execute();
  }

  async saveFailure(hostname: string, failure: { status: 'active' | 'failed'; error: string; attempts: number; nextAttemptAt: Date }): Promise<void> {
    const values = {
      status: failure.status,
      error: failure.error,
      attempts: failure.attempts,
      next_attempt_at: failure.nextAttemptAt.toISOString(),
      updated_at: nowIso(),
    };
    await this.#db
      .insertInto('certificates')
      .values({ hostname, ...values })
      .onConflict((oc) => oc.column('hostname').doUpdateSet(values))
      .execute();
  }

  async remove(hostname: string): Promise<void> {
    await this.#db.deleteFrom('certificates').where('hostname', '=', hostname).execute();
  }

  async accountKey(directoryUrl: string): Promise<string | undefined> {
    const row = await this.#db.selectFrom('acme_accounts').select('key_pem').where('directory_url', '=', directoryUrl).executeTakeFirst();
    return row === undefined ? undefined : this.#cipher.decrypt(row.key_pem, accountContext(directoryUrl));
  }

  async saveAccountKey(directoryUrl: string, keyPem: string): Promise<void> {
    const key_pem = this.#cipher.encrypt(keyPem, accountContext(directoryUrl));
    await this.#db
      .insertInto('acme_accounts')
      .values({ directory_url: directoryUrl, key_pem, created_at: nowIso() })
      .onConflict((oc) => oc.column('directory_url').doUpdateSet({ key_pem }))
      .execute();
  }

  #record(row: Selectable<CertificatesTable>): CertificateRecord {
    const certificate =
      row.cert_pem !== null && row.key_pem !== null && row.expires_at !== null
        ? { certPem: row.cert_pem, keyPem: this.#cipher.decrypt(row.key_pem, keyContext(row.hostname)), expiresAt: new Date(row.expires_at) }
        : undefined;
    return {
      hostname: row.hostname,
      status: row.status,
      error: row.error,
      certificate,
      attempts: row.attempts,
      nextAttemptAt: row.next_attempt_at === null ? undefined : new Date(row.next_attempt_at),
    };
  }
}

/** Re-encrypts every certificate key and ACME account key from one cipher to another (inside the caller's transaction). */
export async function reencryptCertificates(trx: Kysely<Database>, from: ValueCipher, to: ValueCipher): Promise<number> {
  let count = 0;
  for (const r of await trx.selectFrom('certificates').select(['hostname', 'key_pem']).where('key_pem', 'is not', null).execute()) {
    if (r.key_pem === null) continue;
    const context = keyContext(r.hostname);
    await trx.updateTable('certificates').set({ key_pem: to.encrypt(from.decrypt(r.key_pem, context), context) }).where('hostname', '=', r.hostname).execute();
    count += 1;
  }
  for (const r of await trx.selectFrom('acme_accounts').select(['directory_url', 'key_pem']).execute()) {
    const context = accountContext(r.directory_url);
    await trx.updateTable('acme_accounts').set({ key_pem: to.encrypt(from.decrypt(r.key_pem, context), context) }).where('directory_url', '=', r.directory_url).execute();
    count += 1;
  }
  return count;
}
