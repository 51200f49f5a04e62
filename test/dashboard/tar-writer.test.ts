// The browser's tar writer (public/ui/tar.js) run in Node (File, Blob, CompressionStream are the same
// Web APIs) and read back by a real tar reader: names long and non-ASCII, nested folders, .dockerignore.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { pathToFileURL } from 'node:url';
import * as tar from 'tar';
import { tempDir } from '../helpers/apps.js';
import { PROJECT_ROOT } from '../helpers/server.js';

interface TarModule {
  packFolder(files: File[]): Promise<{ blob: Blob; files: number; skipped: number }>;
  ignoreMatcher(text: string): (path: string) => boolean;
}
const load = async (): Promise<TarModule> => (await import(pathToFileURL(path.join(PROJECT_ROOT, 'public', 'ui', 'tar.js')).href)) as TarModule;

/** A File as `<input webkitdirectory>` gives it: its path under the chosen folder `app/`. */
function picked(relative: string, content: string): File {
  const file = new File([content], path.basename(relative));
  Object.defineProperty(file, 'webkitRelativePath', { value: `app/${relative}` });
  return file;
}

test('a packed folder extracts to the same tree (long and non-ASCII names, nested folders), minus .git and ignored paths', async () => {
  const { packFolder } = await load();
  const long = `${'deep/'.repeat(25)}file-with-a-long-name.txt`;
  const files = [
    picked('Dockerfile', 'FROM scratch\n'),
    picked('.dockerignore', '# comment\nnode_modules\n*.log\n!keep.log\nbuild/**/*.tmp\n'),
    picked('src/index.js', 'console.log(1)\n'),
    picked(long, 'long'),
    picked('données/é.txt', 'accents'),
    picked('node_modules/x/index.js', 'ignored'),
    picked('debug.log', 'ignored'),
    picked('keep.log', 'kept'),
    picked('build/a/b.tmp', 'ignored'),
    picked('build/a/b.txt', 'kept'),
    picked('.git/HEAD', 'ref: refs/heads/main'),
  ];
  const { blob, files: count, skipped } = await packFolder(files);
  assert.equal(count, 7);
  assert.equal(skipped, 4);
  const dir = tempDir('tar-writer');
  const archive = path.join(dir, 'a.tar.gz');
  fs.writeFileSync(archive, Buffer.from(await blob.arrayBuffer()));
  const out = path.join(dir, 'out');
  fs.mkdirSync(out);
  await tar.x({ file: archive, cwd: out, strict: true });
  const read = (p: string): string => fs.readFileSync(path.join(out, p), 'utf8');
  assert.equal(read('Dockerfile'), 'FROM scratch\n');
  assert.equal(read('src/index.js'), 'console.log(1)\n');
  assert.equal(read(long), 'long');
  assert.equal(read('données/é.txt'), 'accents');
  assert.equal(read('keep.log'), 'kept');
  assert.equal(read('build/a/b.txt'), 'kept');
  for (const gone of ['node_modules', 'debug.log', 'build/a/b.tmp', '.git']) assert.equal(fs.existsSync(path.join(out, gone)), false, gone);
  assert.equal(fs.statSync(path.join(out, 'src/index.js')).mode & 0o111, 0o111, 'files stay executable');
  fs.rmSync(dir, { recursive: true, force: true });
});

test('.dockerignore patterns: *, **, ?, negation, anchoring, and what is under a match', async () => {
  const { ignoreMatcher } = await load();
  const ignored = ignoreMatcher('/dist\n*.md\n!README.md\n**/cache\ntmp?\n');
  const cases: Array<[string, boolean]> = [
    ['dist', true], ['dist/app.js', true], ['src/dist', false],
    ['notes.md', true], ['README.md', false], ['docs/notes.md', false],
    ['cache', true], ['a/b/cache/x', true],
    ['tmp1', true], ['tmp12', false], ['src/main.ts', false],
  ];
  for (const [p, expected] of cases) assert.equal(ignored(p), expected, p);
});
