// The database engines Slipway manages, by name.
import type { DatabaseEngineName, EngineAdapter } from './engine-adapter.js';
import { mysqlAdapter } from './mysql-adapter.js';
import { postgresAdapter } from './postgres-adapter.js';
import { redisAdapter } from './redis-adapter.js';

export const ENGINES: Readonly<Record<DatabaseEngineName, EngineAdapter>> = {
  postgres: postgresAdapter,
  mysql: mysqlAdapter,
  redis: redisAdapter,
};
