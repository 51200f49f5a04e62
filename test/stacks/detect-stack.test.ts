// Unit tests of the stack detectors: what each finds in a small source, why, and every bad input of issue 36.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { detectStack } from '../../src/stacks/detect-stack.js';
import { parseJson } from '../../src/stacks/json-position.js';
import { pinnedMajor } from '../../src/stacks/node-stack.js';
import { projectDependencies, readRequirements } from '../../src/stacks/python-stack.js';
import { treeOf } from '../../src/stacks/source-tree.js';
import { StackError } from '../../src/stacks/stack-types.js';

const pkg = (value: unknown): string => JSON.stringify(value, null, 2);

describe('node', () => {
  test('npm by package-lock.json, the build and start scripts, engines.node', () => {
    const found = detectStack(treeOf({
      'package.json': pkg({ scripts: { build: 'tsc', start: 'node dist/server.js' }, dependencies: { express: '^4' }, engines: { node: '18.x' } }),
      'package-lock.json': '{}',
    }));
    assert.equal(found.facts.stack, 'node');
    if (found.facts.stack !== 'node') return;
    assert.deepEqual(found.facts.install, { kind: 'manager', manager: 'npm', lockfile: 'package-lock.json', corepack: false, yarnBerry: false });
    assert.equal(found.facts.build, true);
    assert.equal(found.facts.nodeMajor, '18');
    assert.deepEqual(found.facts.output, { kind: 'server', command: ['node', 'dist/server.js'] });
    assert.ok(found.reasons.some((r) => r.includes('package-lock.json → npm')));
    assert.ok(found.reasons.some((r) => r.includes('engines.node "18.x" → Node 18')));
    assert.ok(found.reasons.some((r) => r.includes('scripts.start "node dist/server.js"')));
  });

  test('yarn and pnpm by lockfile; packageManager wins through corepack', () => {
    const yarn = detectStack(treeOf({ 'package.json': pkg({ main: 'index.js', dependencies: { a: '1' } }), 'yarn.lock': '' }));
    assert.equal(yarn.facts.stack === 'node' && yarn.facts.install.kind === 'manager' && yarn.facts.install.manager, 'yarn');
    const pnpm = detectStack(treeOf({ 'package.json': pkg({ main: 'index.js', dependencies: { a: '1' } }), 'pnpm-lock.yaml': '' }));
    assert.equal(pnpm.facts.stack === 'node' && pnpm.facts.install.kind === 'manager' && pnpm.facts.install.manager, 'pnpm');
    const declared = detectStack(treeOf({ 'package.json': pkg({ main: 'i.js', packageManager: 'yarn@4.1.0', dependencies: { a: '1' } }) }));
    assert.deepEqual(declared.facts.stack === 'node' && declared.facts.install, { kind: 'manager', manager: 'yarn', lockfile: undefined, corepack: true, yarnBerry: true });
    assert.ok(declared.reasons.some((r) => r.includes('packageManager "yarn@4.1.0"')));
  });

  test('no dependencies: nothing to install; node_modules in the source: vendored', () => {
    const none = detectStack(treeOf({ 'package.json': pkg({ scripts: { start: 'node server.js' } }) }));
    assert.deepEqual(none.facts.stack === 'node' && none.facts.install, { kind: 'none' });
    const vendored = detectStack(treeOf({ 'package.json': pkg({ main: 'a.js', dependencies: { left: '1' } }), 'node_modules/left/index.js': '' }));
    assert.deepEqual(vendored.facts.stack === 'node' && vendored.facts.install, { kind: 'vendored' });
  });

  test('Next.js standalone, Vite and Create React App static output', () => {
    const next = detectStack(treeOf({
      'package.json': pkg({ scripts: { build: 'next build', start: 'next start' }, dependencies: { next: '14' } }),
      'next.config.mjs': "export default { output: 'standalone' };",
      'public/': '',
    }));
    assert.deepEqual(next.facts.stack === 'node' && next.facts.output, { kind: 'next-standalone', publicDir: true });
    const vite = detectStack(treeOf({ 'package.json': pkg({ scripts: { build: 'vite build', dev: 'vite' }, devDependencies: { vite: '5' } }), 'index.html': '' }));
    assert.deepEqual(vite.facts.stack === 'node' && vite.facts.output, { kind: 'static', dir: 'dist' });
    const cra = detectStack(treeOf({ 'package.json': pkg({ scripts: { build: 'react-scripts build', start: 'react-scripts start' }, dependencies: { 'react-scripts': '5' } }) }));
    assert.deepEqual(cra.facts.stack === 'node' && cra.facts.output, { kind: 'static', dir: 'build' });
  });

  test('a start script that is not a plain node command runs through npm start', () => {
    const found = detectStack(treeOf({ 'package.json': pkg({ scripts: { start: 'node server.js && echo done' } }) }));
    assert.deepEqual(found.facts.stack === 'node' && found.facts.output, { kind: 'server', command: ['npm', 'start'] });
  });

  test('package.json that is not JSON: the file, line and column', () => {
    assert.throws(
      () => detectStack(treeOf({ 'package.json': '{\n  "name": "a",\n  "scripts": { "start": "node s.js", }\n}\n' })),
      (err: unknown) => err instanceof StackError && err.message === 'package.json is not valid JSON: unexpected "}" at line 3, column 38',
    );
  });

  test('no start script, no main, no build and no index.html: says what to add', () => {
    const sources: Array<Record<string, string>> = [{ 'package.json': pkg({ name: 'a', scripts: { test: 'node --test' } }) }, { 'package.json': pkg({ devDependencies: { prettier: '3' } }), 'README.md': '' }];
    for (const files of sources) {
      assert.throws(
        () => detectStack(treeOf(files)),
        (err: unknown) => err instanceof StackError && err.message.includes('no "start" script') && err.message.includes('"scripts": { "start": "node server.js" }'),
      );
    }
  });

  test('a build script with no start and no main: its output (dist/, else build/) is a static site, and the log says why', () => {
    const found = detectStack(treeOf({ 'package.json': pkg({ name: 'site', scripts: { build: 'node build.js' } }), 'build.js': '' }));
    assert.equal(found.facts.stack, 'node');
    if (found.facts.stack !== 'node') return;
    assert.deepEqual(found.facts.install, { kind: 'none' });
    assert.equal(found.facts.build, true);
    assert.deepEqual(found.facts.output, { kind: 'static', dir: 'dist-or-build' });
    assert.deepEqual(found.reasons, [
      'package.json at the root',
      'no dependencies or devDependencies → nothing to install',
      'scripts.build "node build.js" → runs in the build stage',
      "no start script and no main → the build's output (dist/, else build/) is served as a static site",
    ]);
    // Next.js builds to .next/: without a start script it still says what to add.
    assert.throws(() => detectStack(treeOf({ 'package.json': pkg({ scripts: { build: 'next build' }, dependencies: { next: '14' } }) })), /no "start" script and no "main"/);
  });

  test('package.json for tooling alone (no start, main or build) next to index.html: a static site, and the log says why', () => {
    const found = detectStack(treeOf({ 'package.json': pkg({ devDependencies: { prettier: '3' } }), 'index.html': '<h1>hi</h1>' }));
    assert.deepEqual(found.facts, { stack: 'static', dir: '' });
    assert.deepEqual(found.reasons, [
      'package.json at the root has no start script, main or build script → not a Node.js app',
      'index.html → a static site, served from the root',
    ]);
    assert.deepEqual(found.notes, []);
    // Wherever the static detector finds the site.
    assert.deepEqual(detectStack(treeOf({ 'package.json': '{}', 'public/index.html': '' })).facts, { stack: 'static', dir: 'public' });
    // Asked for by SLIPWAY_STACK, Node says what it lacks.
    assert.throws(() => detectStack(treeOf({ 'package.json': '{}', 'index.html': '' }), 'node'), /no "start" script and no "main"/);
  });

  test('package.json for tooling alone yields to another stack without a note', () => {
    const found = detectStack(treeOf({ 'package.json': pkg({ devDependencies: { eslint: '9' } }), 'requirements.txt': 'flask\n', 'app.py': 'app = Flask(__name__)' }));
    assert.equal(found.facts.stack, 'python');
    assert.deepEqual(found.notes, []);
    assert.equal(found.reasons[0], 'package.json at the root has no start script, main or build script → not a Node.js app');
  });

  test('a packageManager that is not manager@version is refused', () => {
    assert.throws(() => detectStack(treeOf({ 'package.json': pkg({ main: 'a.js', packageManager: 'bun', dependencies: { a: '1' } }) })), /packageManager "bun"/);
  });

  test('pinnedMajor reads the ranges people write', () => {
    assert.equal(pinnedMajor('18'), '18');
    assert.equal(pinnedMajor('^20.1.0'), '20');
    assert.equal(pinnedMajor('18.x'), '18');
    assert.equal(pinnedMajor('>=18 <19'), '18');
    assert.equal(pinnedMajor('>=16'), undefined);
    assert.equal(pinnedMajor('16 || 18'), undefined);
  });
});

describe('python', () => {
  test('requirements.txt and a WSGI app → gunicorn', () => {
    const found = detectStack(treeOf({ 'requirements.txt': 'flask==3.0\ngunicorn\n', 'app.py': 'from flask import Flask\napp = Flask(__name__)\n' }));
    assert.deepEqual(found.facts, {
      stack: 'python',
      install: { kind: 'requirements', file: 'requirements.txt', paths: [] },
      command: { kind: 'gunicorn', target: 'app:app', addServer: false },
    });
    assert.ok(found.reasons.some((r) => r.includes('app.py defines WSGI app "app" (Flask())')));
  });

  test('an ASGI app → uvicorn (added when it is not listed); Django wsgi in its package', () => {
    const asgi = detectStack(treeOf({ 'requirements.txt': 'fastapi\n', 'main.py': 'from fastapi import FastAPI\napp = FastAPI()\n' }));
    assert.deepEqual(asgi.facts.stack === 'python' && asgi.facts.command, { kind: 'uvicorn', target: 'main:app', addServer: true });
    const django = detectStack(treeOf({
      'requirements.txt': 'django\ngunicorn\n',
      'site1/__init__.py': '',
      'site1/wsgi.py': 'from django.core.wsgi import get_wsgi_application\napplication = get_wsgi_application()\n',
    }));
    assert.deepEqual(django.facts.stack === 'python' && django.facts.command, { kind: 'gunicorn', target: 'site1.wsgi:application', addServer: false });
  });

  test('Procfile web: wins; vendored wheels are copied with requirements.txt', () => {
    const found = detectStack(treeOf({ 'requirements.txt': '--no-index\n--find-links ./wheels\nhello\n', Procfile: 'release: x\nweb: python serve.py\n' }));
    assert.deepEqual(found.facts, {
      stack: 'python',
      install: { kind: 'requirements', file: 'requirements.txt', paths: ['wheels'] },
      command: { kind: 'procfile', line: 'python serve.py' },
    });
  });

  test('pyproject with uv, poetry, or plain [project] dependencies', () => {
    const uv = detectStack(treeOf({ 'pyproject.toml': '[project]\nname="a"\n', 'uv.lock': '', 'main.py': '' }));
    assert.deepEqual(uv.facts.stack === 'python' && uv.facts.install, { kind: 'uv' });
    const poetry = detectStack(treeOf({ 'pyproject.toml': '[tool.poetry]\nname="a"\n', 'poetry.lock': '', 'app.py': '' }));
    assert.deepEqual(poetry.facts.stack === 'python' && poetry.facts.install, { kind: 'poetry' });
    const pip = detectStack(treeOf({ 'pyproject.toml': '[project]\nname = "a"\ndependencies = [\n  "flask>=3",\n  \'gunicorn\',\n]\n[tool.x]\n', 'app.py': 'app = Flask(__name__)' }));
    assert.deepEqual(pip.facts.stack === 'python' && pip.facts.install, { kind: 'pyproject', packages: ['flask>=3', 'gunicorn'] });
  });

  test('a Procfile without web: names the lines it has and what to add', () => {
    assert.throws(
      () => detectStack(treeOf({ 'requirements.txt': 'x\n', Procfile: 'worker: python w.py\n' })),
      (err: unknown) => err instanceof StackError && err.message.includes('Procfile has no "web:" line (it has worker)') && err.message.includes('web: gunicorn'),
    );
  });

  test('requirements and pyproject readers', () => {
    assert.deepEqual(readRequirements('# c\n\n-f ./a\n--find-links=https://x/y\nb==1 # why\n-e ./lib\n'), { packages: 2, paths: ['a', 'lib'] });
    assert.deepEqual(projectDependencies('[project]\ndependencies = []\n'), []);
  });
});

describe('go', () => {
  test('cmd/<name>, go.sum modules, the go version', () => {
    const found = detectStack(treeOf({ 'go.mod': 'module example.com/shop\n\ngo 1.22\n\nrequire x.io/y v1.0.0\n', 'go.sum': 'x', 'cmd/shop/main.go': 'package main', 'cmd/tool/main.go': 'package main' }));
    assert.deepEqual(found.facts, { stack: 'go', target: './cmd/shop', binary: 'shop', goVersion: '1.22', download: true, vendored: false });
    assert.ok(found.reasons.some((r) => r.includes('cmd/ holds shop, tool')));
  });

  test('package main at the root; vendored modules are not downloaded', () => {
    const found = detectStack(treeOf({ 'go.mod': 'module app\ngo 1.19\nrequire a.b/c v1\n', 'go.sum': 'x', 'main.go': 'package main\n', 'vendor/modules.txt': '' }));
    assert.deepEqual(found.facts, { stack: 'go', target: '.', binary: 'app', goVersion: '1.19', download: false, vendored: true });
  });

  test('go.mod without a main package', () => {
    assert.throws(() => detectStack(treeOf({ 'go.mod': 'module lib\n', 'lib.go': 'package lib' })), /no main package/);
  });
});

describe('choosing', () => {
  test('a static site: index.html at the root', () => {
    assert.deepEqual(detectStack(treeOf({ 'index.html': '<h1>hi</h1>' })).facts, { stack: 'static', dir: '' });
  });

  test('no Dockerfile and no stack: lists what was looked for and how to add a Dockerfile', () => {
    assert.throws(
      () => detectStack(treeOf({ 'README.md': '# x' })),
      (err: unknown) =>
        err instanceof StackError && err.message.includes('package.json') && err.message.includes('requirements.txt') && err.message.includes('go.mod') && err.message.includes('index.html') && err.message.includes('Add a Dockerfile'),
    );
  });

  test('two stacks at the root: which was chosen and how to choose; SLIPWAY_STACK picks', () => {
    const tree = treeOf({ 'package.json': pkg({ scripts: { start: 'node s.js' } }), 'requirements.txt': 'flask\n', 'app.py': 'app = Flask(__name__)' });
    const found = detectStack(tree);
    assert.equal(found.facts.stack, 'python');
    assert.match(found.notes.join('\n'), /several stacks at the root \(python, node\): python was chosen\. To choose another, set the variable SLIPWAY_STACK=<python\|node>.*dockerfile_path/);
    assert.equal(detectStack(tree, 'node').facts.stack, 'node');
    assert.throws(() => detectStack(tree, 'go'), /no go app is at the root/);
    assert.throws(() => detectStack(tree, 'ruby'), /must be one of node, python, go, static/);
  });
});

test('parseJson places the first invalid character', () => {
  assert.deepEqual(parseJson('[1, 2'), { ok: false, failure: { line: 1, column: 6, found: 'the end of the file' } });
  assert.deepEqual(parseJson('{"a": tru}'), { ok: false, failure: { line: 1, column: 10, found: '"}"' } });
  assert.deepEqual(parseJson('{"a": [1, {"b": null}]}'), { ok: true, value: { a: [1, { b: null }] } });
});
