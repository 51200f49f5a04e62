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
}

