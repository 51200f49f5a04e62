// Certificates by ACME HTTP-01, through the acme-client library: one account per directory, one order per host.
import crypto from 'node:crypto';
import fs from 'node:fs';
import https from 'node:https';
import tls from 'node:tls';
import * as acme from 'acme-client';
import { ConfigError } from '../config.js';
import type { CertificateIssuer, CertificateRepository, TlsCertificate } from './certificates.js';
import type { ChallengeStore } from './http-challenges.js';

export interface AcmeIssuerOptions {
  readonly directoryUrl: string;
  readonly email: string | undefined;
  /** PEM of an extra CA the directory's TLS certificate chains to (a test CA); the system's roots stay trusted. */
  readonly caFile: string | undefined;
  /** Where the account key is kept (encrypted). */
  readonly repository: Pick<CertificateRepository, 'accountKey' | 'saveAccountKey'>;
  /** Where the key authorizations wait for the CA (the database: every instance answers them). */
  readonly challenges: Pick<ChallengeStore, 'set' | 'delete'>;
  /** Longest time one issuance may take (default 5 minutes). */
  readonly timeoutMs?: number;
}

const DEFAULT_TIMEOUT_MS = 5 * 60_000;

/**
 * An issuer over one ACME directory. acme-client's HTTP client is one instance in the library, so
 * its settings (the extra CA, no proxy from the environment, a request timeout) are made once here
 * for the process: one Slipway server uses one directory.
 */
export function createAcmeIssuer(options: AcmeIssuerOptions): CertificateIssuer {
  const httpClient = acme.axios;
  httpClient.defaults.proxy = false;
  httpClient.defaults.timeout = 30_000;
  if (options.caFile !== undefined) {
    let extra: string;
    try {
      extra = fs.readFileSync(options.caFile, 'utf8');
    } catch (err) {
      throw new ConfigError(`cannot read SLIPWAY_ACME_CA_FILE: ${(err as Error).message}`);
    }
    httpClient.defaults.httpsAgent = new https.Agent({ ca: [...tls.rootCertificates, extra], keepAlive: true });
  }
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  let client: Promise<acme.Client> | undefined;

  const accountClient = async (): Promise<acme.Client> => {
    let key = await options.repository.accountKey(options.directoryUrl);
    if (key === undefined) {
      key = (await acme.crypto.createPrivateEcdsaKey('P-256')).toString('utf8');
      await options.repository.saveAccountKey(options.directoryUrl, key);
    }
    // Few, short waits while the CA validates (it fetches the challenge from us).
    return new acme.Client({ directoryUrl: options.directoryUrl, accountKey: key, backoffAttempts: 20, backoffMin: 500, backoffMax: 5000 });
  };

  return {
    async issue(hostname: string, signal: AbortSignal): Promise<TlsCertificate> {
      client ??= accountClient().catch((err: unknown) => {
        client = undefined;
        throw err;
      });
      const acmeClient = await client;
      const [keyBuffer, csr] = await acme.crypto.createCsr({ altNames: [hostname] }, await acme.crypto.createPrivateEcdsaKey('P-256'));
      const tokens: string[] = [];
      const order = acmeClient.auto({
        csr,
        ...(options.email === undefined ? {} : { email: options.email }),
        termsOfServiceAgreed: true,
        challengePriority: ['http-01'],
        // The CA checks the challenge itself; a self-check would dial port 80 of the name from here.
        skipChallengeVerification: true,
        challengeCreateFn: async (_authz, challenge, keyAuthorization) => {
          tokens.push(challenge.token);
          await options.challenges.set(challenge.token, keyAuthorization);
        },
        challengeRemoveFn: async (_authz, challenge) => {
          await options.challenges.delete(challenge.token);
        },
      });
      try {
        const certPem = await abortable(order, signal, timeoutMs, `obtaining a certificate for ${hostname}`);
        const leaf = new crypto.X509Certificate(certPem);
        return { certPem, keyPem: keyBuffer.toString('utf8'), expiresAt: new Date(leaf.validTo) };
      } finally {
        for (const token of tokens) await options.challenges.delete(token).catch(() => undefined);
        order.catch(() => undefined);
      }
    },
  };
}

/** `promise`, or a rejection when `signal` aborts or `timeoutMs` passes (the library takes no signal). */
function abortable<T>(promise: Promise<T>, signal: AbortSignal, timeoutMs: number, what: string): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const onAbort = (): void => finish(() => reject(signal.reason instanceof Error ? signal.reason : new Error(`${what} was cancelled`)));
    const timer = setTimeout(() => finish(() => reject(new Error(`${what} took longer than ${Math.round(timeoutMs / 1000)} s`))), timeoutMs);
    const finish = (settle: () => void): void => {
      clearTimeout(timer);
      signal.removeEventListener('abort', onAbort);
      settle();
    };
    if (signal.aborted) return onAbort();
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (value) => finish(() => resolve(value)),
      (err: unknown) => finish(() => reject(err)),
    );
  });
}
