// App host names: the DNS-label rule and the labels Slipway keeps for itself.
import { DomainError } from './errors.js';

/** A DNS label: 1-63 characters of a-z 0-9 -, not starting or ending with -. */
export const DNS_LABEL = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;

/** Labels that never name an app: they are, or may become, Slipway's own hosts. */
export const RESERVED_SUBDOMAINS = new Set(['api', 'www', 'admin', 'app', 'dashboard', 'tunnel']);

/**
 * Normalizes a subdomain (lower case) and checks it is a DNS label that is not reserved.
 * Returns the normalized label, or throws validation_error.
 */
export function normalizeSubdomain(value: string): string {
  const label = value.trim().toLowerCase();
  if (!DNS_LABEL.test(label)) {
    throw new DomainError(
      'validation_error',
      'subdomain must be 1-63 characters of a-z, 0-9 and "-", not starting or ending with "-"',
    );
  }
  if (RESERVED_SUBDOMAINS.has(label)) throw new DomainError('validation_error', `subdomain "${label}" is reserved`);
  return label;
}
