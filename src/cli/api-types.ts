// Shapes of the API's answers as the CLI reads them: the server's own response schemas (type-only).
import type { Static } from '@sinclair/typebox';
import type {
  ApiKeySchema,
  BuildSchema,
  DeploymentSchema,
  PreviewSchema,
  DomainSchema,
  EnvVarSchema,
  MessageSchema,
  UploadResponse,
  UserSchema,
  DeliverySchema,
  WebhookResponse,
  WebhookSecretResponse,
} from '../api/schemas.js';

export type Deployment = Static<typeof DeploymentSchema>;
export type Build = Static<typeof BuildSchema>;
export type Preview = Static<typeof PreviewSchema>;
export type User = Static<typeof UserSchema>;
export type ApiKey = Static<typeof ApiKeySchema>;
export type UploadAnswer = Static<typeof UploadResponse>;
export type MessageAnswer = Static<typeof MessageSchema>;
export type EnvVar = Static<typeof EnvVarSchema>;
export type CustomDomain = Static<typeof DomainSchema>;
export type WebhookAnswer = Static<typeof WebhookResponse>;
export type WebhookSecretAnswer = Static<typeof WebhookSecretResponse>;
export type WebhookDelivery = Static<typeof DeliverySchema>;

/** `GET`/`PATCH /deployments/{id}/env` (its items are a `$ref` in the schema, so it is spelled out here). */
export interface EnvAnswer {
  vars: EnvVar[];
}

/** `POST /auth/login` (its `user` is a `$ref` in the schema, so it is spelled out here). */
export interface LoginAnswer {
  token: string;
  expires_at: string;
  user: User;
}

/** `GET /api/v1/nodes` items. */
export type Node = Static<typeof import('../api/routes/node-routes.js').NodeSchema>;
