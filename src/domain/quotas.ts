// Per-user quotas: deployments, builds in progress, stored upload bytes, API keys and managed databases; installation defaults, overrides an admin sets, and the 429 when one is reached.
import { DomainError } from '../core/errors.js';
import type { Principal } from '../core/principal.js';
import { authorizeAdmin } from './policy.js';
import { actorOf, type AuditRecord } from './audit.js';
import { assertUuid } from './deployments.js';

export const QUOTA_NAMES = ['deployments', 'concurrent_builds', 'upload_bytes', 'api_keys', 'databases'] as const;
export type QuotaName = (typeof QUOTA_NAMES)[number];
export type Quotas = Readonly<Record<QuotaName, number>>;

/** What each quota counts, for messages. */
const COUNTED: Record<QuotaName, string> = {
  deployments: 'deployments',
  concurrent_builds: 'builds in progress',
  upload_bytes: 'bytes of stored uploads',
  api_keys: 'API keys',
  databases: 'managed databases',
};

/** Where quota overrides and usage live (src/db/quota-store.ts). */
export interface QuotaStore {
  /** Whether the user exists. */
  userExists(userId: string): Promise<boolean>;
  /** The user's overrides (absent: the default applies). */
  overrides(userId: string): Promise<Partial<Record<QuotaName, number>>>;
  /**
   * Sets (a number) or clears (null) overrides; names not in `change` are left as they are. With
   * `audit`, its entry is appended in the same transaction.
   */
  setOverrides(userId: string, change: Partial<Record<QuotaName, number | null>>, audit?: AuditRecord): Promise<void>;
  /**
   * What the user uses now. `exceptDeploymentId`'s builds in progress and stored upload are left
   * out (a deploy cancels the deployment's build in flight; an upload replaces its upload).
   */
  usage(userId: string, exceptDeploymentId?: string): Promise<Record<QuotaName, number>>;
}

/** One quota as shown: its limit, what is used, and whether the limit is the user's own. */
export interface QuotaView {
  readonly limit: number;
  readonly used: number;
  readonly overridden: boolean;
}

/**
 * Applies quotas. Administrators are not limited (they set the limits, their own included); every
 * other user is held to their overrides, else the installation's defaults (SLIPWAY_QUOTA_*).
 */
export class QuotaGuard {
  readonly #store: QuotaStore;
  readonly #defaults: Quotas;

  constructor(store: QuotaStore, defaults: Quotas) {
    this.#store = store;
    this.#defaults = defaults;
  }

  async #limits(userId: string): Promise<{ limits: Quotas; overridden: ReadonlySet<QuotaName> }> {
    const overrides = await this.#store.overrides(userId);
    const limits = { ...this.#defaults, ...overrides };
    return { limits, overridden: new Set(Object.keys(overrides) as QuotaName[]) };
  }

  /**
   * Throws 429 `quota_exceeded` naming the quota when `principal` already uses its whole `name`
   * quota (so one more would pass it).
   */
  async assertRoom(principal: Principal, name: Exclude<QuotaName, 'upload_bytes'>, exceptDeploymentId?: string): Promise<void> {
    if (principal.isAdmin) return;
    const { limits } = await this.#limits(principal.userId);
    const used = (await this.#store.usage(principal.userId, exceptDeploymentId))[name];
    if (used >= limits[name]) throw quotaExceeded(name, used, limits[name]);
  }

  /**
   * Bytes `principal` may still store as `deploymentId`'s upload (its current upload is replaced;
   * `room` is Infinity for an admin). Throws the 429 when there is no room at all.
   */
  async uploadRoom(principal: Principal, deploymentId: string): Promise<{ room: number; used: number; limit: number }> {
    if (principal.isAdmin) return { room: Infinity, used: 0, limit: Infinity };
    const { limits } = await this.#limits(principal.userId);
    const used = (await this.#store.usage(principal.userId, deploymentId)).upload_bytes;
    const room = Math.max(0, limits.upload_bytes - used);
    if (room === 0) throw quotaExceeded('upload_bytes', used, limits.upload_bytes);
    return { room, used, limit: limits.upload_bytes };
  }

  /** Every quota of `userId`: limit, use, and whether it is overridden. */
  async view(userId: string): Promise<Record<QuotaName, QuotaView>> {
    const { limits, overridden } = await this.#limits(userId);
    const usage = await this.#store.usage(userId);
    const view = {} as Record<QuotaName, QuotaView>;
    for (const name of QUOTA_NAMES) view[name] = { limit: limits[name], used: usage[name], overridden: overridden.has(name) };
    return view;
  }

  /** The caller's own quotas. */
  mine(principal: Principal): Promise<Record<QuotaName, QuotaView>> {
    return this.view(principal.userId);
  }

  /** A user's quotas (administrators only; an unknown user → 404). */
  async ofUser(principal: Principal, userId: string): Promise<Record<QuotaName, QuotaView>> {
    authorizeAdmin(principal);
    await this.#existing(userId);
    return this.view(userId);
  }

  /**
   * Sets a user's overrides (administrators only): each named quota to a whole number, or back to
   * the default with null. Nothing changes unless every value is valid.
   */
  async setForUser(principal: Principal, userId: string, change: Readonly<Record<string, unknown>>): Promise<Record<QuotaName, QuotaView>> {
    authorizeAdmin(principal);
    await this.#existing(userId);
    const valid: Partial<Record<QuotaName, number | null>> = {};
    for (const [name, value] of Object.entries(change)) {
      if (!(QUOTA_NAMES as readonly string[]).includes(name)) {
        throw new DomainError('validation_error', `unknown quota "${name}"; quotas are ${QUOTA_NAMES.join(', ')}`);
      }
      if (value !== null && !(typeof value === 'number' && Number.isSafeInteger(value) && value >= 0)) {
        throw new DomainError('validation_error', `quota "${name}" must be a whole number of 0 or more, or null for the default`);
      }
      valid[name as QuotaName] = value;
    }
    if (Object.keys(valid).length === 0) throw new DomainError('validation_error', `name at least one quota: ${QUOTA_NAMES.join(', ')}`);
    await this.#store.setOverrides(userId, valid, { actor: actorOf(principal), event: { action: 'user.quota', targetType: 'user', targetId: userId, teamId: null } });
    return this.view(userId);
  }

  async #existing(userId: string): Promise<void> {
    const notFound = (): DomainError => new DomainError('not_found', 'user not found');
    try {
      assertUuid(userId, 'user');
    } catch {
      throw notFound();
    }
    if (!(await this.#store.userExists(userId))) throw notFound();
  }
}

/** The 429 of a reached quota: the message names it, its use and its limit. */
export function quotaExceeded(name: QuotaName, used: number, limit: number): DomainError {
  return new DomainError(
    'quota_exceeded',
    `quota exceeded: ${name} (${used} of ${limit} ${COUNTED[name]} used); free some up or ask an administrator to raise the quota`,
  );
}
