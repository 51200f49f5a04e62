// Custom domain names: a user's hostname as Slipway stores it (lower-case A-label), or why it is refused.
import { isIP } from 'node:net';
import { domainToASCII } from 'node:url';
import { DNS_LABEL } from './dns-label.js';

/** Longest DNS name, in characters of its A-label form without the trailing dot. */
export const MAX_HOSTNAME_LENGTH = 253;

/** Characters that make the URL parser read a host as something else (a path, a port, user info, an escape). */
const NOT_IN_A_NAME = /[\s/\\?#@:%[\]<>^|"'`{}\u0000-\u001f\u007f]/u;

/** A last label the URL parser takes for an IPv4 number (`127.1`, `0x7f.1`): TLDs are never numeric. */
const NUMERIC_LABEL = /^(?:0x[0-9a-f]*|\d+)$/i;

/**
 * The stored form of a hostname a user names: trimmed, one trailing dot dropped, folded to lower
 * case, an internationalized name converted to its A-label (punycode) form. Returns `{problem}`
 * when it is not a DNS name of at least two labels and at most 253 characters, is an IP literal,
 * or is `appDomain` or a name under it (those are Slipway's own hosts).
 */
export function normalizeHostname(input: string, appDomain: string): { hostname: string } | { problem: string } {
  let text = input.trim();
  if (text.endsWith('.')) text = text.slice(0, -1);
  if (text === '') return { problem: 'hostname is empty' };
  if (text.length > 1024 || NOT_IN_A_NAME.test(text)) return { problem: 'hostname must be a DNS name such as "www.example.com" (no scheme, port or path)' };
  if (isIP(text) !== 0) return { problem: 'hostname must be a DNS name, not an IP address' };
  const lastLabel = text.slice(text.lastIndexOf('.') + 1);
  if (NUMERIC_LABEL.test(lastLabel)) return { problem: 'hostname must be a DNS name, not an IP address' };
  const ascii = domainToASCII(text).toLowerCase();
  if (ascii === '') return { problem: 'hostname is not a valid internationalized domain name' };
  if (ascii.length > MAX_HOSTNAME_LENGTH) return { problem: `hostname must be at most ${MAX_HOSTNAME_LENGTH} characters (as an A-label)` };
  if (isIP(ascii) !== 0) return { problem: 'hostname must be a DNS name, not an IP address' };
  const labels = ascii.split('.');
  if (labels.length < 2) return { problem: 'hostname must have at least two labels, such as "example.com"' };
  if (!labels.every((label) => DNS_LABEL.test(label))) {
    return { problem: 'each label of hostname must be 1-63 characters of a-z, 0-9 and "-", not starting or ending with "-"' };
  }
  const own = appDomain.toLowerCase();
  if (ascii === own || ascii.endsWith(`.${own}`)) return { problem: `hostname cannot be ${own} or a name under it: those are this server's own hosts` };
  return { hostname: ascii };
}
