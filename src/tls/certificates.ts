// The certificate port: what a data plane reads to terminate TLS, and what the control plane records per host.

import type { TlsCertificate } from '../proxy/certificate-source.js';

/** The data planes' side of the port is declared where they use it (src/proxy/certificate-source.ts). */
export type { CertificateSource, TlsCertificate } from '../proxy/certificate-source.js';

/** A host's certificate record: the state the API shows, and the certificate once there is one. */
export interface CertificateRecord {
  readonly hostname: string;
  readonly status: 'pending' | 'active' | 'failed';
  readonly error: string | null;
  readonly certificate: TlsCertificate | undefined;
  readonly attempts: number;
  readonly nextAttemptAt: Date | undefined;
}

/** Where certificate records live (implemented in src/db/, which encrypts every private key at rest). */
export interface CertificateRepository {
  get(hostname: string): Promise<CertificateRecord | undefined>;
  all(): Promise<CertificateRecord[]>;
  /** Every record's host and its certificate's expiry (none yet: undefined), without the keys (the periodic resync). */
  summaries(): Promise<Array<{ hostname: string; expiresAt: Date | undefined }>>;
  /** Records that a host wants a certificate (no-op when it has a record). */
  want(hostname: string): Promise<void>;
  /** Stores a certificate obtained for a host: status `active`, error and attempts cleared. */
  saveIssued(hostname: string, certificate: TlsCertificate): Promise<void>;
  /** Records a failed attempt: the status, the error and when to try again. */
  saveFailure(hostname: string, failure: { status: 'active' | 'failed'; error: string; attempts: number; nextAttemptAt: Date }): Promise<void>;
  remove(hostname: string): Promise<void>;
  /** The ACME account key of a directory (PEM), if one was made. */
  accountKey(directoryUrl: string): Promise<string | undefined>;
  saveAccountKey(directoryUrl: string, keyPem: string): Promise<void>;
}

/** Obtains a certificate for one host (ACME HTTP-01 in production). */
export interface CertificateIssuer {
  issue(hostname: string, signal: AbortSignal): Promise<TlsCertificate>;
}
