// The domain's tables are queried only in src/db/ (behind the stores the domain declares): a scan of the sources.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
const SRC = path.join(ROOT, 'src');
/** Each table the domain reaches only through a store, with the src/db/ files of its stores (each queries it). */
const STORES: Record<string, readonly string[]> = {
  deployments: ['deployment-store.ts', 'deployment-catalog.ts'],
  builds: ['deployment-store.ts', 'deployment-catalog.ts'],
  custom_domains: ['custom-domain-store.ts'],
  tunnels: ['tunnel-claim-store.ts'],
  users: ['account-store.ts'],
  sessions: ['account-store.ts'],
  audit_log: ['audit-log.ts'],
  teams: ['team-store.ts'],
  team_members: ['team-store.ts', 'account-store.ts'],
  api_keys: ['api-key-store.ts', 'account-store.ts', 'quota-store.ts'],
  subdomain_claims: ['tunnel-claim-store.ts', 'deployment-catalog.ts', 'preview-catalog.ts', 'deployment-store.ts'],
};
const OWNED = Object.keys(STORES);
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

test('the scan sees each store query its tables (it can find what it looks for)', () => {
  for (const [table, stores] of Object.entries(STORES)) {
    for (const store of stores) {
      const found = tableAccesses(path.join(SRC, 'db', store)).join('\n');
      assert.match(found, new RegExp(`'${table}'`), `no access to ${table} found in src/db/${store}`);
    }
  }
  assert.equal(RAW_SQL.test('sql`select id from deployments where id = ${id}`'), true);
  assert.equal(RAW_SQL.test('UPDATE "builds" SET status = 1'), true);
  assert.equal(KYSELY.test(".innerJoin('builds as b', 'b.id', 'x.build_id')"), true);
  assert.equal(KYSELY.test("tags: ['deployments'],"), false);
});

test(`nothing outside src/db/ reads or writes ${OWNED.join(', ')}`, () => {
  const outside = sourceFiles(SRC).filter((file) => !file.startsWith(path.join(SRC, 'db') + path.sep));
  assert.ok(outside.length > 50, 'the scan found the sources');
  assert.deepEqual(outside.flatMap(tableAccesses), []);
});
