// The static site detector: an index.html at the root, or in public/ when nothing else is there.
import type { SourceTree } from './source-tree.js';
import type { Detection } from './stack-types.js';

/** Detects a static site; null when there is no index.html at the root or in public/, dist/ or build/. */
export function detectStatic(tree: SourceTree): Detection | null {
  for (const dir of ['', 'public', 'dist', 'build']) {
    const index = dir === '' ? 'index.html' : `${dir}/index.html`;
    if (tree.has(index)) return { facts: { stack: 'static', dir }, reasons: [`${index} → a static site, served from ${dir === '' ? 'the root' : `${dir}/`}`] };
  }
  return null;
}
