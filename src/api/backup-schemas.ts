// Request and response schemas of backups (decisions §20): destinations, backup records, restores.
import { Type, type Static, type TSchema } from '@sinclair/typebox';

const Timestamp = Type.String({ format: 'date-time' });
const Nullable = <T extends TSchema>(schema: T) => Type.Unsafe<Static<T> | null>({ ...schema, nullable: true });
const OneOf = <const V extends readonly string[]>(values: V) => Type.Unsafe<V[number]>({ type: 'string', enum: values });

export const DestinationResponse = Type.Object({
  id: Type.String(),
  name: Type.String(),
  type: OneOf(['s3', 'local'] as const),
  team_id: Nullable(Type.String()),
  endpoint: Type.Optional(Type.String()),
  region: Type.Optional(Type.String()),
  bucket: Type.Optional(Type.String()),
  prefix: Type.Optional(Type.String()),
  access_key_id: Type.Optional(Type.String()),
  force_path_style: Type.Optional(Type.Boolean()),
  created_at: Timestamp,
  updated_at: Timestamp,
});

// Up to 100 characters once trimmed (the use-case's rule): the schema leaves room for the spaces around them.
const DestinationName = Type.String({ maxLength: 200, description: 'any text of 1–100 characters after trimming, case kept, without control characters; unique per owner' });

const destinationFields = {
  name: Type.Optional(DestinationName),
  endpoint: Type.Optional(Type.String({ maxLength: 1024 })),
  region: Type.Optional(Type.String({ maxLength: 64 })),
  bucket: Type.Optional(Type.String({ maxLength: 63 })),
  prefix: Type.Optional(Type.String({ maxLength: 512 })),
  access_key_id: Type.Optional(Type.String({ maxLength: 256 })),
  secret_access_key: Type.Optional(Type.String({ maxLength: 256, description: 'stored encrypted, never shown again' })),
  force_path_style: Type.Optional(Type.Boolean({ description: 'path-style addressing (most S3-compatible servers); default false: virtual-host' })),
};

export const CreateDestinationBody = Type.Object(
  { ...destinationFields, name: DestinationName, type: Type.String({ maxLength: 10, description: 's3 or local' }), team_id: Type.Optional(Nullable(Type.String({ maxLength: 100 }))) },
  { additionalProperties: false },
);
export type CreateDestinationBody = Static<typeof CreateDestinationBody>;

export const UpdateDestinationBody = Type.Object({ ...destinationFields, type: Type.Optional(Type.String({ maxLength: 10 })) }, { additionalProperties: false });
export type UpdateDestinationBody = Static<typeof UpdateDestinationBody>;

export const DestinationTestResponse = Type.Object({
  ok: Type.Boolean(),
  step: Type.Optional(OneOf(['resolve', 'auth', 'write', 'read', 'delete'] as const)),
  message: Type.Optional(Type.String()),
});

export const BackupResponse = Type.Object({
  id: Type.String(),
  database_id: Type.String(),
  destination_id: Type.String(),
  status: OneOf(['running', 'succeeded', 'verified', 'failed'] as const),
  trigger: OneOf(['manual', 'schedule', 'safety'] as const),
  size_bytes: Nullable(Type.Integer({ description: 'bytes of the stored (encrypted) object' })),
  sha256: Nullable(Type.String({ description: 'SHA-256 of the stored (encrypted) object, hex' })),
  location: Type.String({ description: "the object's key in the destination" }),
  started_at: Timestamp,
  finished_at: Nullable(Timestamp),
  verified_at: Nullable(Timestamp),
  error: Nullable(Type.String({ description: 'the failed step and its message (status failed)' })),
});

export const StartBackupBody = Type.Object(
  { destination_id: Type.Optional(Type.String({ maxLength: 100, description: "default: the schedule's destination" })) },
  { additionalProperties: false },
);
export type StartBackupBody = Static<typeof StartBackupBody>;

export const BackupParams = Type.Object({ id: Type.String(), backup_id: Type.String() });

export const RestoreBody = Type.Object(
  {
    backup_id: Type.Optional(Type.String({ maxLength: 100 })),
    into: Type.Optional(Type.String({ maxLength: 100, description: 'a new database of this name gets the data; absent: the data is replaced in place (a safety backup first)' })),
    at: Type.Optional(Type.String({ maxLength: 40, description: 'point-in-time recovery (PostgreSQL with pitr): an ISO 8601 time inside the recoverable window; needs into, not backup_id' })),
  },
  { additionalProperties: false },
);
export type RestoreBody = Static<typeof RestoreBody>;

export const RestoreResponse = Type.Object({
  id: Type.String(),
  database_id: Type.String(),
  backup_id: Type.String({ description: 'the backup restored (point in time: the base backup recovered from)' }),
  target_database_id: Type.String({ description: 'the database whose data is replaced (in place: database_id), or the new one' }),
  safety_backup_id: Nullable(Type.String({ description: 'the backup of the data replaced (in place)' })),
  status: OneOf(['running', 'succeeded', 'failed'] as const),
  error: Nullable(Type.String()),
  started_at: Timestamp,
  finished_at: Nullable(Timestamp),
});

/** A database's point-in-time recovery: whether it is on and the window a restore {at, into} may name. */
export const RecoveryWindowResponse = Type.Object({
  pitr: Type.Boolean(),
  from: Nullable(Type.String({ description: 'the end of the oldest kept base backup (null while there is no window)' })),
  until: Nullable(Type.String({ description: 'every write committed before this time is in the destination' })),
  base_backups: Type.Integer(),
  error: Nullable(Type.String({ description: "the archiver's last error, if its last round failed" })),
});
