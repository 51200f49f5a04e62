// Archive path rules: entry paths split safely, and symlink targets resolved against the archive's own tree.
import { DomainError } from '../core/errors.js';

/** Longest entry path or link target accepted (Linux PATH_MAX). */
export const MAX_PATH_BYTES = 4096;
/** Deepest entry path accepted, in segments (node-tar's CVE-2024-28863 was a depth DoS). */
const MAX_DEPTH = 256;
/** Symlinks followed while resolving one target, as the kernel's ELOOP limit. */
const MAX_LINK_HOPS = 40;

export const invalid = (message: string): DomainError => new DomainError('validation_error', message);

/** Quotes an archive-supplied string for an error message, escaped and bounded. */
export function quote(value: string): string {
  const shown = value.length > 200 ? `${value.slice(0, 200)}…` : value;
  return JSON.stringify(shown);
}

export function isAbsoluteLike(p: string): boolean {
  // POSIX absolute, Windows UNC/root-relative, or a drive letter ("C:" with or without a slash).
  return p.startsWith('/') || p.startsWith('\\') || /^[A-Za-z]:/.test(p);
}

/**
 * Splits an archive path into its segments, dropping "." and empty ones (so "./a//b/" is a/b).
 * Throws validation_error for an absolute path, a ".." segment (with / or \ as separator),
 * a NUL byte, or a path too long or too deep. An empty result names the root itself.
 */
export function splitSafePath(raw: string, what: string): string[] {
  if (raw.includes('\0')) throw invalid(`${what} ${quote(raw)} contains a NUL byte`);
  if (Buffer.byteLength(raw) > MAX_PATH_BYTES) throw invalid(`${what} ${quote(raw)} is longer than ${MAX_PATH_BYTES} bytes`);
  if (isAbsoluteLike(raw)) throw invalid(`${what} ${quote(raw)} is an absolute path`);
  if (raw.split(/[\\/]/).includes('..')) throw invalid(`${what} ${quote(raw)} contains a ".." segment`);
  const segments = raw.split('/').filter((s) => s !== '' && s !== '.');
  if (segments.length > MAX_DEPTH) throw invalid(`${what} ${quote(raw)} is deeper than ${MAX_DEPTH} directories`);
  return segments;
}

/** What the archive has put at a path so far; hard links are files (they share a regular file's inode). */
export type TreeNode =
  | { readonly kind: 'dir'; readonly children: Map<string, TreeNode>; mode: number | undefined }
  | { readonly kind: 'file' }
  | { readonly kind: 'symlink'; readonly target: string };

export const childOf = (node: TreeNode | undefined, name: string): TreeNode | undefined =>
  node?.kind === 'dir' ? node.children.get(name) : undefined;

/**
 * Resolves symlink `target` from directory `linkDir` of the tree the way the kernel would,
 * following the archive's other symlinks when `follow` (a ".." after a symlink climbs from where the
 * link points, not from where it sits). Lexical when not following. Returns why it is refused, or undefined.
 */
export function symlinkEscape(root: TreeNode, linkDir: readonly string[], target: string, follow: boolean): string | undefined {
  const stack: Array<TreeNode | undefined> = [root];
  for (const segment of linkDir) stack.push(childOf(stack[stack.length - 1], segment));
  const pending = target.split('/').reverse();
  let hops = 0;
  while (pending.length > 0) {
    const segment = pending.pop();
    if (segment === undefined || segment === '' || segment === '.') continue;
    if (segment === '..') {
      if (stack.length === 1) return 'points outside the archive';
      stack.pop();
      continue;
    }
    const node = childOf(stack[stack.length - 1], segment);
    if (follow && node?.kind === 'symlink') {
      if (++hops > MAX_LINK_HOPS) return 'is part of a symlink loop';
      if (isAbsoluteLike(node.target)) return 'points outside the archive';
      pending.push(...node.target.split('/').reverse());
      continue;
    }
    stack.push(node);
  }
  return undefined;
}
