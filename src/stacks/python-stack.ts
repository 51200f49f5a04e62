// The Python detector: requirements.txt or pyproject.toml (uv, poetry, pip), and how the app starts.
import type { SourceTree } from './source-tree.js';
import { StackError, type Detection, type PythonCommand, type PythonInstall } from './stack-types.js';

/** Files whose `app = …` or `application = …` the detector looks for, besides <package>/wsgi.py and asgi.py. */
const APP_FILES = ['app.py', 'main.py', 'wsgi.py', 'asgi.py', 'server.py', 'application.py'];
const ASGI = /^(\w+)\s*=\s*(?:\w+\.)?(FastAPI|Starlette|Quart|get_asgi_application)\s*\(/m;
const WSGI = /^(\w+)\s*=\s*(?:\w+\.)?(Flask|Bottle|get_wsgi_application|App|API)\s*\(/m;

/** Detects a Python app (requirements.txt or pyproject.toml at the root); null when there is none. */
export function detectPython(tree: SourceTree): Detection | null {
  const hasRequirements = tree.has('requirements.txt');
  const hasPyproject = tree.has('pyproject.toml');
  if (!hasRequirements && !hasPyproject) return null;
  const reasons: string[] = [];
  const install = pythonInstall(tree, hasRequirements, reasons);
  const command = pythonCommand(tree, install, reasons);
  return { facts: { stack: 'python', install, command }, reasons };
}

function pythonInstall(tree: SourceTree, hasRequirements: boolean, reasons: string[]): PythonInstall {
  const pyproject = tree.text('pyproject.toml') ?? '';
  if (tree.has('uv.lock') && tree.has('pyproject.toml')) {
    reasons.push('pyproject.toml with uv.lock → uv exports the locked production dependencies');
    return { kind: 'uv' };
  }
  if (tree.has('poetry.lock') && /^\[tool\.poetry\]/m.test(pyproject)) {
    reasons.push('pyproject.toml [tool.poetry] with poetry.lock → poetry exports the locked main dependencies');
    return { kind: 'poetry' };
  }
  if (hasRequirements) {
    const text = tree.text('requirements.txt') ?? '';
    const { packages, paths } = readRequirements(text);
    if (packages === 0 && paths.length === 0) {
      reasons.push('requirements.txt lists no packages → nothing to install');
      return { kind: 'none' };
    }
    reasons.push(`requirements.txt (${packages} package${packages === 1 ? '' : 's'}${paths.length === 0 ? '' : `, local ${paths.join(', ')}`}) → pip`);
    return { kind: 'requirements', file: 'requirements.txt', paths };
  }
  const packages = projectDependencies(pyproject);
  reasons.push(`pyproject.toml [project] dependencies (${packages.length}) → pip`);
  return packages.length === 0 ? { kind: 'none' } : { kind: 'pyproject', packages };
}

/** How many packages a requirements file names, and the local directories it reads (copied with it). */
export function readRequirements(text: string): { packages: number; paths: string[] } {
  let packages = 0;
  const paths: string[] = [];
  for (const raw of text.split(/\r?\n/)) {
    const line = raw.replace(/(^|\s)#.*$/, '').trim();
    if (line === '') continue;
    const option = /^(?:--find-links|-f|--editable|-e)[=\s]+(\S+)/.exec(line);
    if (option !== null) {
      const target = option[1] ?? '';
      if (!/^[a-z+]+:/i.test(target)) paths.push(target.replace(/^\.\//, '').replace(/\/+$/, ''));
      if (line.startsWith('-e') || line.startsWith('--editable')) packages += 1;
      continue;
    }
    if (line.startsWith('-')) continue;
    packages += 1;
  }
  return { packages, paths };
}

/** The strings of pyproject.toml's `[project] dependencies = [...]` (a reader for that one array). */
export function projectDependencies(pyproject: string): string[] {
  const section = /^\[project\]\s*$([\s\S]*?)(?=^\[|$(?![\s\S]))/m.exec(pyproject);
  const array = section === null ? null : /^dependencies\s*=\s*\[([\s\S]*?)\]/m.exec(section[1] ?? '');
  if (array === null) return [];
  return [...(array[1] ?? '').matchAll(/"((?:[^"\\]|\\.)*)"|'([^']*)'/g)].map((m) => m[1] ?? m[2] ?? '').filter((s) => s !== '');
}

function pythonCommand(tree: SourceTree, install: PythonInstall, reasons: string[]): PythonCommand {
  if (tree.has('Procfile')) {
    const text = tree.text('Procfile') ?? '';
    const lines = text.split(/\r?\n/).filter((l) => /^\s*[\w-]+\s*:/.test(l));
    const web = lines.find((l) => /^\s*web\s*:/.test(l));
    if (web === undefined) {
      const kinds = lines.map((l) => l.split(':')[0]?.trim()).filter((k) => k !== undefined && k !== '');
      throw new StackError(
        `Procfile has no "web:" line${kinds.length === 0 ? '' : ` (it has ${kinds.join(', ')})`}: add the command that serves HTTP on $PORT, e.g. "web: gunicorn --bind 0.0.0.0:$PORT app:app"`,
      );
    }
    const line = web.replace(/^\s*web\s*:\s*/, '').trim();
    reasons.push(`Procfile web: "${line}"`);
    return { kind: 'procfile', line };
  }
  const listed = installedNames(tree, install);
  const app = findApp(tree);
  if (app !== undefined) {
    const server = app.asgi ? 'uvicorn' : 'gunicorn';
    const addServer = !listed.has(server) && install.kind !== 'uv' && install.kind !== 'poetry';
    reasons.push(`${app.file} defines ${app.asgi ? 'ASGI' : 'WSGI'} app "${app.name}" (${app.maker}) → ${server} ${app.target}${addServer ? ` (${server} is not among the dependencies: installed too)` : ''}`);
    return { kind: server, target: app.target, addServer };
  }
  const script = ['app.py', 'main.py', 'server.py'].find((f) => tree.has(f));
  if (script !== undefined) {
    reasons.push(`${script} at the root (no Procfile, no WSGI or ASGI app found) → python ${script}`);
    return { kind: 'script', file: script };
  }
  throw new StackError(
    'found a Python project but no way to start it: add a Procfile with a "web:" line (e.g. "web: gunicorn --bind 0.0.0.0:$PORT app:app"), or an app.py / main.py that serves on $PORT',
  );
}

/** Lower-case names of the packages the install lists (for "is gunicorn there?"). */
function installedNames(tree: SourceTree, install: PythonInstall): Set<string> {
  const lines = install.kind === 'pyproject' ? install.packages : (install.kind === 'requirements' ? tree.text(install.file) ?? '' : tree.text('pyproject.toml') ?? '').split(/\r?\n/);
  const names = new Set<string>();
  for (const line of lines) {
    const match = /^\s*["']?([A-Za-z0-9][A-Za-z0-9._-]*)/.exec(line);
    if (match?.[1] !== undefined) names.add(match[1].toLowerCase());
  }
  return names;
}

interface FoundApp {
  readonly file: string;
  readonly name: string;
  readonly maker: string;
  readonly target: string;
  readonly asgi: boolean;
}

/** The first file defining a WSGI or ASGI app: the usual root files, then <package>/wsgi.py and asgi.py (Django). */
function findApp(tree: SourceTree): FoundApp | undefined {
  const packages = tree.children('').filter((d) => tree.isDirectory(d) && tree.has(`${d}/__init__.py`));
  const candidates = [...APP_FILES, ...packages.flatMap((p) => [`${p}/wsgi.py`, `${p}/asgi.py`])];
  for (const file of candidates) {
    const text = tree.text(file);
    if (text === undefined) continue;
    const module = file.replace(/\.py$/, '').replace(/\//g, '.');
    // Only importable names: the target goes into the command line.
    if (!/^[A-Za-z_][\w.]*$/.test(module)) continue;
    const asgi = ASGI.exec(text);
    if (asgi !== null) return { file, name: asgi[1] ?? 'app', maker: `${asgi[2]}()`, target: `${module}:${asgi[1]}`, asgi: true };
    const wsgi = WSGI.exec(text);
    if (wsgi !== null) return { file, name: wsgi[1] ?? 'app', maker: `${wsgi[2]}()`, target: `${module}:${wsgi[1]}`, asgi: false };
  }
  return undefined;
}
