// The PostgreSQL engine: the official image's POSTGRES_* contract, PGDATA, port 5432, probed with psql over TCP.
import type { EngineAdapter } from './engine-adapter.js';
import { sqlIdentifier } from './engine-adapter.js';

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
};
