// Certificates for every host Slipway serves: obtained when a host needs one, renewed, retried with backoff, served by SNI.
import tls from 'node:tls';
import type { DomainCertificates, TlsView } from '../domain/custom-domains.js';
import type { CertificateIssuer, CertificateRecord, CertificateRepository, CertificateSource, TlsCertificate } from './certificates.js';
import type { OperatorCertificate } from './operator-certificate.js';

const DAY_MS = 24 * 3_600_000;

export interface CertificateManagerOptions {
  readonly repository: CertificateRepository;
  readonly issuer: CertificateIssuer;
  readonly operator: OperatorCertificate | undefined;
  /**
   * Whether Slipway serves `hostname` now (the API host, an app's subdomain, a custom domain).
   * Checked before every request to the CA: nothing is ever requested for any other name.
   */
  readonly isServed: (hostname: string) => boolean;
  readonly log: (level: 'info' | 'warn' | 'error', msg: string, detail?: object) => void;
  /** Renew this long before expiry (default 30 days). */
  readonly renewBeforeMs?: number;
  /** First retry delay after a failure; doubles per failure up to `retryMaxMs` (defaults 5 min, 24 h). */
  readonly retryFirstMs?: number;
  readonly retryMaxMs?: number;
  /**
   * Serializes one host's issuance across instances (decisions §15: the coordination lock), so a
   * certificate is issued once; without it, only this process's one worker serializes.
   */
  readonly lock?: (hostname: string, signal: AbortSignal) => Promise<() => void>;
  /** Tells the other instances a host's certificate changed: they read it from the repository (`refresh`). */
  readonly announce?: (hostname: string) => void;
  /** Whether this instance renews and retries (the leader's chore); default: always (one instance). */
  readonly isLeader?: () => boolean;
  /** Told each time an issuance or renewal fails, with the reason shown to the domain's owner (`certificate.failed`). */
  readonly onFailure?: (hostname: string, message: string) => void;
  readonly now?: () => Date;
}

/**
 * Decides which host needs a certificate and when, one issuance at a time; holds the certificates
 * in memory for the TLS handshake (SNI) and tells subscribed data planes about each change.
 */
export class CertificateManager implements CertificateSource, DomainCertificates {
  readonly #repository: CertificateRepository;
  readonly #issuer: CertificateIssuer;
  readonly #operator: OperatorCertificate | undefined;
  readonly #operatorContext: tls.SecureContext | undefined;
  readonly #isServed: (hostname: string) => boolean;
  readonly #log: CertificateManagerOptions['log'];
  readonly #renewBeforeMs: number;
  readonly #retryFirstMs: number;
  readonly #retryMaxMs: number;
  readonly #now: () => Date;
  readonly #lock: CertificateManagerOptions['lock'];
  readonly #announce: (hostname: string) => void;
  readonly #isLeader: () => boolean;
  readonly #onFailure: CertificateManagerOptions['onFailure'];
  readonly #held = new Map<string, { certificate: TlsCertificate; context: tls.SecureContext }>();
  readonly #listeners = new Set<(hostname: string, certificate: TlsCertificate | undefined) => void>();
  /** Hosts waiting for the worker, in order. */
  readonly #queue = new Set<string>();
  readonly #abort = new AbortController();
  #worker: Promise<void> | undefined;
  #started = false;

  constructor(options: CertificateManagerOptions) {
    this.#repository = options.repository;
    this.#issuer = options.issuer;
    this.#onFailure = options.onFailure;
    this.#operator = options.operator;
    this.#operatorContext = options.operator === undefined ? undefined : secureContext(options.operator.certificate);
    this.#isServed = options.isServed;
    this.#log = options.log;
    this.#renewBeforeMs = options.renewBeforeMs ?? 30 * DAY_MS;
    this.#retryFirstMs = options.retryFirstMs ?? 5 * 60_000;
    this.#retryMaxMs = options.retryMaxMs ?? DAY_MS;
    this.#now = options.now ?? (() => new Date());
    this.#lock = options.lock;
    this.#announce = options.announce ?? (() => undefined);
    this.#isLeader = options.isLeader ?? (() => true);
  }

  get operator(): TlsCertificate | undefined {
    return this.#operator?.certificate;
  }

  /**
   * Loads the stored certificates (so TLS answers at once), then starts the worker on what is due.
   * Later renewals and retries are queued by `renewDue`, the leader's background task (edge-certificates.ts).
   */
  async start(): Promise<void> {
    const leader = this.#isLeader();
    for (const record of await this.#repository.all()) {
      if (record.certificate !== undefined && record.certificate.expiresAt > this.#now()) this.#install(record.hostname, record.certificate);
      if (leader) this.#queue.add(record.hostname);
    }
    this.#started = true;
    this.#kick();
  }

  /** Stops the loop and waits for an issuance in flight to give up. */
  async close(): Promise<void> {
    this.#queue.clear();
    this.#abort.abort(new Error('the server is stopping'));
    await this.#worker;
  }

  /**
   * A host is served (the API host, an app's first live release, a custom domain added): obtain a
   * certificate in the background if it needs one. Cheap and idempotent; never waits for the CA.
   */
  ensure(hostname: string): void {
    const host = hostname.toLowerCase();
    if (this.#operator?.covers(host, this.#now()) === true) return;
    const held = this.#held.get(host);
    // Renewals are the leader's (its poll finds them); any instance obtains a missing certificate.
    if (held !== undefined && (!this.#renewalDue(held.certificate) || !this.#isLeader())) return;
    this.#queue.add(host);
    this.#kick();
  }

  hostAdded(hostname: string): void {
    this.ensure(hostname);
  }

  /** A host is served no more: its certificate and record are dropped (on every instance). */
  async hostRemoved(hostname: string): Promise<void> {
    const host = hostname.toLowerCase();
    this.#queue.delete(host);
    await this.#repository.remove(host);
    if (this.#held.delete(host)) this.#notify(host, undefined);
    this.#announce(host);
  }

  /**
   * Another instance changed `hostname`'s certificate (obtained, renewed, removed): the stored one
   * replaces what this instance holds, so its edge serves it too.
   */
  async refresh(hostname: string): Promise<void> {
    const host = hostname.toLowerCase();
    const record = await this.#repository.get(host);
    if (record?.certificate !== undefined) {
      if (record.certificate.expiresAt > this.#now()) this.#installIfNew(host, record.certificate);
    } else if (this.#held.delete(host)) {
      this.#notify(host, undefined);
    }
  }

  /**
   * Reads every stored certificate's expiry again and refreshes the hosts whose certificate differs
   * from the one held (a missed announcement, a feed reconnected): the periodic repair.
   */
  async resync(): Promise<void> {
    const stored = new Map((await this.#repository.summaries()).map((s) => [s.hostname, s.expiresAt]));
    for (const [host, expiresAt] of stored) {
      if (expiresAt?.getTime() !== this.#held.get(host)?.certificate.expiresAt.getTime()) await this.refresh(host);
    }
    for (const host of [...this.#held.keys()]) if (!stored.has(host)) await this.refresh(host);
  }

  /** Queues every recorded host, so due renewals and retries run (the leader's poll; also when it becomes the leader). */
  async renewDue(): Promise<void> {
    if (!this.#isLeader()) return;
    try {
      for (const record of await this.#repository.all()) this.#queue.add(record.hostname);
      this.#kick();
    } catch (err) {
      this.#log('warn', 'could not read certificate records', { error: err });
    }
  }

  async statuses(hostnames: readonly string[]): Promise<Map<string, TlsView>> {
    const out = new Map<string, TlsView>();
    for (const hostname of hostnames) {
      if (this.#operator?.covers(hostname, this.#now()) === true) {
        out.set(hostname, { tls_status: 'active', tls_error: null, certificate_expires_at: this.#operator.certificate.expiresAt.toISOString() });
        continue;
      }
      const record = await this.#repository.get(hostname);
      out.set(hostname, viewOf(record));
    }
    return out;
  }

  /** Whether HTTPS can be offered for `hostname` now (plain HTTP to it then answers 308). */
  hasCertificate(hostname: string): boolean {
    const host = hostname.toLowerCase();
    if (this.#operator?.covers(host, this.#now()) === true) return true;
    const held = this.#held.get(host);
    return held !== undefined && held.certificate.expiresAt > this.#now();
  }

  certificateFor(hostname: string): TlsCertificate | undefined {
    const host = hostname.toLowerCase();
    if (this.#operator?.covers(host, this.#now()) === true) return this.#operator.certificate;
    return this.#held.get(host)?.certificate;
  }

  /** The TLS context for an SNI name (the Node plane's SNICallback), or undefined to end the handshake. */
  secureContextFor(servername: string): tls.SecureContext | undefined {
    const host = servername.toLowerCase().replace(/\.$/, '');
    if (this.#operator?.covers(host, this.#now()) === true) return this.#operatorContext;
    return this.#held.get(host)?.context;
  }

  issued(): IterableIterator<[string, TlsCertificate]> {
    const entries = [...this.#held].map(([host, held]): [string, TlsCertificate] => [host, held.certificate]);
    return entries[Symbol.iterator]();
  }

  subscribe(listener: (hostname: string, certificate: TlsCertificate | undefined) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  #kick(): void {
    if (!this.#started || this.#worker !== undefined || this.#queue.size === 0 || this.#abort.signal.aborted) return;
    this.#worker = (async () => {
      while (this.#queue.size > 0 && !this.#abort.signal.aborted) {
        const host = this.#queue.values().next().value as string;
        this.#queue.delete(host);
        try {
          await this.#work(host);
        } catch (err) {
          this.#log('error', `certificate work for ${host} failed`, { error: err });
        }
      }
    })().finally(() => {
      this.#worker = undefined;
      this.#kick();
    });
  }

  /**
   * Obtains (or renews) one host's certificate if it is served, needs one and is not waiting out a
   * backoff, holding the host's lock: an instance that waited finds the certificate another one
   * stored meanwhile and serves it instead of asking the CA again.
   */
  async #work(host: string): Promise<void> {
    if (this.#operator?.covers(host, this.#now()) === true) return;
    const release = this.#lock === undefined ? undefined : await this.#lock(host, this.#abort.signal);
    try {
      await this.#workLocked(host);
    } finally {
      release?.();
    }
  }

  async #workLocked(host: string): Promise<void> {
    if (!this.#isServed(host)) {
      // Never ask the CA for a name Slipway does not serve; forget any record it had.
      await this.hostRemoved(host);
      return;
    }
    const record = await this.#repository.get(host);
    const now = this.#now();
    if (record?.certificate !== undefined && record.certificate.expiresAt > now) this.#installIfNew(host, record.certificate);
    if (record?.certificate !== undefined && (!this.#renewalDue(record.certificate) || !this.#isLeader())) return;
    if (record?.nextAttemptAt !== undefined && record.nextAttemptAt > now) return;
    if (record === undefined) await this.#repository.want(host);
    try {
      const certificate = await this.#issuer.issue(host, this.#abort.signal);
      // The host may have stopped being served while the CA worked: then the certificate is not kept.
      if (!this.#isServed(host)) {
        await this.hostRemoved(host);
        return;
      }
      await this.#repository.saveIssued(host, certificate);
      this.#install(host, certificate);
      this.#announce(host);
      this.#log('info', `certificate for ${host} obtained, valid until ${certificate.expiresAt.toISOString()}`);
    } catch (err) {
      if (this.#abort.signal.aborted) return;
      const attempts = (record?.attempts ?? 0) + 1;
      const delay = Math.min(this.#retryFirstMs * 2 ** (attempts - 1), this.#retryMaxMs);
      const stillValid = record?.certificate !== undefined && record.certificate.expiresAt > this.#now();
      const error = describeFailure(err);
      await this.#repository.saveFailure(host, { status: stillValid ? 'active' : 'failed', error, attempts, nextAttemptAt: new Date(this.#now().getTime() + delay) });
      this.#log('warn', `could not obtain a certificate for ${host} (attempt ${attempts}; next in ${Math.round(delay / 1000)} s): ${error}`);
      this.#onFailure?.(host, error);
    }
  }

  #renewalDue(certificate: TlsCertificate): boolean {
    return certificate.expiresAt.getTime() - this.#renewBeforeMs <= this.#now().getTime();
  }

  #install(host: string, certificate: TlsCertificate): void {
    this.#held.set(host, { certificate, context: secureContext(certificate) });
    this.#notify(host, certificate);
  }

  /** Installs `certificate` unless it is the one held already. */
  #installIfNew(host: string, certificate: TlsCertificate): void {
    const held = this.#held.get(host)?.certificate;
    if (held?.certPem === certificate.certPem && held.expiresAt.getTime() === certificate.expiresAt.getTime()) return;
    this.#install(host, certificate);
  }

  #notify(host: string, certificate: TlsCertificate | undefined): void {
    for (const listener of this.#listeners) {
      try {
        listener(host, certificate);
      } catch (err) {
        this.#log('error', 'a certificate listener threw', { host, error: err });
      }
    }
  }
}

function secureContext(certificate: TlsCertificate): tls.SecureContext {
  return tls.createSecureContext({ cert: certificate.certPem, key: certificate.keyPem });
}

function viewOf(record: CertificateRecord | undefined): TlsView {
  if (record === undefined) return { tls_status: 'pending', tls_error: null, certificate_expires_at: null };
  return {
    tls_status: record.status,
    tls_error: record.status === 'pending' ? null : record.error,
    certificate_expires_at: record.certificate?.expiresAt.toISOString() ?? null,
  };
}

/** A one-line reason for a failed issuance, safe to show to the domain's owner (no key material). */
function describeFailure(err: unknown): string {
  const message = err instanceof Error ? err.message : String(err);
  return message.replace(/\s+/g, ' ').trim().slice(0, 500) || 'the certificate authority refused the order';
}
