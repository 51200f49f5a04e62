// The MySQL engine (MariaDB): the official image's MARIADB_* contract, /var/lib/mysql, port 3306, probed with the mariadb client over TCP.
import type { EngineAdapter } from './engine-adapter.js';
import { parseTableLines, sqlIdentifier } from './engine-adapter.js';

export const mysqlAdapter: EngineAdapter = {
  engine: 'mysql',
  imageSetting: 'SLIPWAY_DB_IMAGE_MYSQL',
  port: 3306,
  dataDir: '/var/lib/mysql',
  credentials: (name, password) => ({ username: 'app', password, database: sqlIdentifier(name) }),
  environment: (c) => ({
    // The server is this database's alone: root shares the user's password (dumps and restores use it).
    MARIADB_ROOT_PASSWORD: c.password,
    MARIADB_DATABASE: c.database,
    MARIADB_USER: c.username,
    MARIADB_PASSWORD: c.password,
  }),
  command: () => undefined,
  url: (c, host) => `mysql://${c.username}:${encodeURIComponent(c.password)}@${host}:3306/${c.database}`,
  // Over TCP: the image's initialization runs its temporary server without networking.
  probe: (c) => ({
    argv: ['mariadb', '--protocol=TCP', '-h', '127.0.0.1', '-P', '3306', '-u', c.username, '-N', '-B', '-e', 'select 1', c.database],
    env: { MYSQL_PWD: c.password },
  }),
  ready: (result) => result.exitCode === 0 && result.output.trim().endsWith('1'),
  // As root (the server is this database's alone): the app user lacks the privileges a consistent dump needs.
  dump: (c) => ({
    argv: ['mariadb-dump', '--protocol=TCP', '-h', '127.0.0.1', '-P', '3306', '-u', 'root', '--single-transaction', '--routines', '--triggers', '--events', '--hex-blob', '--add-drop-database', '--databases', c.database],
    env: { MYSQL_PWD: c.password },
  }),
  restoreMode: 'stream',
  // The dump names its database (--databases) and drops it before creating it again: a restore replaces (grants stay).
  restore: (c) => ({ argv: ['mariadb', '--protocol=TCP', '-h', '127.0.0.1', '-P', '3306', '-u', 'root', '--binary-mode'], env: { MYSQL_PWD: c.password } }),
  // Its tables (decisions §20: MariaDB's check is the tables), one name per line.
  inventory: (c) => ({
    argv: ['mariadb', '--protocol=TCP', '-h', '127.0.0.1', '-P', '3306', '-u', 'root', '-N', '-B', '-e', `select table_name from information_schema.tables where table_schema = '${c.database}' order by 1`],
    env: { MYSQL_PWD: c.password },
  }),
  parseInventory: (output) => ({ tables: parseTableLines(output) }),
  dumpExtension: 'sql',
};
