// Deploy on push: a deployment's webhook secret, the deliveries it receives, and the decision each one gets.
import { deploymentRecord } from './audit.js';
import crypto from 'node:crypto';
import { DomainError } from '../core/errors.js';
import type { Principal } from '../core/principal.js';
import type { DeploymentCatalog } from './deployment-catalog.js';
import type { BuildRow } from './builds.js';
import { assertUuid, getDeploymentRow } from './deployments.js';
import type { DeploymentAction } from './policy.js';
import type { DeploymentOperations } from './operations.js';
import { receivePullRequest, type PreviewEventDeps } from './preview-events.js';
import type { BranchTip, DeliveryAnswer, DeliveryOutcome, DeliveryRecord, HookTarget, WebhookStore } from './webhook-store.js';
import { readPullRequest } from './pull-request-event.js';
import {
  identifyDelivery,
  isDeletion,
  parseDeliveryBody,
  readDelivery,
  signatureProblem,
  type Headers,
} from './webhook-delivery.js';

/** `<public URL>/api/v1/hooks/<deployment id>`. */
export function hookUrl(publicUrl: URL, deploymentId: string): string {
  return `${publicUrl.href.replace(/\/+$/, '')}/api/v1/hooks/${deploymentId}`;
}

export interface WebhookAdminDeps {
  readonly deployments: DeploymentCatalog;
  readonly webhooks: WebhookStore;
  readonly publicUrl: URL;
}

async function ownedGitDeployment(deps: WebhookAdminDeps, principal: Principal, id: string, action: DeploymentAction): Promise<{ id: string; auto_deploy: number; team_id: string | null }> {
  const row = await getDeploymentRow(deps.deployments, principal, id, action);
  if (row.source_type !== 'git') {
    throw new DomainError('validation_error', 'webhooks are for git deployments; an archive deployment is deployed by uploading');
  }
  return row;
}

/** A new webhook secret: 256 bits from the CSPRNG, hex (every provider accepts it as is). */
const newSecret = (): string => `slw_wh_${crypto.randomBytes(32).toString('hex')}`;

/** Creates or rotates a git deployment's webhook secret; the secret is in this answer only. */
export async function setWebhook(deps: WebhookAdminDeps, principal: Principal, id: string): Promise<{ url: string; secret: string }> {
  const dep = await ownedGitDeployment(deps, principal, id, 'change');
  const secret = newSecret();
  await deps.webhooks.setSecret(dep.id, secret, deploymentRecord(principal, dep, 'webhook.rotate'));
  return { url: hookUrl(deps.publicUrl, dep.id), secret };
}

/** Whether a git deployment has a webhook, and where it is (never the secret). */
export async function getWebhook(
  deps: WebhookAdminDeps,
  principal: Principal,
  id: string,
): Promise<{ url: string; configured: boolean; created_at: string | null; auto_deploy: boolean }> {
  const dep = await ownedGitDeployment(deps, principal, id, 'read');
  const createdAt = await deps.webhooks.createdAt(dep.id);
  return { url: hookUrl(deps.publicUrl, dep.id), configured: createdAt !== undefined, created_at: createdAt ?? null, auto_deploy: dep.auto_deploy === 1 };
}

/** The deployment's newest deliveries, newest first (any kind of deployment: an archive one has none). */
export async function listDeliveries(deps: WebhookAdminDeps, principal: Principal, id: string): Promise<DeliveryRecord[]> {
  const dep = await getDeploymentRow(deps.deployments, principal, id, 'read');
  return deps.webhooks.deliveries(dep.id);
}

/** Counts deliveries that fail the signature check (a FailureLimiter); signed ones are never counted. */
export interface SignatureFailures {
  /** Seconds until `key` may be tried again, or 0. */
  retryAfterSeconds(key: string): number;
  recordFailure(key: string): void;
}

/** What a delivery needs: pushes deploy through `operations`; pull requests change previews (PreviewEventDeps). */
export interface ReceiveDeps extends PreviewEventDeps {
  readonly webhooks: WebhookStore;
  readonly operations: DeploymentOperations;
  readonly branchTip: BranchTip;
  readonly signatureFailures: SignatureFailures;
}

/** A delivery as the route hands it over: who it is for, and its raw bytes. */
export interface IncomingDelivery {
  readonly headers: Headers;
  readonly contentType: string | undefined;
  readonly rawBody: Buffer;
}

/**
 * The webhook's target, or the 404 of decisions §10 (unknown deployment, no webhook, not a UUID),
 * one answer for all. Called before the body is read.
 */
export async function findHookTarget(webhooks: WebhookStore, id: string): Promise<HookTarget> {
  // The words of the router's own 404 for an over-long id: every id that names no webhook gets one answer.
  const notFound = (): DomainError => new DomainError('not_found', 'not found');
  try {
    assertUuid(id, 'webhook');
  } catch {
    throw notFound();
  }
  const target = await webhooks.target(id);
  if (target === undefined) throw notFound();
  return target;
}

/**
 * Handles one delivery to `target`'s webhook (decisions §10): checks its signature over the raw
 * bytes, then deploys exactly the pushed commit when it is a push to the tracked branch and
 * auto_deploy is on; everything else is answered 200 and deploys nothing. Every delivery is
 * recorded; a delivery id that deployed within 24 h never deploys again.
 */
export async function receiveDelivery(deps: ReceiveDeps, target: HookTarget, delivery: IncomingDelivery): Promise<DeliveryAnswer> {
  const identity = identifyDelivery(delivery.headers);
  const base = {
    id: crypto.randomUUID(),
    received_at: new Date().toISOString(),
    provider: identity.provider,
    event: identity.event,
    delivery_id: identity.deliveryId,
    ref: null,
    commit_sha: null,
    build_id: null,
  };
  const record = async (outcome: DeliveryOutcome, reason: string, extra: { ref?: string; commit_sha?: string } = {}): Promise<void> => {
    await deps.webhooks.record(target.deploymentId, { ...base, ...extra, outcome, reason });
  };

  const problem = signatureProblem(identity.provider, delivery.headers, delivery.rawBody, target.secret);
  if (problem !== null) {
    // Only failed signatures count toward the limit: a busy repository's signed traffic never crowds out its pushes.
    const key = `hook:${target.deploymentId}`;
    const wait = deps.signatureFailures.retryAfterSeconds(key);
    if (wait > 0) {
      throw new DomainError('rate_limited', 'too many deliveries with a wrong signature to this webhook; try again later', { retryAfterSeconds: wait });
    }
    deps.signatureFailures.recordFailure(key);
    await record('rejected', problem);
    // One answer for every signature failure: the sender learns nothing about which part is wrong.
    throw new DomainError('unauthorized', 'missing or wrong webhook signature');
  }
  let body: unknown;
  try {
    body = parseDeliveryBody(delivery.rawBody, delivery.contentType);
  } catch {
    await record('rejected', 'the body is not valid JSON');
    throw new DomainError('validation_error', 'malformed JSON body');
  }
  // Pull request events change previews (decisions §17).
  const pullRequest = readPullRequest(identity, body);
  if (pullRequest !== undefined) return receivePullRequest(deps, target, base, pullRequest);
  const request = readDelivery(identity, body);
  const ignore = async (reason: string, extra: { ref?: string; commit_sha?: string } = {}): Promise<DeliveryAnswer> => {
    await record('ignored', reason, extra);
    return { status: 200, message: `${reason}; nothing to deploy` };
  };
  switch (request.kind) {
    case 'ping':
      await record('ignored', 'ping');
      return { status: 200, message: `pong: the webhook of ${target.name} is set up` };
    case 'other':
      return ignore(`event "${request.event}" is not a push`);
    case 'malformed':
      await record('rejected', request.problem);
      throw new DomainError('validation_error', request.problem);
    case 'push':
      break;
  }
  const pushed = { ref: request.ref, commit_sha: request.after };
  if (isDeletion(request.after)) return ignore(`${request.ref} was deleted`, pushed);
  if (!request.ref.startsWith('refs/heads/')) return ignore(`${request.ref} is not a branch`, pushed);
  if (!target.autoDeploy) return ignore('auto_deploy is off', pushed);
  // Another branch is answered without asking the remote; otherwise the remote names the branch's tip now.
  if (target.branch !== null && request.ref !== `refs/heads/${target.branch}`) {
    return ignore(`${request.ref} is not the tracked branch ${target.branch}`, pushed);
  }
  let tip: { sha: string | null; branch: string };
  try {
    tip = await deps.branchTip(target.repoUrl ?? '', target.branch ?? undefined);
  } catch (err) {
    const why = err instanceof DomainError ? err.message : 'the repository cannot be reached';
    if (target.branch === null) {
      await record('rejected', `cannot resolve the default branch: ${why}`, pushed);
      throw new DomainError('invalid_state', `cannot resolve the repository's default branch (${why}); set the deployment's branch`);
    }
    await record('rejected', `cannot read branch ${target.branch} from the repository: ${why}`, pushed);
    throw new DomainError('invalid_state', `cannot read branch ${target.branch} from the repository (${why})`);
  }
  const branch = tip.branch;
  if (request.ref !== `refs/heads/${branch}`) return ignore(`${request.ref} is not the tracked branch ${branch}`, pushed);
  const stale = await staleness(deps, target, request.after, tip.sha, branch, identity.deliveryId);
  if (stale !== null) return ignore(stale, pushed);
  return deployPush(deps, target, { ...base, ...pushed }, branch, request.after);
}

/**
 * Why a push of `after` to `branch` must not deploy (decisions §10, 2026-11-25), or null: `after` is
 * no longer (or never was) the branch's tip in the repository, or it is the tip but the webhook
 * already deployed it (a replay of the last push under a new delivery id).
 */
async function staleness(deps: ReceiveDeps, target: HookTarget, after: string, tipSha: string | null, branch: string, deliveryId: string | null): Promise<string | null> {
  const short = after.slice(0, 12);
  if (tipSha === null) return `stale delivery: branch ${branch} no longer exists in the repository`;
  if (tipSha !== after.toLowerCase()) {
    return `stale delivery: ${short} is not the tip of ${branch} in the repository (the tip is ${tipSha.slice(0, 12)}); a late or replayed push`;
  }
  const last = await deps.webhooks.lastDeployed(target.deploymentId);
  if (last === undefined || last.commit_sha?.toLowerCase() !== after.toLowerCase()) return null;
  const build = last.build_id === null ? '' : ` (build ${last.build_id})`;
  if (deliveryId !== null && last.delivery_id === deliveryId) return `delivery ${deliveryId} was already received${build}`;
  return `stale delivery: ${short} of ${branch} was already deployed by delivery ${last.delivery_id ?? 'without an id'}${build}; a replayed push`;
}

/** Claims the delivery id, then deploys the pushed commit through the same path as the API. */
async function deployPush(
  deps: ReceiveDeps,
  target: HookTarget,
  delivery: Omit<DeliveryRecord, 'outcome' | 'reason'>,
  branch: string,
  sha: string,
): Promise<DeliveryAnswer> {
  const dedupKey = delivery.delivery_id ?? undefined;
  const claim = await deps.webhooks.record(target.deploymentId, { ...delivery, outcome: 'deployed', reason: 'deploy starting' }, dedupKey);
  if (claim === 'duplicate' && dedupKey !== undefined) {
    const build = await deps.webhooks.claimedBuild(target.deploymentId, dedupKey);
    const reason = `delivery ${dedupKey} was already received${build === null ? '' : ` (build ${build})`}`;
    await deps.webhooks.record(target.deploymentId, { ...delivery, id: crypto.randomUUID(), outcome: 'ignored', reason, build_id: build });
    return { status: 200, message: `${reason}; not deployed again` };
  }
  // The webhook acts for the deployment's owner: its secret is the owner's credential for this one action.
  // On a team's deployment it acts as a developer of that team (deploy is all it does).
  const teams = target.teamId === undefined || target.teamId === null ? undefined : new Map([[target.teamId, 'developer' as const]]);
  const owner: Principal = { userId: target.userId, isAdmin: false, via: 'webhook', sessionId: undefined, apiKeyId: undefined, teams };
  let build: BuildRow;
  try {
    build = await deps.operations.deploy(owner, target.deploymentId, { wait: false, commit: { sha, branch } });
  } catch (err) {
    const reason = err instanceof DomainError ? err.message : 'the deploy could not start';
    await deps.webhooks.settle(delivery.id, { outcome: 'rejected', reason: `deploy refused: ${reason}`, buildId: null, releaseKey: true });
    throw err;
  }
  await deps.webhooks.settle(delivery.id, { outcome: 'deployed', reason: `deploying ${sha.slice(0, 12)} of ${branch}`, buildId: build.id, releaseKey: false });
  return { status: 202, build };
}
