// Unit tests of the CLI's packing: ignore rules, symlink safety, the tar.gz it writes; plus progress and slugs.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import * as tar from 'tar';
import { slugify } from '../../src/cli/commands/deploy-command.js';
import { parseIgnoreRules } from '../../src/source/ignore-rules.js';
import { listSource, packFolder } from '../../src/cli/pack.js';
import { Progress, formatBytes } from '../../src/cli/progress.js';

let work = '';
before(async () => {
  work = await mkdtemp(path.join(os.tmpdir(), 'slipway-pack-test-'));
});
after(async () => {
  await rm(work, { recursive: true, force: true });
});

/** Writes `files` (relative path → content) under a fresh folder. */
async function folder(files: Record<string, string>): Promise<string> {
  const dir = await mkdtemp(path.join(work, 'src-'));
  for (const [rel, content] of Object.entries(files)) {
    await mkdir(path.dirname(path.join(dir, rel)), { recursive: true });
    await writeFile(path.join(dir, rel), content);
  }
  return dir;
}

describe('ignore rules', () => {
  test('.dockerignore: anchored patterns, wildcards, exceptions, directories', () => {
    const m = parseIgnoreRules('# comment\nbig.bin\n*.log\n!keep.log\nnode_modules\ndocs/**/*.md\n', 'dockerignore');
    assert.equal(m.excludes('big.bin', false), true);
    assert.equal(m.excludes('sub/big.bin', false), false);
    assert.equal(m.excludes('a.log', false), true);
    assert.equal(m.excludes('keep.log', false), false);
    assert.equal(m.excludes('node_modules', true), true);
    assert.equal(m.excludes('node_modules/x/y.js', false), true);
    assert.equal(m.excludes('docs/a/b/c.md', false), true);
    assert.equal(m.excludes('docs/c.txt', false), false);
    assert.equal(m.excludes('index.html', false), false);
  });

  test('.gitignore: unanchored names, leading slash anchors, trailing slash means directories', () => {
    const m = parseIgnoreRules('node_modules/\n/build\n*.tmp\nlogs/*.txt\n', 'gitignore');
    assert.equal(m.excludes('a/b/node_modules', true), true);
    assert.equal(m.excludes('a/node_modules/x.js', false), true);
    assert.equal(m.excludes('node_modules', false), false, 'a file named like a dir-only rule stays');
    assert.equal(m.excludes('build', true), true);
    assert.equal(m.excludes('src/build', true), false);
    assert.equal(m.excludes('deep/x.tmp', false), true);
    assert.equal(m.excludes('logs/a.txt', false), true);
    assert.equal(m.excludes('x/logs/a.txt', false), false);
  });

  test('an exception inside an excluded directory keeps it walkable', () => {
    const m = parseIgnoreRules('assets\n!assets/keep.txt\n', 'dockerignore');
    assert.equal(m.excludes('assets', true), true);
    assert.equal(m.mayReincludeBelow('assets'), true);
    assert.equal(m.excludes('assets/keep.txt', false), false);
    assert.equal(m.excludes('assets/other.txt', false), true);
  });
});

describe('listSource and packFolder', () => {
  test('.gitignore applies when there is no .dockerignore; .git and slipway.json never go', async () => {
    const dir = await folder({
      Dockerfile: 'FROM x\n',
      '.gitignore': 'dist/\n*.secret\nDockerfile\n',
      'dist/app.js': '',
      'a/b.secret': '',
      'a/c.txt': '',
      '.git/HEAD': '',
      'slipway.json': '{}',
      'sub/slipway.json': '{}',
    });
    const listing = await listSource(dir, { dockerfile: 'Dockerfile' });
    assert.equal(listing.ignoreFile, '.gitignore');
    assert.deepEqual(listing.entries, ['.gitignore', 'Dockerfile', 'a', 'a/c.txt', 'sub', 'sub/slipway.json']);
  });

  test('.dockerignore wins over .gitignore and always goes itself', async () => {
    const dir = await folder({ Dockerfile: '', '.dockerignore': '.dockerignore\n*.txt\n', '.gitignore': 'Dockerfile\n', 'a.txt': '' });
    const listing = await listSource(dir, { dockerfile: 'Dockerfile' });
    assert.deepEqual(listing.entries, ['.dockerignore', '.gitignore', 'Dockerfile']);
  });

  test('links: inside kept (absolute made relative), outside skipped with a warning, never followed', async () => {
    const outside = await folder({ 'secret.txt': 'SECRET' });
    const dir = await folder({ Dockerfile: '', 'web/index.html': 'hi' });
    await symlink('web/index.html', path.join(dir, 'rel-link'));
    await symlink(path.join(dir, 'web', 'index.html'), path.join(dir, 'web', 'abs-link'));
    await symlink(path.join(outside, 'secret.txt'), path.join(dir, 'abs-out'));
    await symlink('../../etc/passwd', path.join(dir, 'web', 'rel-out'));
    await symlink(outside, path.join(dir, 'dir-out'));
    // Inside by name, outside on disk: through the escaping `dir-out` link.
    await symlink('dir-out/secret.txt', path.join(dir, 'via-link'));
    await symlink('missing.txt', path.join(dir, 'dangling'));
    const warnings: string[] = [];
    const listing = await listSource(dir, { dockerfile: 'Dockerfile', onWarning: (w) => warnings.push(w) });
    assert.deepEqual([...listing.links.entries()].sort(), [
      ['dangling', 'missing.txt'],
      ['rel-link', 'web/index.html'],
      ['web/abs-link', 'index.html'],
    ]);
    assert.deepEqual(warnings.map((w) => w.split(' ')[1]).sort(), ['abs-out', 'dir-out', 'via-link', 'web/rel-out']);

    const archive = path.join(work, `pack-${Date.now()}.tar.gz`);
    const packed = await packFolder(dir, archive, { dockerfile: 'Dockerfile' });
    assert.ok(packed.bytes > 0);
    const entries: Array<{ path: string; type: string; linkpath: string; body: string }> = [];
    await tar.t({
      file: archive,
      onReadEntry: (entry) => {
        let body = '';
        entry.on('data', (chunk: Buffer) => (body += chunk.toString()));
        entry.on('end', () => entries.push({ path: entry.path, type: entry.type, linkpath: entry.linkpath ?? '', body }));
      },
    });
    const byPath = new Map(entries.map((e) => [e.path.replace(/\/$/, ''), e]));
    assert.equal(byPath.get('web/abs-link')?.type, 'SymbolicLink');
    assert.equal(byPath.get('web/abs-link')?.linkpath, 'index.html');
    assert.equal(byPath.get('web/index.html')?.body, 'hi');
    for (const skipped of ['abs-out', 'dir-out', 'via-link', 'web/rel-out']) assert.equal(byPath.has(skipped), false, skipped);
    assert.ok(entries.every((e) => !e.body.includes('SECRET')));
  });
});

describe('progress and names', () => {
  test('plain periodic lines when stderr is not a TTY', () => {
    let out = '';
    const sink = new Writable({
      write(chunk: Buffer, _encoding, callback) {
        out += chunk.toString();
        callback();
      },
    });
    let now = 0;
    const progress = new Progress(sink, 'uploaded', 4 * 1024 * 1024, () => now);
    now = 500;
    progress.update(1024 * 1024);
    assert.equal(out, '', 'nothing before 2 s');
    now = 2000;
    progress.update(2 * 1024 * 1024);
    assert.match(out, /^uploaded \[#{12}\.{12}\] 50% {2}2\.0 MiB \/ 4\.0 MiB {2}1\.0 MiB\/s\n$/);
    now = 4000;
    progress.update(4 * 1024 * 1024);
    progress.finish();
    assert.match(out, /uploaded 4\.0 MiB in 4\.0 s \(1\.0 MiB\/s\)\n$/);
    assert.equal(formatBytes(512), '512 B');
  });

  test('slugify makes a DNS label', () => {
    assert.equal(slugify('My App!'), 'my-app');
    assert.equal(slugify('__'), 'app');
    assert.equal(slugify('a'.repeat(80)).length, 63);
  });
});
