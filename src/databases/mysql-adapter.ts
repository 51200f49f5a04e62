// The MySQL engine (MariaDB): the official image's MARIADB_* contract, /var/lib/mysql, port 3306, probed with the mariadb client over TCP.
import type { EngineAdapter } from './engine-adapter.js';
import { sqlIdentifier } from './engine-adapter.js';

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
};
