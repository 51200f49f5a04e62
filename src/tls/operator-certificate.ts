// The operator's certificate (SLIPWAY_TLS_CERT_FILE/_KEY_FILE): loaded once, used for every host it covers.
import crypto from 'node:crypto';
import fs from 'node:fs';
import { ConfigError } from '../config.js';
import type { TlsCertificate } from './certificates.js';

/** A loaded operator certificate and the DNS names (wildcards included) it was issued for. */
export interface OperatorCertificate {
  readonly certificate: TlsCertificate;
  readonly names: readonly string[];
  /** Whether it is valid for `hostname` now (exact name, or `*.rest` for one more label; not expired). */
  covers(hostname: string, now?: Date): boolean;
}

/** Reads and checks the operator's certificate chain and key; a bad pair stops the start with a ConfigError. */
export function loadOperatorCertificate(certFile: string, keyFile: string): OperatorCertificate {
  let certPem: string;
  let keyPem: string;
  try {
    certPem = fs.readFileSync(certFile, 'utf8');
    keyPem = fs.readFileSync(keyFile, 'utf8');
  } catch (err) {
    throw new ConfigError(`cannot read SLIPWAY_TLS_CERT_FILE/SLIPWAY_TLS_KEY_FILE: ${(err as Error).message}`);
  }
  let leaf: crypto.X509Certificate;
  try {
    leaf = new crypto.X509Certificate(certPem);
  } catch {
    throw new ConfigError(`SLIPWAY_TLS_CERT_FILE (${certFile}) holds no PEM certificate`);
  }
  let key: crypto.KeyObject;
  try {
    key = crypto.createPrivateKey(keyPem);
  } catch {
    throw new ConfigError(`SLIPWAY_TLS_KEY_FILE (${keyFile}) holds no PEM private key`);
  }
  if (!leaf.checkPrivateKey(key)) throw new ConfigError('SLIPWAY_TLS_KEY_FILE is not the private key of the certificate in SLIPWAY_TLS_CERT_FILE');
  return operatorCertificate({ certPem, keyPem, expiresAt: new Date(leaf.validTo) }, certificateNames(leaf));
}

/** An operator certificate over given names (the names are lower case; `*.` wildcards allowed). */
export function operatorCertificate(certificate: TlsCertificate, names: readonly string[]): OperatorCertificate {
  const exact = new Set(names.filter((n) => !n.startsWith('*.')));
  const wildcards = new Set(names.filter((n) => n.startsWith('*.')).map((n) => n.slice(2)));
  return {
    certificate,
    names,
    covers(hostname, now = new Date()) {
      if (now >= certificate.expiresAt) return false;
      const host = hostname.toLowerCase();
      if (exact.has(host)) return true;
      const dot = host.indexOf('.');
      return dot > 0 && wildcards.has(host.slice(dot + 1));
    },
  };
}

/** The DNS names of a certificate: its subjectAltName DNS entries, else its subject CN. */
export function certificateNames(cert: crypto.X509Certificate): string[] {
  const san = cert.subjectAltName;
  if (san !== undefined && san !== '') {
    const names = san
      .split(',')
      .map((part) => part.trim())
      .filter((part) => part.startsWith('DNS:'))
      .map((part) => part.slice(4).toLowerCase());
    if (names.length > 0) return names;
  }
  const cn = /(?:^|\n)CN=([^\n]+)/.exec(cert.subject)?.[1];
  return cn === undefined ? [] : [cn.toLowerCase()];
}
