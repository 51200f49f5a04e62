// `.dockerignore` and `.gitignore` rules: which paths of a folder stay out of an uploaded source.

/** Which file the rules came from: they anchor patterns differently. */
export type IgnoreFlavor = 'dockerignore' | 'gitignore';

interface Rule {
  readonly negate: boolean;
  readonly dirOnly: boolean;
  readonly pattern: RegExp;
  /** The pattern up to its first wildcard: where an exception can match at all. */
  readonly literalPrefix: string;
}

/** Decides for a slash-separated path relative to the folder root. */
export interface IgnoreMatcher {
  /** True when `path` is excluded (a rule matches it or one of its parent directories; last rule wins). */
  excludes(path: string, isDirectory: boolean): boolean;
  /** True when an exception (`!rule`) may re-include something below excluded directory `path`. */
  mayReincludeBelow(path: string): boolean;
}

/**
 * Parses ignore rules: `*`, `?`, `[...]`, `**`, `!` exceptions, `#` comments, last match wins, a
 * matching directory excludes its contents. `.dockerignore` patterns are relative to the root;
 * `.gitignore` patterns without an inner slash match at any depth and a trailing `/` means
 * directories only.
 */
export function parseIgnoreRules(text: string, flavor: IgnoreFlavor): IgnoreMatcher {
  const rules: Rule[] = [];
  for (const raw of text.split(/\r?\n/)) {
    let line = flavor === 'gitignore' ? raw.replace(/(?<!\\)\s+$/, '') : raw.trim();
    if (line === '' || line.startsWith('#')) continue;
    const negate = line.startsWith('!');
    if (negate) line = line.slice(1);
    if (flavor === 'dockerignore') line = line.trim();
    const dirOnly = flavor === 'gitignore' && line.endsWith('/');
    line = line.replace(/\/+$/, '');
    const anchored = flavor === 'dockerignore' || line.includes('/');
    line = line.replace(/^(\.?\/)+/, '');
    if (line === '' || line === '.') continue;
    const glob = anchored ? line : `**/${line}`;
    rules.push({ negate, dirOnly, pattern: globToRegExp(glob), literalPrefix: glob.split(/[*?[\\]/, 1)[0] ?? '' });
  }
  const exceptions = rules.filter((r) => r.negate);

  const matches = (rule: Rule, path: string, isDirectory: boolean): boolean => {
    if (rule.pattern.test(path)) return !rule.dirOnly || isDirectory;
    // A rule matching a parent directory matches everything inside it.
    for (let i = path.indexOf('/'); i !== -1; i = path.indexOf('/', i + 1)) {
      if (rule.pattern.test(path.slice(0, i))) return true;
    }
    return false;
  };

  return {
    excludes(path, isDirectory) {
      let excluded = false;
      for (const rule of rules) if (matches(rule, path, isDirectory)) excluded = !rule.negate;
      return excluded;
    },
    mayReincludeBelow(path) {
      const dir = `${path}/`;
      return exceptions.some((r) => r.literalPrefix.startsWith(dir) || dir.startsWith(r.literalPrefix));
    },
  };
}

function globToRegExp(glob: string): RegExp {
  let re = '';
  for (let i = 0; i < glob.length; i++) {
    const c = glob.charAt(i);
    if (c === '*' && glob.charAt(i + 1) === '*') {
      i++;
      if (glob.charAt(i + 1) === '/') {
        i++;
        re += '(?:.*/)?';
      } else {
        re += '.*';
      }
    } else if (c === '*') {
      re += '[^/]*';
    } else if (c === '?') {
      re += '[^/]';
    } else if (c === '[' && glob.indexOf(']', i + 2) !== -1) {
      const end = glob.indexOf(']', i + 2);
      let body = glob.slice(i + 1, end);
      if (body.startsWith('!') || body.startsWith('^')) body = `^${body.slice(1)}`;
      re += `[${body.replace(/\\/g, '\\\\')}]`;
      i = end;
    } else if (c === '\\' && i + 1 < glob.length) {
      i++;
      re += escapeRegExp(glob.charAt(i));
    } else {
      re += escapeRegExp(c);
    }
  }
  return new RegExp(`^${re}$`);
}

function escapeRegExp(c: string): string {
  return /[.*+?^${}()|[\]\\/]/.test(c) ? `\\${c}` : c;
}
