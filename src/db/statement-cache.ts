// Prepared statements reused by SQL text, and rows read as arrays: Kysely's SQLite driver prepares
// every query anew, and better-sqlite3 builds row objects more slowly than plain JavaScript does.
import type SQLite from 'better-sqlite3';
import type { SqliteDatabase, SqliteStatement } from 'kysely';

/** How many distinct statements are kept (the app has a few hundred at most; `IN (…)` lists vary). */
const MAX_STATEMENTS = 1000;

/** Schema changes: they may change what a cached `select *` returns, so they empty the cache. */
const DDL = /^\s*(create|alter|drop)\b/i;

interface Cached {
  readonly statement: SqliteStatement;
  readonly busy: () => boolean;
}

/**
 * Wraps a better-sqlite3 database so that `prepare` returns a cached statement for SQL it has seen.
 * A statement still being iterated (a streamed query) is busy and cannot be reused: a fresh one is
 * prepared instead. A reading statement returns its rows as arrays, made into objects here, with
 * the same keys (the last column of a name wins, as in better-sqlite3's own objects).
 */
export function withStatementCache(db: SQLite.Database): SqliteDatabase {
  const cache = new Map<string, Cached>();
  return {
    close: () => db.close(),
    prepare(sql: string): SqliteStatement {
      const cached = cache.get(sql);
      if (cached !== undefined && !cached.busy()) return cached.statement;
      if (DDL.test(sql)) {
        cache.clear();
        return db.prepare(sql);
      }
      const fresh = prepareFast(db, sql);
      if (cached === undefined) {
        if (cache.size >= MAX_STATEMENTS) cache.delete(cache.keys().next().value as string);
        cache.set(sql, fresh);
      }
      return fresh.statement;
    },
  };
}

function prepareFast(db: SQLite.Database, sql: string): Cached {
  const statement = db.prepare(sql);
  if (!statement.reader) return { statement, busy: () => statement.busy };
  const rows = db.prepare(sql).raw(true);
  const columns = rows.columns().map((c) => c.name);
  const toObject = (values: unknown[]): Record<string, unknown> => {
    const row: Record<string, unknown> = {};
    for (let i = 0; i < columns.length; i += 1) row[columns[i] as string] = values[i];
    return row;
  };
  return {
    statement: {
      reader: true,
      all: (parameters) => (rows.all(parameters) as unknown[][]).map(toObject),
      run: (parameters) => statement.run(parameters),
      iterate: (parameters) => statement.iterate(parameters),
    },
    busy: () => statement.busy || rows.busy,
  };
}
