// Pull request deliveries from GitHub, Gitea/Forgejo and GitLab: what a verified one asks of a deployment's previews.
import type { DeliveryIdentity } from './webhook-delivery.js';

/** What a pull request event asks for: a preview shown (opened), rebuilt (new head), or removed (closed or merged). */
export type PullRequestAction = 'open' | 'sync' | 'close';

/** A verified pull request event, read. */
export type PullRequestEvent =
  | {
      readonly kind: 'pull_request';
      readonly action: PullRequestAction;
      /** The forge's own word for the action (`synchronize`, `update`, `merge`…), for the delivery log. */
      readonly forgeAction: string;
      readonly number: number;
      /** The ref the forge keeps the head at in the base repository: `refs/pull/<n>/head` or `refs/merge-requests/<n>/head`. */
      readonly pullRef: string;
      readonly headSha: string;
      /** The head branch's name (in the head repository, which may be a fork). */
      readonly headBranch: string | null;
      /** The branch the request targets. */
      readonly baseBranch: string;
      /** The head repository as the forge names it (`owner/name`, or a GitLab project), for the record. */
      readonly headRepo: string | null;
      /** Whether the head repository is the base repository (the deployment's own), not a fork. */
      readonly sameRepo: boolean;
      readonly merged: boolean;
    }
  | { readonly kind: 'pull_request_other'; readonly number: number | null; readonly forgeAction: string }
  | { readonly kind: 'pull_request_malformed'; readonly problem: string };

const SHA = /^[0-9a-f]{40}$/;

const ACTIONS: Readonly<Record<string, PullRequestAction>> = {
  // GitHub, Gitea and Forgejo.
  opened: 'open',
  reopened: 'open',
  synchronize: 'sync',
  synchronized: 'sync',
  closed: 'close',
  // GitLab (object_attributes.action).
  open: 'open',
  reopen: 'open',
  update: 'sync',
  close: 'close',
  merge: 'close',
};

type Json = Record<string, unknown>;
const object = (value: unknown): Json | undefined => (typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Json) : undefined);
const text = (value: unknown, max = 255): string | null => (typeof value === 'string' && value !== '' && value.length <= max ? value.replace(/[^\x20-\x7e]/g, '?') : null);
const id = (value: unknown): string | null => (typeof value === 'number' && Number.isInteger(value) ? String(value) : typeof value === 'string' && value !== '' ? value : null);
const prNumber = (value: unknown): number | null => (typeof value === 'number' && Number.isInteger(value) && value > 0 && value < 1e9 ? value : null);

/** Two repositories named by ids and names: the same when their ids agree, or (ids missing) their names do. */
function sameRepository(head: { id: string | null; name: string | null }, base: { id: string | null; name: string | null }): boolean {
  if (head.id !== null && base.id !== null) return head.id === base.id;
  if (head.name !== null && base.name !== null) return head.name.toLowerCase() === base.name.toLowerCase();
  // Nothing says the head is the deployment's own: treat it as a fork (no secrets).
  return false;
}

/**
 * Reads a verified delivery as a pull request event: GitHub and Gitea/Forgejo `pull_request`
 * (`action`, `number`, `pull_request.head/base`), GitLab `Merge Request Hook`
 * (`object_attributes`). Returns undefined for any other event (a push, a ping…).
 */
export function readPullRequest(identity: DeliveryIdentity, body: unknown): PullRequestEvent | undefined {
  const event = identity.event ?? '';
  if (identity.provider === 'gitlab') {
    if (event !== 'Merge Request Hook') return undefined;
    return readGitlab(body);
  }
  // Gitea names its event `pull_request` (and some versions the type, `pull_request_sync`).
  if (event !== 'pull_request' && event !== 'pull_request_sync') return undefined;
  return readGithubLike(body);
}

function readGithubLike(body: unknown): PullRequestEvent {
  const root = object(body);
  if (root === undefined) return { kind: 'pull_request_malformed', problem: 'a pull request delivery must be a JSON object' };
  const pr = object(root['pull_request']);
  const number = prNumber(root['number']) ?? prNumber(pr?.['number']);
  const forgeAction = text(root['action'], 100) ?? '(no action)';
  const action = ACTIONS[forgeAction];
  if (action === undefined || ['open', 'reopen', 'update', 'close', 'merge'].includes(forgeAction)) {
    return { kind: 'pull_request_other', number, forgeAction };
  }
  if (pr === undefined || number === null) return { kind: 'pull_request_malformed', problem: 'the pull request event has no "number" or "pull_request"' };
  const head = object(pr['head']);
  const base = object(pr['base']);
  const headSha = head?.['sha'];
  if (typeof headSha !== 'string' || !SHA.test(headSha)) return { kind: 'pull_request_malformed', problem: 'the pull request has no head "sha" (40 lower-case hex)' };
  const baseBranch = text(base?.['ref'], 1024);
  if (baseBranch === null) return { kind: 'pull_request_malformed', problem: 'the pull request has no base "ref"' };
  const headRepo = object(head?.['repo']);
  const baseRepo = object(base?.['repo']);
  const headName = text(headRepo?.['full_name']);
  return {
    kind: 'pull_request',
    action,
    forgeAction,
    number,
    pullRef: `refs/pull/${number}/head`,
    headSha,
    headBranch: text(head?.['ref']),
    baseBranch: baseBranch.replace(/^refs\/heads\//, ''),
    headRepo: headName,
    sameRepo: sameRepository(
      { id: id(head?.['repo_id']) ?? id(headRepo?.['id']), name: headName },
      { id: id(base?.['repo_id']) ?? id(baseRepo?.['id']), name: text(baseRepo?.['full_name']) },
    ),
    merged: pr['merged'] === true,
  };
}

function readGitlab(body: unknown): PullRequestEvent {
  const root = object(body);
  const attributes = object(root?.['object_attributes']);
  if (root === undefined || attributes === undefined) return { kind: 'pull_request_malformed', problem: 'a merge request delivery must carry "object_attributes"' };
  const number = prNumber(attributes['iid']);
  const forgeAction = text(attributes['action'], 100) ?? '(no action)';
  const action = ACTIONS[forgeAction];
  if (action === undefined || ['opened', 'reopened', 'synchronize', 'synchronized', 'closed'].includes(forgeAction)) {
    return { kind: 'pull_request_other', number, forgeAction };
  }
  if (number === null) return { kind: 'pull_request_malformed', problem: 'the merge request has no "iid"' };
  const headSha = object(attributes['last_commit'])?.['id'];
  if (typeof headSha !== 'string' || !SHA.test(headSha)) return { kind: 'pull_request_malformed', problem: 'the merge request has no "last_commit.id" (40 lower-case hex)' };
  const baseBranch = text(attributes['target_branch'], 1024);
  if (baseBranch === null) return { kind: 'pull_request_malformed', problem: 'the merge request has no "target_branch"' };
  const source = object(attributes['source']);
  const target = object(attributes['target']);
  const sourceName = text(source?.['path_with_namespace']);
  const sourceId = id(attributes['source_project_id']);
  return {
    kind: 'pull_request',
    action,
    forgeAction,
    number,
    pullRef: `refs/merge-requests/${number}/head`,
    headSha,
    headBranch: text(attributes['source_branch']),
    baseBranch,
    headRepo: sourceName ?? (sourceId === null ? null : `project ${sourceId}`),
    sameRepo: sameRepository({ id: sourceId, name: sourceName }, { id: id(attributes['target_project_id']), name: text(target?.['path_with_namespace']) }),
    merged: forgeAction === 'merge',
  };
}
