// Request and response schemas (TypeBox): they validate requests and generate the OpenAPI document.
import { Type, type Static, type TSchema } from '@sinclair/typebox';

const Timestamp = Type.String({ format: 'date-time' });
const Uuid = Type.String({ description: 'UUID' });

// Response fields that may be null, or take one of a few strings, are written the OpenAPI 3.0 way
// (`nullable`, `enum`) rather than as an anyOf: the serializer then writes them directly instead of
// trying each branch of the anyOf on every value (most of the cost of a list answer).
const Nullable = <T extends TSchema>(schema: T) => Type.Unsafe<Static<T> | null>({ ...schema, nullable: true });
const OneOf = <const V extends readonly string[]>(values: V) => Type.Unsafe<V[number]>({ type: 'string', enum: values });

export const ErrorSchema = Type.Object(
  { error: Type.String({ description: 'stable error code' }), message: Type.String() },
  { $id: 'Error', description: 'Every failure' },
);

export const IdParams = Type.Object({ id: Type.String() });
export const BuildParams = Type.Object({ id: Type.String(), build_id: Type.String() });

export const LoginBody = Type.Object(
  {
    email: Type.String({ maxLength: 254 }),
    password: Type.String({ maxLength: 1024 }),
    otp: Type.Optional(Type.String({ maxLength: 32, description: 'the current two-factor code, when two-factor login is on' })),
  },
  { additionalProperties: false },
);
export type LoginBody = Static<typeof LoginBody>;

export const UserSchema = Type.Object({ id: Uuid, email: Type.String(), created_at: Timestamp }, { $id: 'User' });

export const LoginResponse = Type.Object({ token: Type.String(), expires_at: Timestamp, user: Type.Ref('User') });

/** The dashboard's login: the session token goes into an HttpOnly cookie, never to the page's script. */
export const DashboardSessionResponse = Type.Object({
  user: Type.Ref('User'),
  expires_at: Type.Optional(Timestamp),
  csrf_token: Nullable(Type.String({ description: 'send as X-CSRF-Token with every change made with the cookie; null for a bearer caller' })),
});

export const CreateUserBody = Type.Object(
  { email: Type.String({ maxLength: 254 }), password: Type.String({ maxLength: 1024 }) },
  { additionalProperties: false },
);
export type CreateUserBody = Static<typeof CreateUserBody>;

/** A user as an administrator's user list shows it. */
export const AdminUserSchema = Type.Object(
  { id: Uuid, email: Type.String(), created_at: Timestamp, is_admin: Type.Boolean(), disabled: Type.Boolean(), two_factor: Type.Boolean() },
  { $id: 'AdminUser' },
);

export const UpdateUserBody = Type.Object(
  { password: Type.Optional(Type.String({ maxLength: 1024 })), disabled: Type.Optional(Type.Boolean()) },
  { additionalProperties: false },
);
export type UpdateUserBody = Static<typeof UpdateUserBody>;

export const ChangePasswordBody = Type.Object(
  { current_password: Type.String({ maxLength: 1024 }), new_password: Type.String({ maxLength: 1024 }) },
  { additionalProperties: false },
);
export type ChangePasswordBody = Static<typeof ChangePasswordBody>;

export const MessageSchema = Type.Object({ message: Type.String() });

export const ApiKeySchema = Type.Object(
  {
    id: Uuid,
    name: Type.String(),
    key_prefix: Type.String(),
    created_at: Timestamp,
    last_used_at: Nullable(Timestamp),
  },
  { $id: 'ApiKey' },
);
export const CreateApiKeyBody = Type.Object({ name: Type.String({ maxLength: 200 }) }, { additionalProperties: false });
export type CreateApiKeyBody = Static<typeof CreateApiKeyBody>;
export const CreateApiKeyResponse = Type.Object({ api_key: Type.Ref('ApiKey'), key: Type.String({ description: 'shown only once' }) });

const VolumeSchema = Type.Object(
  {
    name: Type.String({ maxLength: 1000, description: 'a DNS label, unique within the deployment' }),
    mount_path: Type.String({ maxLength: 4096, description: 'absolute and normalized, not "/", no ".."' }),
  },
  { additionalProperties: false },
);
const VolumesField = Type.Array(VolumeSchema, {
  maxItems: 1000,
  description: 'named volumes (at most 10) mounted into every release; their data survives deploy, restart, stop and rollback, and is removed with the deployment',
});

const ReplicasField = Type.Integer({
  description: 'copies of the app that serve it, 1 to 20 (default 1); more than 1 with volumes is a validation_error; applies at the next deploy, restart or rollback',
});

const AutoDeployField = Type.Boolean({
  description: 'git deployments: a signed push to the tracked branch deploys the pushed commit (default false; true on an archive deployment is a validation_error)',
});

const PreviewsField = Type.Boolean({
  description:
    'git deployments: a signed pull request event against the tracked branch creates, rebuilds or removes a preview at <subdomain>-pr-<number> (default false; true on an archive deployment is a validation_error)',
});

export const CreateDeploymentBody = Type.Object(
  {
    name: Type.String({ maxLength: 1000 }),
    subdomain: Type.String({ maxLength: 1000 }),
    source_type: Type.Optional(Type.Union([Type.Literal('git'), Type.Literal('archive')], { default: undefined })),
    repo_url: Type.Optional(Type.String({ maxLength: 4096 })),
    branch: Type.Optional(Type.String({ maxLength: 1000 })),
    dockerfile_path: Type.Optional(Type.String({ maxLength: 1000 })),
    compose_path: Type.Optional(Type.String({ maxLength: 1000, description: 'a compose file in the source: the deployment releases its services as one set (exclusive with dockerfile_path)' })),
    health_check_path: Type.Optional(Type.String({ maxLength: 1000, description: 'path that must answer 2xx/3xx before traffic moves' })),
    memory_mb: Type.Optional(
      Type.Integer({ description: 'memory limit in MiB: 16 to SLIPWAY_MAX_MEMORY_MB (default ceiling 2048); default SLIPWAY_DEFAULT_MEMORY_MB (512)' }),
    ),
    cpus: Type.Optional(Type.Number({ description: 'CPU limit: 0.01 to SLIPWAY_MAX_CPUS (default ceiling 2); default SLIPWAY_DEFAULT_CPUS (1)' })),
    volumes: Type.Optional(VolumesField),
    replicas: Type.Optional(ReplicasField),
    auto_deploy: Type.Optional(AutoDeployField),
    previews: Type.Optional(PreviewsField),
    team_id: Type.Optional(Type.String({ maxLength: 100, description: 'the team the deployment belongs to (you must be its owner); absent: yours alone' })),
  },
  { additionalProperties: false },
);
export type CreateDeploymentBody = Static<typeof CreateDeploymentBody>;

export const UpdateDeploymentBody = Type.Object(
  {
    name: Type.Optional(Type.String({ maxLength: 1000 })),
    repo_url: Type.Optional(Type.String({ maxLength: 4096 })),
    branch: Type.Optional(Type.Union([Type.String({ maxLength: 1000 }), Type.Null()], { description: 'null: the remote default branch' })),
    dockerfile_path: Type.Optional(Type.String({ maxLength: 1000, description: 'also switches a compose deployment back to this Dockerfile' })),
    compose_path: Type.Optional(Type.Union([Type.String({ maxLength: 1000 }), Type.Null()], { description: 'a compose file in the source (exclusive with dockerfile_path); null: back to the Dockerfile' })),
    health_check_path: Type.Optional(Type.Union([Type.String({ maxLength: 1000 }), Type.Null()])),
    memory_mb: Type.Optional(
      Type.Union([Type.Integer(), Type.Null()], { description: 'MiB, 16 to SLIPWAY_MAX_MEMORY_MB (default ceiling 2048); null: the default' }),
    ),
    cpus: Type.Optional(Type.Union([Type.Number(), Type.Null()], { description: '0.01 to SLIPWAY_MAX_CPUS (default ceiling 2); null: the default' })),
    volumes: Type.Optional(VolumesField),
    replicas: Type.Optional(ReplicasField),
    auto_deploy: Type.Optional(AutoDeployField),
    previews: Type.Optional(PreviewsField),
  },
  { additionalProperties: false, description: 'Settings take effect at the next deploy or restart.' },
);
export type UpdateDeploymentBody = Static<typeof UpdateDeploymentBody>;

/** Whether a running app keeps crashing; `status` keeps its values (decisions §4). */
export const AppHealthSchema = Type.Object(
  {
    state: OneOf(['ok', 'crash_loop', 'unhealthy']),
    restarts: Type.Integer({ minimum: 0, description: 'restarts after a crash in the current episode' }),
    last_exit_code: Nullable(Type.Integer()),
    last_line: Nullable(Type.String({ description: "the app's last output line before it exited (secrets masked)" })),
    since: Nullable(Timestamp),
  },
  { description: 'crash_loop: the live release exited 3 times or more within minutes of each other; unhealthy: it crashed and was restarted' },
);

export const DeploymentSchema = Type.Object(
  {
    id: Uuid,
    name: Type.String(),
    subdomain: Type.String(),
    status: OneOf(['pending', 'building', 'running', 'stopped', 'failed']),
    source_type: OneOf(['git', 'archive']),
    created_at: Timestamp,
    updated_at: Timestamp,
    repo_url: Type.Optional(Type.String()),
    branch: Type.Optional(Nullable(Type.String())),
    dockerfile_path: Type.Optional(Type.String()),
    compose_path: Type.Optional(Nullable(Type.String())),
    url: Type.Optional(Type.String()),
    live_build_id: Type.Optional(Nullable(Uuid)),
    health_check_path: Type.Optional(Nullable(Type.String())),
    memory_mb: Type.Optional(Nullable(Type.Number())),
    cpus: Type.Optional(Nullable(Type.Number())),
    volumes: Type.Optional(Type.Array(VolumeSchema)),
    replicas: Type.Optional(Type.Integer({ minimum: 1, maximum: 20 })),
    auto_deploy: Type.Optional(Type.Boolean({ description: 'git deployments: whether a signed push to the tracked branch deploys' })),
    previews: Type.Optional(Type.Boolean({ description: 'git deployments: whether pull requests against the tracked branch get previews' })),
    team_id: Type.Optional(Nullable(Uuid)),
    config_pending: Type.Optional(Type.Boolean({ description: 'configuration changed since the live release: it applies at the next deploy, restart or rollback' })),
    config_pending_keys: Type.Optional(Type.Array(Type.String(), { description: 'what changed: variable names, or volumes, memory_mb, cpus, replicas, health_check_path' })),
    uploaded: Type.Optional(Type.Boolean({ description: 'uploaded deployments: whether a source was uploaded (deploy answers 409 until one is)' })),
    health: Type.Optional(AppHealthSchema),
  },
  { $id: 'Deployment' },
);

export const PreviewParams = Type.Object({ id: Type.String(), number: Type.String() });
export const PreviewBuildParams = Type.Object({ id: Type.String(), number: Type.String(), build_id: Type.String() });
export const PreviewSchema = Type.Object(
  {
    id: Uuid,
    deployment_id: Uuid,
    number: Type.Integer({ description: 'the pull (merge) request number' }),
    branch: Nullable(Type.String({ description: "the pull request's head branch" })),
    commit_sha: Nullable(Type.String({ description: 'the head commit the preview shows' })),
    status: OneOf(['pending', 'building', 'running', 'stopped', 'failed']),
    url: Type.String({ description: '<subdomain>-pr-<number>.<SLIPWAY_DOMAIN>' }),
    created_at: Timestamp,
    updated_at: Timestamp,
  },
  { $id: 'Preview' },
);

/** The multipart upload, for the OpenAPI document; the handler reads the parts as streams and enforces it. */
export const UploadBody = Type.Object(
  {
    archive: Type.String({ format: 'binary', description: 'the source as a gzip-compressed tar (required)' }),
    dockerfile: Type.Optional(Type.String({ description: 'Dockerfile content, written at dockerfile_path inside the source' })),
  },
  { additionalProperties: false },
);

export const UploadResponse = Type.Object({
  status: Type.Literal('uploaded'),
  size: Type.Integer({ description: 'archive length in bytes' }),
});

export const BuildSchema = Type.Object(
  {
    id: Uuid,
    deployment_id: Uuid,
    status: OneOf(['building', 'succeeded', 'failed', 'cancelled']),
    commit_sha: Type.String(),
    started_at: Timestamp,
    finished_at: Nullable(Timestamp),
    error: Nullable(Type.String()),
  },
  { $id: 'Build' },
);

// Query strings are text and nothing is type-coerced (a body's 12345678 must not pass as a string), so
// query parameters are validated as the strings they are and converted by the routes.
const queryFlag = (description: string) =>
  Type.Optional(Type.Union([Type.Literal('true'), Type.Literal('false'), Type.Literal('1'), Type.Literal('0')], { description }));

/** Whether a query flag (`true`/`false`/`1`/`0`, validated by the schema) is set. */
export const isFlagSet = (value: string | undefined): boolean => value === 'true' || value === '1';

/** Most lines `tail` returns. */
export const MAX_TAIL_LINES = 100_000;

export const DeployQuery = Type.Object(
  { wait: queryFlag('true: hold the response until the build ends') },
  { additionalProperties: false },
);
export type DeployQuery = Static<typeof DeployQuery>;
export const FollowQuery = Type.Object(
  { follow: queryFlag('true: stream until the build ends') },
  { additionalProperties: false },
);
export type FollowQuery = Static<typeof FollowQuery>;
export const RuntimeLogsQuery = Type.Object(
  {
    follow: queryFlag('true: stream new output'),
    tail: Type.Optional(Type.String({ pattern: '^[0-9]{1,6}$', description: `the last N lines (at most ${MAX_TAIL_LINES})` })),
    service: Type.Optional(Type.String({ maxLength: 100, description: "a compose deployment: that service's lines only (each line is prefixed [service])" })),
  },
  { additionalProperties: false },
);
export type RuntimeLogsQuery = Static<typeof RuntimeLogsQuery>;
export const RollbackBody = Type.Object({ build_id: Type.String() }, { additionalProperties: false });
export type RollbackBody = Static<typeof RollbackBody>;

export const TunnelSchema = Type.Object(
  {
    id: Type.String(),
    subdomain: Type.String(),
    url: Type.String(),
    api_key_id: Type.String(),
    connected_at: Timestamp,
    state: Type.String(),
    streams: Type.Integer(),
    /** With `?all=true` (administrators): whose tunnel it is. */
    user_id: Type.Optional(Type.String()),
    owner_email: Type.Optional(Type.String()),
  },
  { $id: 'Tunnel' },
);

/** The 200 answer of the log endpoints: plain text, streamed (a stream is sent as is, never serialized). */
export const TextResponse = {
  description: 'plain text (UTF-8)',
  content: { 'text/plain': { schema: Type.String() } },
};

export const HealthResponse = Type.Object({
  status: Type.Union([Type.Literal('ok'), Type.Literal('unavailable')]),
  checks: Type.Record(Type.String(), Type.Object({ ok: Type.Boolean(), detail: Type.Optional(Type.String()) })),
});

export const EnvVarSchema = Type.Object(
  {
    key: Type.String(),
    value: Type.Union([Type.String(), Type.Null()], { description: "null for a secret: a secret's value is never shown" }),
    secret: Type.Boolean(),
    updated_at: Timestamp,
  },
  { $id: 'EnvVar' },
);
export const EnvResponse = Type.Object(
  { vars: Type.Array(Type.Ref('EnvVar'), { description: 'sorted by key' }) },
  { description: 'The variables containers get at the next deploy, restart or rollback (beside PORT).' },
);
export const PatchEnvBody = Type.Object(
  {
    vars: Type.Record(Type.String(), Type.Union([Type.String(), Type.Null()]), {
      description:
        'KEY: value to set, or null to remove. Keys match ^[A-Za-z_][A-Za-z0-9_]*$ (at most 256 characters; PORT and SLIPWAY_* are reserved, except SLIPWAY_STACK: a plain variable naming node, python, go or static, which picks the stack of a build without a Dockerfile); ' +
        'a value is at most 32 KiB without NUL; at most 500 variables and 256 KiB per deployment.',
    }),
    secret: Type.Optional(Type.Boolean({ description: 'the secret flag of every key set (default false); secrets are write-only' })),
  },
  { additionalProperties: false },
);
export type PatchEnvBody = Static<typeof PatchEnvBody>;

export const WebhookSecretResponse = Type.Object({
  url: Type.String({ description: '<public URL>/api/v1/hooks/<deployment id>: the payload URL to give the git host' }),
  secret: Type.String({ description: 'the shared secret, shown only in this answer (calling again rotates it)' }),
});
export const WebhookResponse = Type.Object({
  url: Type.String(),
  configured: Type.Boolean({ description: 'whether a secret is set (it is never shown again)' }),
  created_at: Nullable(Timestamp),
  auto_deploy: Type.Boolean(),
});
export const DeliverySchema = Type.Object(
  {
    id: Uuid,
    received_at: Timestamp,
    provider: OneOf(['github', 'gitea', 'gitlab']),
    event: Nullable(Type.String()),
    delivery_id: Nullable(Type.String({ description: "the sender's delivery id" })),
    ref: Nullable(Type.String()),
    commit_sha: Nullable(Type.String()),
    outcome: OneOf(['deployed', 'removed', 'ignored', 'rejected']),
    build_id: Nullable(Uuid),
    reason: Type.String({ description: 'why the delivery did or did not deploy' }),
  },
  { $id: 'WebhookDelivery' },
);

export const DomainParams = Type.Object({ id: Type.String(), domain_id: Type.String() });
export const AddDomainBody = Type.Object(
  {
    hostname: Type.String({
      maxLength: 1024,
      description:
        'A DNS name of at least two labels (at most 253 characters as an A-label), not an IP address, neither SLIPWAY_DOMAIN nor under it; ' +
        'folded to lower case, an internationalized name stored as its A-label (punycode).',
    }),
  },
  { additionalProperties: false },
);
export type AddDomainBody = Static<typeof AddDomainBody>;
export const DomainSchema = Type.Object(
  {
    id: Uuid,
    deployment_id: Uuid,
    hostname: Type.String({ description: 'lower case A-label' }),
    created_at: Timestamp,
    tls_status: OneOf(['none', 'pending', 'active', 'failed']),
    tls_error: Nullable(Type.String({ description: 'why the last attempt to obtain a certificate failed' })),
    certificate_expires_at: Nullable(Timestamp),
  },
  { $id: 'Domain', description: 'A hostname that reaches the deployment exactly as its subdomain does; tls_status is none while HTTPS is off.' },
);

/** Shared schemas registered once, referenced by `$ref`. */
export const SHARED_SCHEMAS = [ErrorSchema, UserSchema, ApiKeySchema, DeploymentSchema, PreviewSchema, BuildSchema, TunnelSchema, EnvVarSchema, DomainSchema, DeliverySchema, AdminUserSchema];

/** Standard error responses for the OpenAPI document. */
export function errorResponses(...statuses: number[]): Record<number, unknown> {
  return Object.fromEntries(statuses.map((s) => [s, Type.Ref('Error')]));
}
