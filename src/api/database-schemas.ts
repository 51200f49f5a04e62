// Request and response schemas of managed databases (decisions §19): they validate requests and document them in OpenAPI.
import { Type, type Static, type TSchema } from '@sinclair/typebox';

const Timestamp = Type.String({ format: 'date-time' });
const Nullable = <T extends TSchema>(schema: T) => Type.Unsafe<Static<T> | null>({ ...schema, nullable: true });
const OneOf = <const V extends readonly string[]>(values: V) => Type.Unsafe<V[number]>({ type: 'string', enum: values });

export const DatabaseResponse = Type.Object({
  id: Type.String(),
  name: Type.String({ description: 'a DNS label, unique per owner: the host name linked apps reach it by' }),
  engine: OneOf(['postgres', 'mysql', 'redis'] as const),
  image: Type.String(),
  status: OneOf(['creating', 'running', 'stopped', 'failed'] as const),
  error: Nullable(Type.String({ description: 'why it failed (status failed)' })),
  team_id: Nullable(Type.String()),
  size_bytes: Type.Integer({ description: 'bytes of its data directory, as last measured' }),
  host: Type.String(),
  port: Type.Integer(),
  memory_mb: Nullable(Type.Integer({ description: 'memory limit; null: the installation default' })),
  backup: Type.Optional(Nullable(Type.Object({ schedule: Type.String(), destination_id: Type.String(), keep: Type.Integer(), pitr: Type.Boolean() }))),
  cpus: Nullable(Type.Number({ description: 'CPU limit; null: the installation default' })),
  created_at: Timestamp,
  updated_at: Timestamp,
});

export const CreateDatabaseBody = Type.Object(
  {
    name: Type.String({ maxLength: 100 }),
    engine: Type.String({ maxLength: 20, description: 'postgres, mysql (MariaDB) or redis' }),
    team_id: Type.Optional(Nullable(Type.String({ maxLength: 100 }))),
    memory_mb: Type.Optional(Type.Integer()),
    cpus: Type.Optional(Type.Number()),
  },
  { additionalProperties: false },
);
export type CreateDatabaseBody = Static<typeof CreateDatabaseBody>;

/** A database's backup schedule (decisions §20). */
export const BackupScheduleField = Type.Object(
  {
    schedule: Type.String({ maxLength: 200, description: 'a cron expression, in UTC' }),
    destination_id: Type.String({ maxLength: 100 }),
    keep: Type.Optional(Type.Integer({ description: 'verified backups kept, 1 to 365 (default 7); older ones are deleted from the destination' })),
    pitr: Type.Optional(Type.Boolean({ description: 'point-in-time recovery (PostgreSQL): the write-ahead log streamed to the destination and a base backup each schedule; restore {at, into}' })),
  },
  { additionalProperties: false },
);

export const UpdateDatabaseBody = Type.Object(
  { memory_mb: Type.Optional(Nullable(Type.Integer())), cpus: Type.Optional(Nullable(Type.Number())), backup: Type.Optional(Nullable(BackupScheduleField)) },
  { additionalProperties: false },
);
export type UpdateDatabaseBody = Static<typeof UpdateDatabaseBody>;

export const DeleteDatabaseQuery = Type.Object({
  force: Type.Optional(Type.String({ enum: ['true', 'false', '1', '0'], description: 'accepted for compatibility: a deletion always unlinks the database from its deployments' })),
  delete_backups: Type.Optional(Type.String({ enum: ['true', 'false', '1', '0'], description: 'true: its backups are deleted too (objects and records); default: they are kept' })),
});

export const CredentialsResponse = Type.Object({
  username: Type.String(),
  password: Type.String(),
  database: Type.String(),
  host: Type.String({ description: 'the host name linked apps reach it by (on its private network only)' }),
  port: Type.Integer(),
  url: Type.String(),
});

export const DatabaseMetricsResponse = Type.Object({
  cpu_percent: Type.Number(),
  memory_bytes: Type.Integer(),
  memory_limit_bytes: Type.Integer(),
  network_rx_bytes: Type.Integer(),
  network_tx_bytes: Type.Integer(),
  restarts: Type.Integer(),
  started_at: Timestamp,
});

export const LinkBody = Type.Object(
  {
    database_id: Type.String({ maxLength: 100 }),
    env: Type.Optional(Type.String({ maxLength: 300, description: 'the secret variable that holds the URL (default DATABASE_URL)' })),
  },
  { additionalProperties: false },
);
export type LinkBody = Static<typeof LinkBody>;

export const LinkResponse = Type.Object({
  database_id: Type.String(),
  deployment_id: Type.String(),
  env: Type.String(),
  database_name: Type.String(),
  engine: Type.String(),
  status: Type.String(),
  created_at: Timestamp,
});

export const LinkParams = Type.Object({ id: Type.String(), database_id: Type.String() });
