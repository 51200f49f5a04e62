// Queries of the API's hot path compiled once: Kysely builds and compiles a query on every call (an
// immutable tree, frozen node by node), which cost more than the SQLite read itself.
import type { Compilable, CompiledQuery, Kysely } from 'kysely';

/** A compiled query run with new parameters; rejects a call with the wrong number of them. */
export type PreparedQuery<Row> = (...parameters: readonly unknown[]) => Promise<Row[]>;

/**
 * Compiles `query` once — for the dialect in use, so its SQL has that dialect's placeholders — and
 * returns a function that runs it with `parameters` in place of the ones it was built with (in the
 * order they appear in the SQL). Build the query with placeholder values where the parameters go.
 * The SQL text is fixed, so the SQLite statement cache prepares it once.
 */
export function preparedQuery<DB, Row>(db: Kysely<DB>, query: Compilable<Row>): PreparedQuery<Row> {
  const compiled = query.compile();
  const count = compiled.parameters.length;
  return async (...parameters) => {
    if (parameters.length !== count) throw new Error(`prepared query: ${count} parameter(s) expected, ${parameters.length} given`);
    const run: CompiledQuery<Row> = { query: compiled.query, queryId: compiled.queryId, sql: compiled.sql, parameters };
    const result = await db.executeQuery(run);
    return result.rows;
  };
}
