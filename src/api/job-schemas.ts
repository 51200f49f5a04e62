// Request and response schemas of scheduled jobs (decisions §22): they validate requests and document them in OpenAPI.
import { Type, type Static, type TSchema } from '@sinclair/typebox';

const Timestamp = Type.String({ format: 'date-time' });
const Nullable = <T extends TSchema>(schema: T) => Type.Unsafe<Static<T> | null>({ ...schema, nullable: true });
const OneOf = <const V extends readonly string[]>(values: V) => Type.Unsafe<V[number]>({ type: 'string', enum: values });

export const JobParams = Type.Object({ id: Type.String(), job_id: Type.String() });
export const RunParams = Type.Object({ id: Type.String(), job_id: Type.String(), run_id: Type.String() });

export const JobResponse = Type.Object({
  id: Type.String(),
  deployment_id: Type.String(),
  name: Type.String(),
  schedule: Type.String({ description: 'a cron expression (5 fields, or 6 with seconds first) or @hourly, @daily, @weekly, @monthly' }),
  command: Type.Array(Type.String(), { description: "the argv run in the live release's image (its entrypoint kept)" }),
  timezone: Type.String({ description: 'the IANA time zone the schedule is read in' }),
  timeout_seconds: Type.Integer(),
  concurrency: OneOf(['forbid', 'allow'] as const),
  service: Nullable(Type.String({ description: 'compose: the service whose image it runs in (null: the web service)' })),
  next_run_at: Nullable(Timestamp),
  created_at: Timestamp,
  updated_at: Timestamp,
});

export const RunResponse = Type.Object({
  id: Type.String(),
  job_id: Type.String(),
  status: OneOf(['running', 'succeeded', 'failed', 'timed_out', 'skipped'] as const),
  trigger: OneOf(['schedule', 'manual'] as const),
  due_at: Nullable(Timestamp),
  exit_code: Nullable(Type.Integer()),
  message: Nullable(Type.String({ description: 'why it was skipped, timed out or failed without an exit code' })),
  started_at: Timestamp,
  finished_at: Nullable(Timestamp),
});

// Values are checked by the use-cases (each 400 names its field); the schema checks shapes only.
const fields = {
  // Up to 100 characters once trimmed (the use-case's rule): the schema leaves room for the spaces around them.
  name: Type.String({ maxLength: 200, description: 'any text of 1–100 characters after trimming, without control characters; unique in the deployment' }),
  schedule: Type.String({ maxLength: 200 }),
  command: Type.Array(Type.String({ maxLength: 4096 }), { maxItems: 100, description: 'an argv array, never a shell string' }),
  timezone: Type.String({ maxLength: 64 }),
  timeout_seconds: Type.Integer({ description: '1–86400, default 3600' }),
  concurrency: Type.String({ maxLength: 10, description: 'forbid (default) or allow' }),
  service: Nullable(Type.String({ maxLength: 100, description: "compose: the service whose image the job runs in (default: the web service's)" })),
};

export const CreateJobBody = Type.Object(
  { name: fields.name, schedule: fields.schedule, command: Type.Unknown({ description: fields.command.description }), timezone: Type.Optional(fields.timezone), timeout_seconds: Type.Optional(fields.timeout_seconds), concurrency: Type.Optional(fields.concurrency), service: Type.Optional(fields.service) },
  { additionalProperties: false },
);
export type CreateJobBody = Static<typeof CreateJobBody>;

export const UpdateJobBody = Type.Object(
  {
    name: Type.Optional(fields.name),
    schedule: Type.Optional(fields.schedule),
    command: Type.Optional(Type.Unknown({ description: fields.command.description })),
    timezone: Type.Optional(fields.timezone),
    timeout_seconds: Type.Optional(fields.timeout_seconds),
    concurrency: Type.Optional(fields.concurrency),
    service: Type.Optional(fields.service),
  },
  { additionalProperties: false },
);
export type UpdateJobBody = Static<typeof UpdateJobBody>;
