// The Node.js detector: package.json, its lockfile, engines.node, packageManager, its scripts and framework.
import { parseJson } from './json-position.js';
import type { SourceTree } from './source-tree.js';
import { NotAnAppError, StackError, type Detection, type NodeInstall, type NodeOutput, type NodePackageManager } from './stack-types.js';

const LOCKFILES: ReadonlyArray<readonly [string, NodePackageManager]> = [
  ['pnpm-lock.yaml', 'pnpm'],
  ['yarn.lock', 'yarn'],
  ['package-lock.json', 'npm'],
  ['npm-shrinkwrap.json', 'npm'],
];

/** Files a package manager reads besides package.json and the lockfile. */
const INSTALL_FILES = ['.npmrc', '.yarnrc', '.yarnrc.yml', 'pnpm-workspace.yaml'];

interface PackageJson {
  readonly scripts: Record<string, string>;
  readonly dependencies: Record<string, unknown>;
  readonly devDependencies: Record<string, unknown>;
  readonly main: string | undefined;
  readonly engines: string | undefined;
  readonly packageManager: string | undefined;
}

/** Detects a Node app (a root package.json); null when there is none. Throws StackError for a package.json it cannot use. */
export function detectNode(tree: SourceTree): Detection | null {
  if (!tree.has('package.json')) return null;
  const pkg = readPackageJson(tree);
  const reasons = ['package.json at the root'];
  const deps = { ...pkg.devDependencies, ...pkg.dependencies };
  const depCount = Object.keys(deps).length;

  const install = nodeInstall(tree, pkg, depCount, reasons);
  const installFiles = INSTALL_FILES.filter((f) => tree.has(f) && !tree.isDirectory(f));

  let nodeMajor: string | undefined;
  if (pkg.engines !== undefined) {
    nodeMajor = pinnedMajor(pkg.engines);
    reasons.push(`engines.node "${pkg.engines}"${nodeMajor === undefined ? ' (no single major version: the configured Node image is used)' : ` → Node ${nodeMajor}`}`);
  }

  const buildScript = pkg.scripts['build'];
  if (buildScript !== undefined) reasons.push(`scripts.build "${buildScript}" → runs in the build stage`);
  const output = nodeOutput(tree, pkg, deps, buildScript !== undefined, reasons);
  const root = tree.children('').filter((name) => name !== 'node_modules' && name !== '.dockerignore');
  const rootDirs = root.filter((name) => tree.isDirectory(name));
  const rootFiles = root.filter((name) => !tree.isDirectory(name));
  return { facts: { stack: 'node', install, installFiles, nodeMajor, build: buildScript !== undefined, output, rootFiles, rootDirs }, reasons };
}

function readPackageJson(tree: SourceTree): PackageJson {
  const text = tree.text('package.json');
  if (text === undefined) throw new StackError('package.json cannot be read (it is not a regular file, or larger than 1 MiB)');
  const parsed = parseJson(text.replace(/^\uFEFF/, ''));
  if (!parsed.ok) {
    const { line, column, found } = parsed.failure;
    throw new StackError(`package.json is not valid JSON: unexpected ${found} at line ${line}, column ${column}`);
  }
  const value = parsed.value;
  if (value === null || typeof value !== 'object' || Array.isArray(value)) throw new StackError('package.json must hold a JSON object ({ "name": …, "scripts": … })');
  const obj = value as Record<string, unknown>;
  const record = (key: string): Record<string, unknown> => {
    const v = obj[key];
    if (v === undefined) return {};
    if (v === null || typeof v !== 'object' || Array.isArray(v)) throw new StackError(`package.json: "${key}" must be an object`);
    return v as Record<string, unknown>;
  };
  const scripts: Record<string, string> = {};
  for (const [name, command] of Object.entries(record('scripts'))) if (typeof command === 'string') scripts[name] = command;
  const engines = record('engines')['node'];
  return {
    scripts,
    dependencies: record('dependencies'),
    devDependencies: record('devDependencies'),
    main: typeof obj['main'] === 'string' ? obj['main'] : undefined,
    engines: typeof engines === 'string' ? engines : undefined,
    packageManager: typeof obj['packageManager'] === 'string' ? obj['packageManager'] : undefined,
  };
}

function nodeInstall(tree: SourceTree, pkg: PackageJson, depCount: number, reasons: string[]): NodeInstall {
  if (tree.isDirectory('node_modules')) {
    reasons.push('node_modules/ is in the source (not in .dockerignore) → vendored dependencies, used as they are');
    return { kind: 'vendored' };
  }
  if (depCount === 0) {
    reasons.push('no dependencies or devDependencies → nothing to install');
    return { kind: 'none' };
  }
  const lock = LOCKFILES.find(([file]) => tree.has(file));
  const declared = pkg.packageManager === undefined ? undefined : /^(npm|yarn|pnpm)@(\S+)$/.exec(pkg.packageManager);
  if (pkg.packageManager !== undefined && declared === null) {
    throw new StackError(`package.json: packageManager "${pkg.packageManager}" is not <npm|yarn|pnpm>@<version> (e.g. "pnpm@9.1.0")`);
  }
  let manager: NodePackageManager;
  if (declared !== null && declared !== undefined) {
    manager = declared[1] as NodePackageManager;
    reasons.push(`packageManager "${pkg.packageManager}" → ${manager} through corepack`);
  } else if (lock !== undefined) {
    manager = lock[1];
  } else {
    manager = 'npm';
  }
  if (lock !== undefined) reasons.push(`${lock[0]} → ${lock[1]}${lock[1] === manager ? '' : ` (but packageManager names ${manager}: ${manager} is used)`}`);
  else reasons.push(`no lockfile → ${manager} install (add a lockfile for reproducible builds)`);
  const berryVersion = declared?.[1] === 'yarn' ? Number.parseInt(declared[2] ?? '1', 10) >= 2 : false;
  const yarnBerry = manager === 'yarn' && (berryVersion || tree.has('.yarnrc.yml'));
  return { kind: 'manager', manager, lockfile: lock?.[1] === manager ? lock[0] : undefined, corepack: manager !== 'npm', yarnBerry };
}

/** The major version a range pins ("18", "18.x", "^18.2", "~18.1.0", ">=18 <19"); undefined for an open range. */
export function pinnedMajor(range: string): string | undefined {
  const r = range.trim();
  const exact = /^[\^~=v]*(\d+)(?:\.(?:\d+|x|\*))*$/.exec(r);
  if (exact !== null) return exact[1];
  const bounded = /^>=\s*(\d+)(?:\.\d+)*\s+<\s*(\d+)(?:\.0)*$/.exec(r);
  if (bounded !== null && Number(bounded[2]) === Number(bounded[1]) + 1) return bounded[1];
  return undefined;
}

function nodeOutput(tree: SourceTree, pkg: PackageJson, deps: Record<string, unknown>, build: boolean, reasons: string[]): NodeOutput {
  const start = pkg.scripts['start'];
  if ('next' in deps) {
    const config = ['next.config.js', 'next.config.mjs', 'next.config.ts', 'next.config.cjs'].find((f) => tree.has(f));
    const standalone = config !== undefined && /output\s*:\s*['"`]standalone['"`]/.test(tree.text(config) ?? '');
    if (standalone && build) {
      reasons.push(`next in dependencies and ${config} sets output: 'standalone' → .next/standalone/server.js runs`);
      return { kind: 'next-standalone', publicDir: tree.isDirectory('public') };
    }
    reasons.push(`next in dependencies${config === undefined ? '' : ` (${config} has no output: 'standalone'; setting it makes a much smaller image)`}`);
  }
  if ('react-scripts' in deps && build) {
    reasons.push('react-scripts in dependencies (Create React App) → build/ is served as a static site');
    return { kind: 'static', dir: 'build' };
  }
  const viteServes = start === undefined || /^\s*vite(\s|$)/.test(start);
  if ('vite' in deps && build && viteServes) {
    reasons.push(`vite in dependencies${start === undefined ? ' and no start script' : ' (the start script is its dev server)'} → dist/ is served as a static site`);
    return { kind: 'static', dir: 'dist' };
  }
  if (start !== undefined) {
    const command = directNodeCommand(start);
    reasons.push(`scripts.start "${start}" → ${command === undefined ? 'npm start' : command.join(' ')}`);
    return { kind: 'server', command: command ?? ['npm', 'start'] };
  }
  if (pkg.main !== undefined) {
    reasons.push(`no start script; main "${pkg.main}" → node ${pkg.main}`);
    return { kind: 'server', command: ['node', pkg.main] };
  }
  // Next.js builds to .next/, never to dist/ or build/: without a server it has nothing to serve.
  if (build && !('next' in deps)) {
    reasons.push('no start script and no main → the build\'s output (dist/, else build/) is served as a static site');
    return { kind: 'static', dir: 'dist-or-build' };
  }
  const message =
    'package.json has no "start" script and no "main": add the command that starts your server, e.g. "scripts": { "start": "node server.js" } (it must listen on the port in $PORT)';
  // A build script makes it an app (Next.js, here) that needs a server; without one, the package.json is tooling.
  if (build) throw new StackError(message);
  throw new NotAnAppError(message, 'package.json at the root has no start script, main or build script → not a Node.js app');
}

/** `node file.js` (plain arguments only) runs as node itself, so signals reach the app rather than npm. */
function directNodeCommand(start: string): string[] | undefined {
  const words = start.trim().split(/\s+/);
  if (words[0] !== 'node' || words.length < 2) return undefined;
  return words.every((w) => /^[\w./@=:-]+$/.test(w)) ? words : undefined;
}
