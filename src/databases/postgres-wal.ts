// PostgreSQL's point-in-time recovery commands: a replication rule and slot, pg_receivewal in the companion, WAL switches, pg_basebackup, and recovery to a target time.
import type { DatabaseCredentials } from './engine-adapter.js';
import type { WalArchiving } from './wal-archiving.js';

/** The physical replication slot that keeps the log until the companion has it. */
export const WAL_SLOT = 'slipway_wal';
/** Bytes of a segment's long page header: a segment holding no more than this holds no record yet. */
const SEGMENT_HEADER_BYTES = 40;
/** A segment (optionally gzip-compressed) or a timeline history file, as pg_receivewal names them. */
const COMPLETED = /^(?:[0-9A-F]{24}(?:\.gz)?|[0-9A-F]{8}\.history)$/;

const role = (c: DatabaseCredentials): string => {
  // The role is Slipway's own (`app`), never a user's text; still, only a plain identifier goes into SQL.
  if (!/^[a-z_][a-z0-9_]*$/.test(c.username)) throw new Error(`unexpected role name ${c.username}`);
  return c.username;
};
/** psql over the local socket (trust), on the maintenance database. */
const localPsql = (c: DatabaseCredentials, database = 'postgres'): string[] => ['psql', '-U', role(c), '-d', database, '-v', 'ON_ERROR_STOP=1', '-Atq'];
const tcpPsql = (c: DatabaseCredentials): string[] => ['psql', '-h', '127.0.0.1', '-p', '5432', '-U', role(c), '-d', c.database, '-v', 'ON_ERROR_STOP=1', '-At'];
const literal = (value: string): string => `'${value.replace(/'/g, "''")}'`;

/** The recovery target as PostgreSQL reads it (it refuses ISO 8601's `T`/`Z`). */
export const recoveryTime = (at: Date): string => at.toISOString().replace('T', ' ').replace('Z', '+00');

export const postgresWal: WalArchiving = {
  // pg_hba.conf has no rule for replication from another host: one is appended (written through a
  // large object, so no shell runs) and the configuration reloaded; then the slot is made.
  prepare: (c) => ({
    argv: localPsql(c),
    env: {},
    stdin: `DO $slipway$
DECLARE
  content text := pg_read_file(current_setting('hba_file'));
  wanted text := ${literal(`host replication ${role(c)} all scram-sha-256`)};
  blob oid;
BEGIN
  IF position(wanted in content) = 0 THEN
    blob := lo_from_bytea(0, convert_to(content || E'\\n# Slipway: the log streamed for point-in-time recovery\\n' || wanted || E'\\n', 'UTF8'));
    PERFORM lo_export(blob, current_setting('hba_file'));
    PERFORM lo_unlink(blob);
    PERFORM pg_reload_conf();
  END IF;
  IF NOT EXISTS (SELECT 1 FROM pg_replication_slots WHERE slot_name = '${WAL_SLOT}') THEN
    PERFORM pg_create_physical_replication_slot('${WAL_SLOT}', true);
  END IF;
END $slipway$;
`,
  }),
  dropSlot: (c) => ({ argv: localPsql(c), env: {}, stdin: `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = '${WAL_SLOT}' AND NOT active;\n` }),
  receive: (c, host, dir) => ({
    argv: ['pg_receivewal', '-h', host, '-p', '5432', '-U', role(c), '-D', dir, '--slot', WAL_SLOT, '--synchronous', '--compress=gzip:1', '--no-password', '--status-interval=5'],
    env: { PGPASSWORD: c.password },
  }),
  // Switches only when a record was written since the segment began; prints the segment that must
  // be archived for everything written so far to be: the one just closed, or the one before.
  switchLog: (c) => ({
    argv: [
      ...tcpPsql(c),
      '-c',
      `select case when (pg_current_wal_insert_lsn() - '0/0') % (select setting::numeric from pg_settings where name = 'wal_segment_size') > ${SEGMENT_HEADER_BYTES} ` +
        `then pg_walfile_name(pg_switch_wal()) else pg_walfile_name(pg_current_wal_insert_lsn() - ${SEGMENT_HEADER_BYTES + 1}) end`,
    ],
    env: { PGPASSWORD: c.password },
  }),
  currentLog: (c) => ({ argv: [...tcpPsql(c), '-c', 'select pg_walfile_name(pg_current_wal_insert_lsn())'], env: { PGPASSWORD: c.password } }),
  // -D - writes one tar to stdout. Its log is not in it (-X none): the archive holds every segment
  // from its start (the slot), and fetching at the end could find a long backup's first segments recycled.
  baseBackup: (c) => ({
    argv: ['pg_basebackup', '-h', '127.0.0.1', '-p', '5432', '-U', role(c), '-D', '-', '-Ft', '-X', 'none', '--checkpoint=fast', '--no-password'],
    env: { PGPASSWORD: c.password },
  }),
  completed: (name) => COMPLETED.test(name),
  restoredName: (name) => (name.endsWith('.gz') ? { name: name.slice(0, -3), gzip: true } : { name, gzip: false }),
  user: 'postgres',
  dataSubdir: 'pgdata',
  recover: (stagingDir, at) => [
    'postgres',
    '-c',
    `restore_command=cp ${stagingDir}/%f %p`,
    ...(at === undefined ? [] : ['-c', `recovery_target_time=${recoveryTime(at)}`]),
    '-c',
    'recovery_target_action=promote',
    // Nobody connects while it recovers: socket only.
    '-c',
    'listen_addresses=',
  ],
  recoverySignal: 'recovery.signal',
  recovered: (c) => ({ argv: ['psql', '-U', role(c), '-d', 'postgres', '-Atc', 'select pg_is_in_recovery()'], env: {} }),
  adopt: (source, c) => ({
    argv: localPsql(c),
    env: {},
    stdin:
      `ALTER ROLE ${role(c)} PASSWORD ${literal(c.password)};\n` +
      (source === c.database ? '' : `ALTER DATABASE "${source.replace(/"/g, '""')}" RENAME TO "${c.database.replace(/"/g, '""')}";\n`) +
      'CHECKPOINT;\n',
  }),
  targetBeyondLog: /recovery ended before configured recovery target was reached/,
};
