// Deployments and builds are queried only in src/db/ (the deployment store and catalog): a scan of the sources.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
const SRC = path.join(ROOT, 'src');
const OWNED = ['deployments', 'builds'];
const TABLE = `(?:${OWNED.join('|')})`;

/** Kysely's entry points that name a table (a string, or an array of them, possibly aliased). */
const KYSELY = new RegExp(
  String.raw`\b(?:selectFrom|insertInto|replaceInto|updateTable|deleteFrom|mergeInto|innerJoin|leftJoin|rightJoin|fullJoin|crossJoin|table)\(\s*\[?\s*['"\x60]${TABLE}\b`,
);
/** Raw SQL naming a table (in a template or string; comments are stripped before this runs). */
const RAW_SQL = new RegExp(String.raw`\b(?:from|join|update|into|table)\s+["\x60]?${TABLE}\b`, 'i');

/** Comments removed, so prose ("drops images from builds") is not read as SQL. */
const stripComments = (text: string): string => text.replace(/\/\*[\s\S]*?\*\//g, '').replace(/(^|[^:'"\x60])\/\/.*$/gm, '$1');

function sourceFiles(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(full);
    return entry.name.endsWith('.ts') ? [full] : [];
  });
}

/** Every line of `file` that queries deployments or builds, as `path:line: text`. */
function tableAccesses(file: string): string[] {
  const lines = stripComments(fs.readFileSync(file, 'utf8')).split('\n');
  return lines.flatMap((line, i) => (KYSELY.test(line) || RAW_SQL.test(line) ? [`${path.relative(ROOT, file)}:${i + 1}: ${line.trim()}`] : []));
}

test('the scan sees the deployment store and catalog query both tables (it can find what it looks for)', () => {
  const store = tableAccesses(path.join(SRC, 'db', 'deployment-store.ts')).join('\n');
  const catalog = tableAccesses(path.join(SRC, 'db', 'deployment-catalog.ts')).join('\n');
  for (const table of OWNED) {
    assert.match(store, new RegExp(`'${table}'`), `no access to ${table} found in the store`);
    assert.match(catalog, new RegExp(`'${table}'`), `no access to ${table} found in the catalog`);
  }
  assert.equal(RAW_SQL.test('sql`select id from deployments where id = ${id}`'), true);
  assert.equal(RAW_SQL.test('UPDATE "builds" SET status = 1'), true);
  assert.equal(KYSELY.test(".innerJoin('builds as b', 'b.id', 'x.build_id')"), true);
  assert.equal(KYSELY.test("tags: ['deployments'],"), false);
});

test('nothing outside src/db/ reads or writes deployments or builds', () => {
  const outside = sourceFiles(SRC).filter((file) => !file.startsWith(path.join(SRC, 'db') + path.sep));
  assert.ok(outside.length > 50, 'the scan found the sources');
  assert.deepEqual(outside.flatMap(tableAccesses), []);
});
