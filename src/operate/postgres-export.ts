// Slipway's PostgreSQL tables as a logical export (JSON lines) and back: portable across server versions, no pg_dump needed.
import fs from 'node:fs';
import readline from 'node:readline';
import { once } from 'node:events';

/** Rows read per query while exporting (a page of upload chunks is at most this many MiB). */
const PAGE_ROWS = 64;
/** Kysely's lock row is the migrator's own, never data. */
const SKIPPED_TABLES = new Set(['kysely_migration_lock']);

type Row = Record<string, unknown>;

/** A value as JSON: binary columns (upload chunks, build logs) as {"$b": base64}. */
function encode(value: unknown): unknown {
  return Buffer.isBuffer(value) ? { $b: value.toString('base64') } : value;
}

function decode(value: unknown): unknown {
  if (value !== null && typeof value === 'object' && '$b' in value && typeof (value as { $b: unknown }).$b === 'string') return Buffer.from((value as { $b: string }).$b, 'base64');
  return value;
}

const ident = (name: string): string => `"${name.replace(/"/g, '""')}"`;

async function connect(url: string): Promise<import('pg').Client> {
  const { default: pg } = await import('pg');
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 10_000 });
  await client.connect();
  return client;
}

async function tablesOf(client: import('pg').Client): Promise<string[]> {
  const res = await client.query<{ table_name: string }>("select table_name from information_schema.tables where table_schema = current_schema() and table_type = 'BASE TABLE' order by table_name");
  return res.rows.map((r) => r.table_name).filter((t) => !SKIPPED_TABLES.has(t));
}

/**
 * Writes every table of the database at `url` to `file`, read in one REPEATABLE READ, READ ONLY
 * transaction (one consistent snapshot while the server keeps writing): a line `{"table", "columns"}`
 * per table, then a line per row (an array of values). Resolves with the newest migration it ran.
 */
export async function exportPostgres(url: string, file: string): Promise<string> {
  const client = await connect(url);
  const out = fs.createWriteStream(file, { mode: 0o600 });
  const write = async (line: unknown): Promise<void> => {
    if (!out.write(`${JSON.stringify(line)}\n`)) await once(out, 'drain');
  };
  try {
    await client.query('begin isolation level repeatable read read only');
    let schema = '';
    for (const table of await tablesOf(client)) {
      const columns = (await client.query<{ column_name: string }>('select column_name from information_schema.columns where table_schema = current_schema() and table_name = $1 order by ordinal_position', [table])).rows.map((r) => r.column_name);
      await write({ table, columns });
      // ctid orders the rows stably within the snapshot, so paging neither skips nor repeats one.
      for (let offset = 0; ; offset += PAGE_ROWS) {
        const page = await client.query<Row>(`select * from ${ident(table)} order by ctid limit ${PAGE_ROWS} offset ${offset}`);
        for (const row of page.rows) {
          await write(columns.map((c) => encode(row[c])));
          if (table === 'kysely_migration' && typeof row['name'] === 'string' && row['name'] > schema) schema = row['name'];
        }
        if (page.rows.length < PAGE_ROWS) break;
      }
    }
    await client.query('commit');
    return schema;
  } finally {
    await new Promise<void>((resolve, reject) => out.end((err?: Error | null) => (err ? reject(err) : resolve())));
    await client.end().catch(() => undefined);
  }
}

/** Whether the database at `url` holds a Slipway installation (its instance row). */
export async function postgresHoldsInstallation(url: string): Promise<string | undefined> {
  const client = await connect(url);
  try {
    const res = await client.query<{ id: string }>('select id from instance limit 1');
    return res.rows[0]?.id;
  } catch {
    return undefined;
  } finally {
    await client.end().catch(() => undefined);
  }
}

/** Drops every table of the current schema (restore --force onto PostgreSQL). */
export async function dropAllTables(url: string): Promise<void> {
  const client = await connect(url);
  try {
    for (const table of await tablesOf(client)) await client.query(`drop table if exists ${ident(table)} cascade`);
    await client.query('drop table if exists kysely_migration_lock');
  } finally {
    await client.end().catch(() => undefined);
  }
}

/** Tables in an order where each comes after the tables its foreign keys point to. */
async function insertOrder(client: import('pg').Client, tables: readonly string[]): Promise<string[]> {
  const res = await client.query<{ child: string; parent: string }>(
    `select c.relname as child, p.relname as parent from pg_constraint k join pg_class c on c.oid = k.conrelid join pg_class p on p.oid = k.confrelid
     where k.contype = 'f' and k.connamespace = (select oid from pg_namespace where nspname = current_schema())`,
  );
  const parents = new Map<string, Set<string>>();
  for (const { child, parent } of res.rows) if (child !== parent) (parents.get(child) ?? parents.set(child, new Set()).get(child))?.add(parent);
  const ordered: string[] = [];
  const seen = new Set<string>();
  const visit = (table: string): void => {
    if (seen.has(table)) return;
    seen.add(table);
    for (const parent of parents.get(table) ?? []) if (tables.includes(parent)) visit(parent);
    ordered.push(table);
  };
  for (const table of tables) visit(table);
  return ordered;
}

/**
 * Loads an export into the database at `url`, whose schema the current migrations have just
 * created (so a backup from an older version lands in the newer tables: migrations only add).
 * One transaction: on any failure nothing is left. The migrations' own table is not loaded (the
 * current one is a superset). Serial sequences are moved past the loaded ids.
 */
export async function importPostgres(url: string, file: string): Promise<void> {
  const byTable = new Map<string, { columns: string[]; rows: unknown[][] }>();
  let current: { columns: string[]; rows: unknown[][] } | undefined;
  // Read whole before loading: the export's table order is alphabetical, the load's follows the foreign keys.
  const lines = readline.createInterface({ input: fs.createReadStream(file), crlfDelay: Infinity });
  for await (const line of lines) {
    if (line === '') continue;
    const parsed = JSON.parse(line) as { table: string; columns: string[] } | unknown[];
    if (Array.isArray(parsed)) current?.rows.push(parsed.map(decode));
    else byTable.set(parsed.table, (current = { columns: parsed.columns, rows: [] }));
  }
  byTable.delete('kysely_migration');
  const client = await connect(url);
  try {
    await client.query('begin');
    for (const table of await insertOrder(client, [...byTable.keys()])) {
      const data = byTable.get(table);
      if (data === undefined || data.rows.length === 0) continue;
      const columns = data.columns.map(ident).join(', ');
      for (const row of data.rows) {
        // The version this restore runs as recorded itself when it created the schema.
        const conflict = table === 'slipway_versions' ? ' on conflict do nothing' : '';
        await client.query(`insert into ${ident(table)} (${columns}) values (${row.map((_, i) => `$${i + 1}`).join(', ')})${conflict}`, row);
      }
    }
    const serials = await client.query<{ table_name: string; column_name: string }>(
      "select table_name, column_name from information_schema.columns where table_schema = current_schema() and column_default like 'nextval(%'",
    );
    for (const { table_name: t, column_name: c } of serials.rows) {
      await client.query(`select setval(pg_get_serial_sequence($1, $2), coalesce((select max(${ident(c)}) from ${ident(t)}), 1), (select max(${ident(c)}) from ${ident(t)}) is not null)`, [t, c]);
    }
    await client.query('commit');
  } catch (err) {
    await client.query('rollback').catch(() => undefined);
    throw err;
  } finally {
    await client.end().catch(() => undefined);
  }
}
