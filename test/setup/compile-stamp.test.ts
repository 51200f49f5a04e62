// The start-up's compile step (scripts/setup.mjs): the first start compiles, a second start with no
// source changed does not run the compiler at all, and a changed source compiles again.
import assert from 'node:assert/strict';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { pathToFileURL } from 'node:url';
import { PROJECT_ROOT } from '../helpers/server.js';

interface Setup {
  compile(projectRoot: string): 'compiled' | 'up to date';
}

let dir: string;
let setup: Setup;

before(async () => {
  // scripts/setup.mjs is plain JavaScript (it runs before dependencies exist), outside the compiled tree.
  setup = (await import(pathToFileURL(path.join(PROJECT_ROOT, 'scripts', 'setup.mjs')).href)) as Setup;
  dir = await fs.mkdtemp(path.join(os.tmpdir(), 'slipway-compile-'));
  await fs.mkdir(path.join(dir, 'src'));
  await fs.writeFile(path.join(dir, 'tsconfig.json'), JSON.stringify({
    compilerOptions: { target: 'ES2022', module: 'NodeNext', moduleResolution: 'NodeNext', outDir: 'dist', rootDir: '.', types: [], strict: true },
    include: ['src/**/*.ts'],
  }));
  await fs.writeFile(path.join(dir, 'src', 'greet.ts'), 'export const greeting: string = "one";\n');
});
after(async () => {
  await fs.rm(dir, { recursive: true, force: true });
});

test('a second start with no source changed does not recompile; a changed source does', async () => {
  const out = path.join(dir, 'dist', 'src', 'greet.js');
  assert.equal(setup.compile(dir), 'compiled', 'the first start compiles');
  assert.match(await fs.readFile(out, 'utf8'), /"one"/);
  // The compiler would rewrite its output: an unchanged file shows it did not run.
  await fs.writeFile(out, '// left alone\n');
  assert.equal(setup.compile(dir), 'up to date', 'the second start skips the compiler');
  assert.equal(await fs.readFile(out, 'utf8'), '// left alone\n');

  await fs.writeFile(path.join(dir, 'src', 'greet.ts'), 'export const greeting: string = "two, longer";\n');
  assert.equal(setup.compile(dir), 'compiled', 'a changed source compiles again');
  assert.match(await fs.readFile(out, 'utf8'), /"two, longer"/);
  // A new file counts as a change too.
  await fs.writeFile(path.join(dir, 'src', 'extra.ts'), 'export const extra = 1;\n');
  assert.equal(setup.compile(dir), 'compiled');
  assert.equal(setup.compile(dir), 'up to date');
});
