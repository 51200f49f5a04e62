// Request and response schemas of notification channels (decisions §23): they validate requests and document them in OpenAPI.
import { Type, type Static, type TSchema } from '@sinclair/typebox';
import { PageQuery } from './list-pages.js';

const Timestamp = Type.String({ format: 'date-time' });
const Nullable = <T extends TSchema>(schema: T) => Type.Unsafe<Static<T> | null>({ ...schema, nullable: true });
const EventList = Type.Array(Type.String({ maxLength: 40 }), { maxItems: 20, description: 'deploy.succeeded, deploy.failed, app.crashed, backup.failed, backup.verified, job.failed, certificate.failed, node.down' });

export const ChannelResponse = Type.Object({
  id: Type.String(),
  name: Type.String(),
  type: Type.String({ description: 'slack, discord, webhook or email' }),
  url: Nullable(Type.String({ description: 'its origin only (the URL is a credential, stored encrypted)' })),
  email: Nullable(Type.String()),
  events: Type.Array(Type.String()),
  team_id: Nullable(Type.String()),
  created_at: Timestamp,
  updated_at: Timestamp,
  secret: Type.Optional(Type.String({ description: 'the webhook signing secret: in the answer of its creation or rotation only' })),
});

export const CreateChannelBody = Type.Object(
  {
    name: Type.String({ maxLength: 200 }),
    type: Type.String({ maxLength: 20, description: 'slack, discord, webhook or email' }),
    url: Type.Optional(Type.String({ maxLength: 4096 })),
    email: Type.Optional(Type.String({ maxLength: 320 })),
    events: EventList,
    team_id: Type.Optional(Nullable(Type.String({ maxLength: 100 }))),
  },
  { additionalProperties: false },
);
export type CreateChannelBody = Static<typeof CreateChannelBody>;

export const UpdateChannelBody = Type.Object(
  {
    name: Type.Optional(Type.String({ maxLength: 200 })),
    url: Type.Optional(Type.String({ maxLength: 4096 })),
    email: Type.Optional(Type.String({ maxLength: 320 })),
    events: Type.Optional(EventList),
    rotate_secret: Type.Optional(Type.Boolean()),
  },
  { additionalProperties: false },
);
export type UpdateChannelBody = Static<typeof UpdateChannelBody>;

export const ChannelListQuery = Type.Object({ team_id: Type.Optional(Type.String({ maxLength: 100 })), ...PageQuery.properties }, { additionalProperties: false });
export type ChannelListQuery = Static<typeof ChannelListQuery>;

export const TestResponse = Type.Object({ ok: Type.Boolean(), status_code: Type.Optional(Type.Integer()), error: Type.Optional(Type.String()) });

export const DeliveryResponse = Type.Object({
  id: Type.String({ description: 'the message; its retries keep it' }),
  event: Type.String(),
  at: Timestamp,
  outcome: Type.String({ description: 'pending (being sent or retried), delivered or failed' }),
  attempts: Type.Integer(),
  status_code: Nullable(Type.Integer()),
  error: Nullable(Type.String()),
});
