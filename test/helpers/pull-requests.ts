// Test helper: signed pull request deliveries shaped as GitHub, Gitea/Forgejo and GitLab send them (decisions §17).
import crypto from 'node:crypto';

export type Forge = 'github' | 'gitea' | 'gitlab';

export interface PullRequestSpec {
  /** GitHub/Gitea action (`opened`, `synchronize`/`synchronized`, `closed`…) or GitLab's (`open`, `update`, `merge`…). */
  action: string;
  number: number;
  headSha: string;
  /** The branch the request targets (default `main`). */
  base?: string;
  headBranch?: string;
  /** The head repository's name; a fork has another one than the base (`owner/app`). */
  headRepo?: string;
  merged?: boolean;
}

const BASE_REPO = { id: 1, full_name: 'owner/app' };

/** The event body as `forge` shapes it. */
export function pullRequestBody(forge: Forge, spec: PullRequestSpec): Buffer {
  const base = spec.base ?? 'main';
  const headBranch = spec.headBranch ?? `feature-${spec.number}`;
  const headRepo = spec.headRepo ?? BASE_REPO.full_name;
  const headRepoId = headRepo === BASE_REPO.full_name ? BASE_REPO.id : 1000 + spec.number;
  if (forge === 'gitlab') {
    return Buffer.from(
      JSON.stringify({
        object_kind: 'merge_request',
        event_type: 'merge_request',
        project: { id: BASE_REPO.id, path_with_namespace: BASE_REPO.full_name },
        object_attributes: {
          iid: spec.number,
          action: spec.action,
          state: spec.action === 'merge' ? 'merged' : spec.action === 'close' ? 'closed' : 'opened',
          source_branch: headBranch,
          target_branch: base,
          source_project_id: headRepoId,
          target_project_id: BASE_REPO.id,
          source: { path_with_namespace: headRepo },
          target: { path_with_namespace: BASE_REPO.full_name },
          last_commit: { id: spec.headSha, message: 'change' },
        },
      }),
    );
  }
  const pull = {
    number: spec.number,
    state: spec.action === 'closed' ? 'closed' : 'open',
    merged: spec.merged === true,
    head: { ref: headBranch, sha: spec.headSha, ...(forge === 'gitea' ? { repo_id: headRepoId } : {}), repo: { id: headRepoId, full_name: headRepo } },
    base: { ref: base, sha: '0'.repeat(40), ...(forge === 'gitea' ? { repo_id: BASE_REPO.id } : {}), repo: BASE_REPO },
  };
  return Buffer.from(JSON.stringify({ action: spec.action, number: spec.number, pull_request: pull, repository: BASE_REPO }));
}

const hmacHex = (secret: string, body: Buffer): string => crypto.createHmac('sha256', secret).update(body).digest('hex');

/** Headers of a signed pull request delivery from `forge` (`secret` undefined: unsigned). */
export function pullRequestHeaders(forge: Forge, secret: string | undefined, body: Buffer, delivery: string = crypto.randomUUID()): Record<string, string> {
  switch (forge) {
    case 'github':
      return {
        'content-type': 'application/json',
        'x-github-event': 'pull_request',
        'x-github-delivery': delivery,
        ...(secret === undefined ? {} : { 'x-hub-signature-256': `sha256=${hmacHex(secret, body)}` }),
      };
    case 'gitea':
      return {
        'content-type': 'application/json',
        'x-gitea-event': 'pull_request',
        'x-gitea-delivery': delivery,
        'x-github-event': 'pull_request',
        'x-github-delivery': delivery,
        ...(secret === undefined ? {} : { 'x-gitea-signature': hmacHex(secret, body) }),
      };
    case 'gitlab':
      return {
        'content-type': 'application/json',
        'x-gitlab-event': 'Merge Request Hook',
        'x-gitlab-event-uuid': delivery,
        ...(secret === undefined ? {} : { 'x-gitlab-token': secret }),
      };
  }
}
