// The certificate port of the data planes (decisions §8): what the edge presents for a TLS name, declared here where the planes use it; the tls folder implements it.

/** A certificate chain and its private key, in PEM, for the names it covers. */
export interface TlsCertificate {
  /** The leaf first, then the chain. */
  readonly certPem: string;
  /** The private key in plain text: held in memory only, never written unencrypted. */
  readonly keyPem: string;
  readonly expiresAt: Date;
}

/**
 * Where a data plane gets certificates (the Node plane through SNICallback, HAProxy through its
 * runtime API: `new ssl cert`, `set ssl cert`, `commit ssl cert`, `add ssl crt-list`). ACME
 * certificates are per host; the operator's certificate (if any) covers the names it lists.
 */
export interface CertificateSource {
  /** The certificate to present for an SNI name now, if any (the operator's when it covers the name). */
  certificateFor(hostname: string): TlsCertificate | undefined;
  /** The operator's certificate (SLIPWAY_TLS_CERT_FILE/_KEY_FILE), served for every name it covers. */
  readonly operator: TlsCertificate | undefined;
  /** Every ACME certificate held now, by host. */
  issued(): IterableIterator<[string, TlsCertificate]>;
  /** Calls `listener` when a host's ACME certificate is installed, replaced (renewal) or dropped. */
  subscribe(listener: (hostname: string, certificate: TlsCertificate | undefined) => void): () => void;
}
