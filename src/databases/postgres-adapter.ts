// The PostgreSQL engine: the official image's POSTGRES_* contract, PGDATA, port 5432, probed with psql over TCP.
import type { EngineAdapter } from './engine-adapter.js';
import { postgresGreeting } from './greeting.js';
import { SNAPSHOT_MARK, parseTableLines, sqlIdentifier } from './engine-adapter.js';
import { postgresWal } from './postgres-wal.js';

const INVENTORY_SQL =
  "select table_schema || '.' || table_name, (xpath('/row/c/text()', query_to_xml(format('select count(*) as c from %I.%I', table_schema, table_name), false, true, '')))[1]::text " +
  "from information_schema.tables where table_type = 'BASE TABLE' and table_schema not in ('pg_catalog', 'information_schema') order by 1";

/**
 * The counting session's settings (the connection's options): a plain sequential scan per table.
 * A database's container has its CPU share (one CPU by default) and a backup's count runs beside
 * the dump in it: parallel workers and JIT there only add processes and compilation to that share
 * (a 7-million-row count: 2.5 s with them, 1.3 s without), and a sequential scan joins the dump's
 * own scan of the same table (PostgreSQL synchronizes them) where an index-only scan reads the
 * index besides (0.9 s). In a freshly restored throwaway, whose visibility map is not yet set, an
 * index-only scan would fetch every heap page anyway.
 */
const COUNT_OPTIONS = '-c jit=off -c max_parallel_workers_per_gather=0 -c enable_indexonlyscan=off -c enable_indexscan=off -c enable_bitmapscan=off';

/**
 * The restoring session's settings: an index build uses parallel workers only where the container
 * has a CPU for each beside the leader's (PostgreSQL's default, 2, added processes and their merge
 * to a one-CPU share: the primary key of 7 million rows built ~10 % slower with them).
 */
export function restoreOptions(cpus: number | undefined): string {
  const workers = cpus === undefined ? 2 : Math.max(0, Math.min(2, Math.floor(cpus) - 1));
  return `-c max_parallel_maintenance_workers=${workers}`;
}

export const postgresAdapter: EngineAdapter = {
  engine: 'postgres',
  imageSetting: 'SLIPWAY_DB_IMAGE_POSTGRES',
  port: 5432,
  dataDir: '/var/lib/postgresql/data',
  credentials: (name, password) => ({ username: 'app', password, database: sqlIdentifier(name) }),
  environment: (c) => ({
    POSTGRES_USER: c.username,
    POSTGRES_PASSWORD: c.password,
    POSTGRES_DB: c.database,
    // A subdirectory: the volume's root may hold lost+found on some drivers, which initdb refuses.
    PGDATA: '/var/lib/postgresql/data/pgdata',
  }),
  command: () => undefined,
  url: (c, host) => `postgres://${c.username}:${encodeURIComponent(c.password)}@${host}:5432/${c.database}`,
  // Over TCP: while the image initializes, its temporary server listens on the socket only, so
  // success means the final server accepts these credentials.
  probe: (c) => ({ argv: ['psql', '-h', '127.0.0.1', '-p', '5432', '-U', c.username, '-d', c.database, '-Atc', 'select 1'], env: { PGPASSWORD: c.password } }),
  ready: (result) => result.exitCode === 0 && result.output.trim().endsWith('1'),
  greeting: postgresGreeting,
  dump: (c) => ({ argv: ['pg_dump', '-Fc', '-h', '127.0.0.1', '-p', '5432', '-U', c.username, '-d', c.database], env: { PGPASSWORD: c.password } }),
  restoreMode: 'stream',
  // One transaction whether it replaces data or fills a new database: a failure leaves nothing
  // half-restored, and the load is faster: the index builds read rows of their own transaction,
  // so they do not set hint bits on (and write again) every page the load has just written.
  restore: (c, options) => ({
    argv: ['pg_restore', '--no-owner', '--no-privileges', '--exit-on-error', '--single-transaction', ...(options.clean ? ['--clean', '--if-exists'] : []), '-h', '127.0.0.1', '-p', '5432', '-U', c.username, '-d', c.database],
    env: { PGPASSWORD: c.password, PGOPTIONS: restoreOptions(options.cpus) },
  }),
  // Every table outside the system schemas with its exact row count, one `schema.table<TAB>rows` line each.
  inventory: (c) => ({
    argv: ['psql', '-h', '127.0.0.1', '-p', '5432', '-U', c.username, '-d', c.database, '-v', 'ON_ERROR_STOP=1', '-AtF', '\t', '-c', INVENTORY_SQL],
    env: { PGPASSWORD: c.password, PGOPTIONS: COUNT_OPTIONS },
  }),
  parseInventory: (output) => ({ tables: parseTableLines(output) }),
  // pg_export_snapshot: the dump imports it (--snapshot); the session counts in it while the dump runs.
  snapshotDump: {
    session: (c) => ({
      argv: ['psql', '-X', '-q', '-At', '-F', '\t', '-v', 'ON_ERROR_STOP=1', '-h', '127.0.0.1', '-p', '5432', '-U', c.username, '-d', c.database],
      env: { PGPASSWORD: c.password, PGOPTIONS: COUNT_OPTIONS },
    }),
    open: `begin transaction isolation level repeatable read, read only;\nselect pg_export_snapshot() as slipway_snapshot \\gset\n\\warn ${SNAPSHOT_MARK} :slipway_snapshot\n`,
    inventory: `${INVENTORY_SQL};\n`,
    close: 'commit;\n',
    dump: (c, name) => ({ argv: ['pg_dump', '-Fc', `--snapshot=${name}`, '-h', '127.0.0.1', '-p', '5432', '-U', c.username, '-d', c.database], env: { PGPASSWORD: c.password } }),
  },
  // Verification's copy: no initdb sync, no fsync, no full-page images (it is removed after its check);
  // room for the locks of a one-transaction restore of ~50,000 tables and indexes (the default: ~6,000).
  throwaway: () => ({
    env: { POSTGRES_INITDB_ARGS: '--no-sync' },
    command: ['postgres', '-c', 'fsync=off', '-c', 'synchronous_commit=off', '-c', 'full_page_writes=off', '-c', 'max_locks_per_transaction=512'],
  }),
  dumpExtension: 'dump',
  pointInTime: postgresWal,
};
