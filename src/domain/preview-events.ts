// Pull request deliveries (decisions §17): a verified event creates, rebuilds or removes a deployment's preview, and the delivery log says what it did.
import { deploymentRecord } from './audit.js';
import crypto from 'node:crypto';
import { DomainError } from '../core/errors.js';
import type { Principal } from '../core/principal.js';
import type { AppConfigStore } from './app-config.js';
import type { BuildRow } from './builds.js';
import type { DeploymentCatalog } from './deployment-catalog.js';
import type { DeploymentRow } from './deployments.js';
import type { DeploymentOperations } from './operations.js';
import { MAX_PREVIEWS, previewSubdomain, type PreviewCatalog } from './previews.js';
import type { PullRequestEvent } from './pull-request-event.js';
import type { BranchTip, DeliveryAnswer, DeliveryOutcome, DeliveryRecord, HookTarget, WebhookStore } from './webhook-store.js';

export interface PreviewEventDeps {
  readonly webhooks: WebhookStore;
  readonly operations: DeploymentOperations;
  readonly deployments: DeploymentCatalog;
  readonly previews: PreviewCatalog;
  readonly configs: AppConfigStore;
  /** The remote's default branch (git ls-remote), for a deployment that names no branch. */
  readonly branchTip: BranchTip;
}

type Delivery = Omit<DeliveryRecord, 'outcome' | 'reason'>;
type Event = Extract<PullRequestEvent, { kind: 'pull_request' }>;

/**
 * Handles a verified pull request delivery to `target`'s webhook. An event for a request against
 * the tracked branch, with previews on, builds the head commit (fetched at the forge's pull ref) as
 * the preview of that number, created on first sight; closing or merging removes the preview.
 * Everything else answers 200 with why and builds nothing. The delivery id is claimed before
 * anything is done, so a repeat does nothing again.
 */
export async function receivePullRequest(deps: PreviewEventDeps, target: HookTarget, base: Delivery, event: PullRequestEvent): Promise<DeliveryAnswer> {
  const record = async (delivery: Delivery, outcome: DeliveryOutcome, reason: string): Promise<void> => {
    await deps.webhooks.record(target.deploymentId, { ...delivery, outcome, reason });
  };
  if (event.kind === 'pull_request_malformed') {
    await record(base, 'rejected', event.problem);
    throw new DomainError('validation_error', event.problem);
  }
  if (event.kind === 'pull_request_other') {
    const what = `pull request action "${event.forgeAction}"${event.number === null ? '' : ` (#${event.number})`} is not one that changes a preview`;
    await record(base, 'ignored', what);
    return { status: 200, message: `${what}; nothing to do` };
  }
  const delivery: Delivery = { ...base, ref: event.pullRef, commit_sha: event.headSha };
  const ignore = async (reason: string): Promise<DeliveryAnswer> => {
    await record(delivery, 'ignored', reason);
    return { status: 200, message: `${reason}; nothing built` };
  };

  let branch = target.branch;
  if (branch === null) {
    try {
      branch = (await deps.branchTip(target.repoUrl ?? '', undefined)).branch;
    } catch (err) {
      const why = err instanceof DomainError ? err.message : 'the repository cannot be reached';
      await record(delivery, 'rejected', `cannot resolve the default branch: ${why}`);
      throw new DomainError('invalid_state', `cannot resolve the repository's default branch (${why}); set the deployment's branch`);
    }
  }
  if (event.baseBranch !== branch) return ignore(`pull request #${event.number} targets ${event.baseBranch}, not the tracked branch ${branch}`);
  // A close always removes what is there (previews turned off since included); anything else needs previews on.
  if (event.action !== 'close' && !target.previews) return ignore(`previews are off for ${target.name}`);

  // The delivery id is claimed first: a repeat finds it taken and does nothing again.
  const dedupKey = delivery.delivery_id ?? undefined;
  const claim = await deps.webhooks.record(target.deploymentId, { ...delivery, outcome: 'ignored', reason: 'handling the pull request event' }, dedupKey);
  if (claim === 'duplicate' && dedupKey !== undefined) {
    const build = await deps.webhooks.claimedBuild(target.deploymentId, dedupKey);
    const reason = `delivery ${dedupKey} was already received${build === null ? '' : ` (build ${build})`}`;
    await deps.webhooks.record(target.deploymentId, { ...delivery, id: crypto.randomUUID(), outcome: 'ignored', reason, build_id: build });
    return { status: 200, message: `${reason}; not done again` };
  }
  const settle = async (outcome: DeliveryOutcome, reason: string, buildId: string | null = null): Promise<void> => {
    await deps.webhooks.settle(delivery.id, { outcome, reason, buildId, releaseKey: false });
  };
  // The webhook acts for the deployment's owner: its secret is the owner's credential for these actions.
  // On a team's deployment the webhook acts as a developer of that team (its previews are the team's too).
  const teams = target.teamId === undefined || target.teamId === null ? undefined : new Map([[target.teamId, 'developer' as const]]);
  const owner: Principal = { userId: target.userId, isAdmin: false, via: 'webhook', sessionId: undefined, apiKeyId: undefined, teams };
  try {
    if (event.action === 'close') return await closePreview(deps, target, event, owner, settle);
    return await buildPreview(deps, target, event, owner, settle);
  } catch (err) {
    const reason = err instanceof DomainError ? err.message : 'the preview could not be changed';
    await deps.webhooks.settle(delivery.id, { outcome: 'rejected', reason: `refused: ${reason}`, buildId: null, releaseKey: true });
    throw err;
  }
}

type Settle = (outcome: DeliveryOutcome, reason: string, buildId?: string | null) => Promise<void>;

async function closePreview(deps: PreviewEventDeps, target: HookTarget, event: Event, owner: Principal, settle: Settle): Promise<DeliveryAnswer> {
  const preview = await deps.previews.find(target.deploymentId, event.number);
  const how = event.merged ? 'merged' : 'closed';
  if (preview === undefined) {
    await settle('ignored', `pull request #${event.number} ${how}; it had no preview`);
    return { status: 200, message: `pull request #${event.number} ${how}; it had no preview to remove` };
  }
  // Removing a preview is a developer's change (decisions §18), as the webhook acts on a team's deployment.
  await deps.operations.remove(owner, preview.id, { action: 'change' });
  await settle('removed', `pull request #${event.number} ${how}: preview ${preview.subdomain} removed`);
  return { status: 200, message: `pull request #${event.number} ${how}: its preview was removed` };
}

async function buildPreview(deps: PreviewEventDeps, target: HookTarget, event: Event, owner: Principal, settle: Settle): Promise<DeliveryAnswer> {
  const refuse = async (reason: string): Promise<DeliveryAnswer> => {
    await settle('ignored', reason);
    return { status: 200, message: `${reason}; nothing built` };
  };
  const parent = await deps.deployments.deployment(target.deploymentId);
  if (parent === undefined) throw new DomainError('not_found', 'the deployment is gone');
  let preview = await deps.previews.find(parent.id, event.number);
  if (preview !== undefined && preview.pr_head_sha === event.headSha && (preview.status === 'building' || preview.status === 'running')) {
    return refuse(`the preview of pull request #${event.number} already shows ${event.headSha.slice(0, 12)}`);
  }
  if (preview === undefined) {
    const name = previewSubdomain(parent.subdomain, event.number);
    if ('problem' in name) return refuse(name.problem);
    const row = newPreviewRow(parent, event, name.subdomain);
    // Recorded as the webhook's action for the deployment's owner, in the preview's own transaction.
    const created = await deps.previews.create(row, MAX_PREVIEWS, deploymentRecord(owner, row, 'preview.create'));
    if (created === 'limit') return refuse(`${parent.name} already has ${MAX_PREVIEWS} previews, the most it may have; pull request #${event.number} gets none until one closes`);
    if (created === 'subdomain_taken') return refuse(`the subdomain ${name.subdomain} is already in use, so pull request #${event.number} gets no preview`);
    if (created === 'gone') throw new DomainError('not_found', 'the deployment is gone');
    preview = await deps.previews.find(parent.id, event.number);
    if (preview === undefined) throw new DomainError('not_found', 'the preview is gone');
    if (created === 'created') deps.operations.registered(preview);
  }
  const head = { branch: event.headBranch, sha: event.headSha, headRepo: event.headRepo, sameRepo: event.sameRepo };
  await deps.previews.update(preview.id, head, parent);
  // Non-secret variables always; secrets only when the head repository is the deployment's own (never a fork's).
  const vars = (await deps.configs.current(parent.id)).filter((v) => event.sameRepo || !v.secret);
  await deps.configs.replace(preview.id, vars);
  const build: BuildRow = await deps.operations.deploy(owner, preview.id, { wait: false, commit: { sha: event.headSha, branch: event.pullRef } });
  const secrets = event.sameRepo ? '' : ' (from a fork: without secrets)';
  await settle('deployed', `building preview ${preview.subdomain} of pull request #${event.number} at ${event.headSha.slice(0, 12)}${secrets}`, build.id);
  return { status: 202, build };
}

/** A new preview of `parent` for `event`: its settings, one replica, no volumes, never deployed on push. */
function newPreviewRow(parent: DeploymentRow, event: Event, subdomain: string): Omit<DeploymentRow, 'seq' | 'config_pending'> {
  const now = new Date().toISOString();
  const suffix = ` #${event.number}`;
  return {
    id: crypto.randomUUID(),
    user_id: parent.user_id,
    team_id: parent.team_id,
    name: `${parent.name.slice(0, 100 - suffix.length)}${suffix}`,
    subdomain,
    source_type: 'git',
    repo_url: parent.repo_url,
    branch: event.headBranch,
    dockerfile_path: parent.dockerfile_path,
    compose_path: parent.compose_path ?? null,
    status: 'pending',
    upload_id: null,
    upload_size: null,
    upload_sha256: null,
    live_build_id: null,
    health_check_path: parent.health_check_path,
    memory_bytes: parent.memory_bytes,
    nano_cpus: parent.nano_cpus,
    volumes: '[]',
    replicas: 1,
    auto_deploy: 0,
    previews: 0,
    parent_id: parent.id,
    pr_number: event.number,
    pr_head_sha: event.headSha,
    pr_head_repo: event.headRepo,
    pr_same_repo: event.sameRepo ? 1 : 0,
    created_at: now,
    updated_at: now,
  };
}
