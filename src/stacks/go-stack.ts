// The Go detector: go.mod, the package to build (the root's main package or cmd/<name>), its modules.
import type { SourceTree } from './source-tree.js';
import { StackError, type Detection } from './stack-types.js';

/** Detects a Go module at the root; null when there is no go.mod. */
export function detectGo(tree: SourceTree): Detection | null {
  if (!tree.has('go.mod')) return null;
  const gomod = tree.text('go.mod') ?? '';
  const module = /^module\s+("?)([^\s"]+)\1/m.exec(gomod)?.[2];
  if (module === undefined) throw new StackError('go.mod has no "module" line (e.g. "module example.com/app")');
  const goVersion = /^go\s+(\d+\.\d+)/m.exec(gomod)?.[1];
  const reasons = [`go.mod (module ${module}${goVersion === undefined ? '' : `, go ${goVersion}`})`];

  const rootMain = tree.children('').some((f) => f.endsWith('.go') && !f.endsWith('_test.go') && /^package\s+main\b/m.test(tree.text(f) ?? ''));
  const commands = tree.children('cmd').filter((d) => tree.isDirectory(`cmd/${d}`) && tree.children(`cmd/${d}`).some((f) => f.endsWith('.go')));
  const base = module.split('/').pop() ?? 'app';
  let target: string;
  let binary: string;
  if (rootMain) {
    target = '.';
    binary = base;
    reasons.push('package main at the root → go build .');
  } else if (commands.length > 0) {
    const chosen = commands.includes(base) ? base : commands[0] ?? base;
    target = `./cmd/${chosen}`;
    binary = chosen;
    reasons.push(
      commands.length === 1
        ? `cmd/${chosen}/ → go build ./cmd/${chosen}`
        : `cmd/ holds ${commands.join(', ')} → ./cmd/${chosen} is built${commands.includes(base) ? ' (named like the module)' : ' (the first)'}; to build another, add a Dockerfile`,
    );
  } else {
    throw new StackError('go.mod found but no main package: put package main at the root or in cmd/<name>/ (or add a Dockerfile)');
  }
  const vendored = tree.has('vendor/modules.txt');
  const requires = /^require\b/m.test(gomod);
  const download = requires && !vendored && tree.has('go.sum');
  if (vendored) reasons.push('vendor/modules.txt → vendored modules, nothing downloaded');
  else if (!requires) reasons.push('go.mod requires no modules → nothing to download');
  else if (download) reasons.push('go.sum → modules downloaded in their own layer');
  return { facts: { stack: 'go', target, binary, goVersion, download, vendored }, reasons };
}
