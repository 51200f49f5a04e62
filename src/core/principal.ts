// The authenticated caller of a request (the policy it is checked against is src/domain/policy.ts).

/** Who is calling, and with which credential. */
export interface Principal {
  readonly userId: string;
  readonly isAdmin: boolean;
  /** `webhook`: a verified delivery acting for the deployment's owner (deploy on push only). */
  readonly via: 'session' | 'api_key' | 'webhook';
  /** Set when via is 'session'. */
  readonly sessionId: string | undefined;
  /** Set when via is 'api_key'. */
  readonly apiKeyId: string | undefined;
  /** Set when via is 'api_key': the key's first 12 characters (what the audit log names it by). */
  readonly keyPrefix?: string | undefined;
  /** The address the request came from (what the audit log records). */
  readonly ip?: string | undefined;
  /** The caller's role in each team they belong to (absent: none). */
  readonly teams?: ReadonlyMap<string, TeamRole> | undefined;
}

/** A member's role in a team (decisions §18), from least to most. */
export type TeamRole = 'viewer' | 'developer' | 'owner';

export const TEAM_ROLES: readonly TeamRole[] = ['viewer', 'developer', 'owner'];

