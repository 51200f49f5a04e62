// What the stack detectors read: a source's file listing and the text of the few files they open.

/** A source as the detectors see it: relative forward-slash paths, and the text of small files. */
export interface SourceTree {
  /** Every file and directory path that reaches the build context (after `.dockerignore`). */
  has(path: string): boolean;
  /** Whether `path` is a directory. */
  isDirectory(path: string): boolean;
  /** The direct children of a directory (names, sorted); empty when it has none. */
  children(dir: string): string[];
  /** The text of a file, or undefined when it is absent, not a regular file or too large to read. */
  text(path: string): string | undefined;
}

/**
 * A tree from a map of path → text (a path ending in `/` is a directory): how tests and the CLI's
 * unit tests describe a source. Parent directories are implied.
 */
export function treeOf(files: Readonly<Record<string, string>>): SourceTree {
  const texts = new Map<string, string>();
  const dirs = new Set<string>(['']);
  for (const [raw, content] of Object.entries(files)) {
    const isDir = raw.endsWith('/');
    const path = raw.replace(/\/+$/, '');
    const parts = path.split('/');
    for (let i = 1; i < parts.length; i += 1) dirs.add(parts.slice(0, i).join('/'));
    if (isDir) dirs.add(path);
    else texts.set(path, content);
  }
  return listedTree(dirs, new Set(texts.keys()), (path) => texts.get(path));
}

/** A tree over known directories and files; `read` gives a listed file's text (undefined: unreadable). */
export function listedTree(dirs: ReadonlySet<string>, files: ReadonlySet<string>, read: (path: string) => string | undefined): SourceTree {
  const children = new Map<string, Set<string>>();
  const add = (path: string): void => {
    if (path === '') return;
    const cut = path.lastIndexOf('/');
    const parent = cut < 0 ? '' : path.slice(0, cut);
    let set = children.get(parent);
    if (set === undefined) children.set(parent, (set = new Set()));
    set.add(path.slice(cut + 1));
  };
  for (const dir of dirs) add(dir);
  for (const file of files) add(file);
  return {
    has: (path) => dirs.has(path) || files.has(path),
    isDirectory: (path) => dirs.has(path),
    children: (dir) => [...(children.get(dir) ?? [])].sort(),
    text: (path) => (files.has(path) ? read(path) : undefined),
  };
}
