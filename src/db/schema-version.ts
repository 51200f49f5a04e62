// The schema's version guard: a database migrated by a newer Slipway is refused, naming both versions.
import { sql, type Kysely } from 'kysely';
import { nowIso } from '../core/now.js';
import type { Database } from './schema.js';

/** The database handle (as database.ts's Db; named here so the two files do not import each other). */
type Db = Kysely<Database>;

/** Raised before any migration runs when the database holds migrations this Slipway does not know. */
export class DatabaseTooNewError extends Error {
  override readonly name = 'DatabaseTooNewError';
  readonly code = 'DATABASE_TOO_NEW';
}

/** The newest of `migrations` (their names start with the date, so they sort in time). */
export function latestMigration(migrations: readonly string[]): string {
  return [...migrations].sort().at(-1) ?? '';
}

/**
 * Throws DatabaseTooNewError when the database has run a migration not in `known`: a newer Slipway
 * migrated it, and this one would run on a schema it does not understand. A fresh database passes.
 */
export async function refuseNewerSchema(db: Db, known: readonly string[], version: string): Promise<void> {
  let applied: string[];
  try {
    const rows = await sql<{ name: string }>`select name from kysely_migration`.execute(db);
    applied = rows.rows.map((r) => r.name);
  } catch {
    // No migration table yet: a new database.
    return;
  }
  const knownSet = new Set(known);
  const unknown = applied.filter((name) => !knownSet.has(name)).sort();
  if (unknown.length === 0) return;
  const newest = unknown.at(-1) ?? '';
  const recorded = await db
    .selectFrom('slipway_versions')
    .select(['version', 'schema'])
    .orderBy('schema', 'desc')
    .orderBy('first_started_at', 'desc')
    .executeTakeFirst()
    .catch(() => undefined);
  const by = recorded === undefined || recorded.schema < newest ? `a newer Slipway (schema ${newest})` : `Slipway ${recorded.version} (schema ${recorded.schema})`;
  throw new DatabaseTooNewError(
    `this database was migrated by ${by}; this is Slipway ${version} (schema ${latestMigration(known)}), which cannot run on it. ` +
      'Run that version (or newer), or restore a backup taken before the upgrade.',
  );
}

/** Records that `version` (carrying migrations up to `schema`) runs on the database; once per pair. */
export async function recordVersion(db: Db, version: string, schema: string): Promise<void> {
  await db.insertInto('slipway_versions').values({ version, schema, first_started_at: nowIso() }).onConflict((oc) => oc.columns(['version', 'schema']).doNothing()).execute();
}
