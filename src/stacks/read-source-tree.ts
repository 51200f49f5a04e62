// A source directory as the detectors see it: listed without following links, minus what .dockerignore leaves out.
import fs from 'node:fs';
import path from 'node:path';
import { parseIgnoreRules, type IgnoreMatcher } from '../source/ignore-rules.js';
import { listedTree, type SourceTree } from './source-tree.js';

/** How deep the listing goes: the detectors look at the root, cmd/<name>/ and <package>/ files. */
const MAX_DEPTH = 3;
/** Most entries listed (a huge source is still detected by its root files). */
const MAX_ENTRIES = 20_000;
/** Largest file a detector reads. */
const MAX_TEXT_BYTES = 1024 * 1024;
/** Directories listed but never walked: big, and only their presence matters. */
const NOT_WALKED = new Set(['node_modules', '.git', 'vendor']);

export interface ReadSourceOptions {
  /**
   * Read `dir` as `slipway deploy` uploads it (src/cli/pack.ts) rather than as a build context:
   * `.dockerignore`, else `.gitignore`; `.git` and the root's slipway.json left out. What the CLI's
   * `slipway dockerfile` detects is then what the server detects in that upload.
   */
  readonly asUploaded?: boolean;
}

/** Files `slipway deploy` never uploads (src/cli/pack.ts). */
const NOT_UPLOADED = new Set(['.git', 'slipway.json']);

/**
 * Lists `dir` (its root and a few levels below) as the build context would send it: paths the
 * `.dockerignore` excludes are left out, symbolic links are never followed (a link is listed as
 * present but cannot be read). Files are read on demand, each at most 1 MiB.
 */
export function readSourceTree(dir: string, options: ReadSourceOptions = {}): SourceTree {
  const rules = ignoreRules(dir, options.asUploaded === true ? ['dockerignore', 'gitignore'] : ['dockerignore']);
  const dirs = new Set<string>(['']);
  const files = new Set<string>();
  const walk = (rel: string, depth: number): void => {
    let names: string[];
    try {
      names = fs.readdirSync(path.join(dir, rel)).sort();
    } catch {
      return;
    }
    for (const name of names) {
      if (dirs.size + files.size >= MAX_ENTRIES) return;
      const child = rel === '' ? name : `${rel}/${name}`;
      if (options.asUploaded === true && (name === '.git' || (rel === '' && NOT_UPLOADED.has(name)))) continue;
      const stat = lstatOrNull(path.join(dir, child));
      if (stat === null) continue;
      const isDir = stat.isDirectory();
      if (rules?.excludes(child, isDir) === true && !(isDir && rules.mayReincludeBelow(child))) continue;
      if (!isDir) {
        files.add(child);
        continue;
      }
      dirs.add(child);
      if (depth < MAX_DEPTH && !NOT_WALKED.has(name)) walk(child, depth + 1);
      // vendor/modules.txt is what marks Go's vendored modules.
      if (name === 'vendor' && lstatOrNull(path.join(dir, child, 'modules.txt'))?.isFile() === true) files.add(`${child}/modules.txt`);
    }
  };
  walk('', 1);
  return listedTree(dirs, files, (rel) => {
    const file = path.join(dir, rel);
    const stat = lstatOrNull(file);
    if (stat === null || !stat.isFile() || stat.size > MAX_TEXT_BYTES) return undefined;
    return fs.readFileSync(file, 'utf8');
  });
}

/** The rules of the first of `.dockerignore`/`.gitignore` (in `flavors`' order) that is a regular file. */
function ignoreRules(dir: string, flavors: ReadonlyArray<'dockerignore' | 'gitignore'>): IgnoreMatcher | undefined {
  for (const flavor of flavors) {
    const file = path.join(dir, `.${flavor}`);
    if (lstatOrNull(file)?.isFile() === true) return parseIgnoreRules(fs.readFileSync(file, 'utf8'), flavor);
  }
  return undefined;
}

function lstatOrNull(file: string): fs.Stats | null {
  try {
    return fs.lstatSync(file);
  } catch {
    return null;
  }
}
