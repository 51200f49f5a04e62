// Pure validators for a git deployment's `repo_url` and `branch`, refusing anything git could read as an option or transport.

/** Longest repository URL accepted. */
const MAX_URL_LENGTH = 2048;
/** Longest branch name accepted (a git ref component has no hard limit; file systems do). */
const MAX_BRANCH_LENGTH = 255;

/** Characters never accepted in a URL: harmless to execFile, but a shell or a log reader could be fooled by them. */
const URL_FORBIDDEN = /[`$;|&<>\\"'{}^]/;
/** A host name (labels of letters, digits and inner hyphens), an IPv4 literal, or a bracketed IPv6 literal. */
const HOST_NAME = /^(?=.{1,253}$)[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*\.?$/i;
const IPV6_LITERAL = /^\[[0-9a-f:.]+\]$/i;
/** A user name before `@` in ssh forms (`git@host:path`, `ssh://git@host/path`). */
const SSH_USER = /^[a-z0-9_][a-z0-9._-]{0,63}$/i;
/** scp-like syntax: `user@host:path`. */
const SCP_LIKE = /^([^@/:]+)@([^@/:]+):(.+)$/;
/** `<scheme>://` at the start. */
const SCHEME = /^([a-z][a-z0-9+.-]*):\/\//i;
/** git's `<transport>::<address>` remote-helper syntax (ext::, fd::, …). */
const TRANSPORT_PREFIX = /^[a-z0-9+.-]*::/i;

function hostProblem(host: string): string | null {
  if (host === '') return 'repo_url has no host';
  if (host.startsWith('-')) return 'repo_url host must not start with "-"';
  if (IPV6_LITERAL.test(host) || HOST_NAME.test(host)) return null;
  return 'repo_url host is not a valid host name';
}

/**
 * Checks a repository URL before it is stored or handed to git. Accepts `https://`, `http://`, `git://`, `ssh://`
 * URLs and scp-like `user@host:path`; `file://` only when `allowFile`. Refuses option-like values,
 * `<transport>::` forms such as `ext::`, other schemes, whitespace, control or non-ASCII characters,
 * shell metacharacters, credentials in http(s) URLs (a user name is allowed for ssh only), and an empty host.
 * @returns null when acceptable, else a message for a `validation_error`.
 */
export function validateRepoUrl(value: string, options: { allowFile?: boolean } = {}): string | null {
  if (typeof value !== 'string' || value === '') return 'repo_url is required';
  if (value.length > MAX_URL_LENGTH) return `repo_url must be at most ${MAX_URL_LENGTH} characters`;
  if (value.startsWith('-')) return 'repo_url must not start with "-"';
  // Printable ASCII only: no spaces, newlines, control characters or look-alike Unicode.
  if (!/^[\x21-\x7e]+$/.test(value)) return 'repo_url must not contain spaces, control or non-ASCII characters';
  if (TRANSPORT_PREFIX.test(value)) return 'repo_url must not use a "<transport>::" remote helper such as ext::';
  if (URL_FORBIDDEN.test(value)) return 'repo_url contains a character that is not allowed (one of ` $ ; | & < > \\ " \' { } ^)';

  const scheme = SCHEME.exec(value)?.[1]?.toLowerCase();
  if (scheme === undefined) return validateScpLike(value);
  if (scheme === 'file') {
    if (options.allowFile !== true) return 'repo_url must not be a file:// URL (a server that should reach such repositories is started with SLIPWAY_ALLOW_PRIVATE_GIT=true)';
    return value.length > 'file://'.length ? null : 'repo_url file:// URL has no path';
  }
  if (scheme !== 'https' && scheme !== 'http' && scheme !== 'git' && scheme !== 'ssh') {
    return 'repo_url must start with https://, http://, git://, ssh:// or be like git@host:path';
  }

  // Only plain host characters between "://" and the path: no percent-encoding or tricks a parser could read differently.
  const authority = value.slice(value.indexOf('://') + 3).split(/[/?#]/, 1)[0] ?? '';
  if (!/^[a-z0-9._~@:[\]-]+$/i.test(authority)) return 'repo_url host part contains a character that is not allowed';

  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return 'repo_url is not a valid URL';
  }
  const problem = hostProblem(url.hostname);
  if (problem !== null) return problem;
  if (url.password !== '') return 'repo_url must not contain a password or token';
  if (url.username !== '') {
    if (scheme !== 'ssh') return 'repo_url must not contain credentials (a user name is allowed for ssh:// only)';
    if (!SSH_USER.test(url.username)) return 'repo_url user name is not valid';
  }
  if (url.pathname === '' || url.pathname === '/') return 'repo_url has no repository path';
  return null;
}

function validateScpLike(value: string): string | null {
  const match = SCP_LIKE.exec(value);
  if (match === null) return 'repo_url must start with https://, http://, git://, ssh:// or be like git@host:path';
  const [, user = '', host = '', path = ''] = match;
  if (!SSH_USER.test(user)) return 'repo_url user name is not valid';
  const problem = hostProblem(host);
  if (problem !== null) return problem;
  // The path is handed to the remote's git-upload-pack; an option-like one must never get that far.
  if (path.startsWith('-')) return 'repo_url path must not start with "-"';
  return null;
}

/** Characters git forbids in ref names, plus shell metacharacters no sane branch needs. */
const BRANCH_FORBIDDEN = /[~^:?*[\\`$;|&<>'"()]/;

/**
 * Checks a branch name against `git check-ref-format --branch` rules, stricter where safety asks:
 * never starting with `-`, no `..`, `@{`, `//`, control characters, spaces or `~^:?*[\`, no component
 * starting with `.` or ending with `.lock`, not ending with `/` or `.`, not `@` or `HEAD`, at most
 * 255 characters, and no shell metacharacters.
 * @returns null when acceptable, else a message for a `validation_error`.
 */
export function validateBranchName(value: string): string | null {
  if (typeof value !== 'string' || value === '') return 'branch must not be empty';
  if (value.length > MAX_BRANCH_LENGTH) return `branch must be at most ${MAX_BRANCH_LENGTH} characters`;
  if (value.startsWith('-')) return 'branch must not start with "-"';
  // Letters of any script are valid in git; whitespace, control and format characters are not.
  if (/[\p{C}\p{Z}\s]/u.test(value)) return 'branch must not contain spaces or control characters';
  if (BRANCH_FORBIDDEN.test(value)) return 'branch contains a character that is not allowed (one of ~ ^ : ? * [ \\ ` $ ; | & < > \' " ( ))';
  if (value === '@' || value === 'HEAD') return `branch must not be "${value}"`;
  if (value.includes('..')) return 'branch must not contain ".."';
  if (value.includes('@{')) return 'branch must not contain "@{"';
  if (value.startsWith('/') || value.endsWith('/') || value.includes('//')) {
    return 'branch must not start or end with "/" or contain "//"';
  }
  if (value.endsWith('.')) return 'branch must not end with "."';
  for (const part of value.split('/')) {
    if (part.startsWith('.')) return 'branch path components must not start with "."';
    if (part.endsWith('.lock')) return 'branch path components must not end with ".lock"';
  }
  return null;
}
