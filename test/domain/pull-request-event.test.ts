// Unit tests: how GitHub, Gitea/Forgejo and GitLab pull request deliveries are read (actions, pull refs, fork or not, malformed).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { readPullRequest } from '../../src/domain/pull-request-event.js';
import type { DeliveryIdentity } from '../../src/domain/webhook-delivery.js';

const SHA = 'a'.repeat(40);
const github = (event: string): DeliveryIdentity => ({ provider: 'github', event, deliveryId: 'd' });
const gitea = (event: string): DeliveryIdentity => ({ provider: 'gitea', event, deliveryId: 'd' });
const gitlab = (event: string): DeliveryIdentity => ({ provider: 'gitlab', event, deliveryId: 'd' });

function githubBody(action: string, head: Record<string, unknown> = { repo: { id: 1, full_name: 'o/app' } }, extra: Record<string, unknown> = {}): unknown {
  return { action, number: 7, pull_request: { number: 7, merged: false, head: { ref: 'topic', sha: SHA, ...head }, base: { ref: 'main', repo: { id: 1, full_name: 'o/app' } }, ...extra } };
}

test('other events are not pull requests', () => {
  assert.equal(readPullRequest(github('push'), {}), undefined);
  assert.equal(readPullRequest(gitea('ping'), {}), undefined);
  assert.equal(readPullRequest(gitlab('Push Hook'), {}), undefined);
});

test('GitHub and Gitea actions map to open, sync and close; others are left alone', () => {
  const cases: Array<[string, string | undefined]> = [
    ['opened', 'open'],
    ['reopened', 'open'],
    ['synchronize', 'sync'],
    ['synchronized', 'sync'],
    ['closed', 'close'],
    ['edited', undefined],
    ['labeled', undefined],
    ['update', undefined],
  ];
  for (const [action, expected] of cases) {
    for (const identity of [github('pull_request'), gitea('pull_request')]) {
      const read = readPullRequest(identity, githubBody(action));
      if (expected === undefined) assert.equal(read?.kind, 'pull_request_other', action);
      else {
        assert.equal(read?.kind, 'pull_request', action);
        if (read?.kind === 'pull_request') {
          assert.equal(read.action, expected);
          assert.equal(read.pullRef, 'refs/pull/7/head');
          assert.equal(read.headSha, SHA);
          assert.equal(read.baseBranch, 'main');
          assert.equal(read.headBranch, 'topic');
        }
      }
    }
  }
});

test('a fork is told apart by repository id, else by name; nothing known counts as a fork', () => {
  const same = readPullRequest(github('pull_request'), githubBody('opened'));
  assert.ok(same?.kind === 'pull_request' && same.sameRepo);
  const fork = readPullRequest(github('pull_request'), githubBody('opened', { repo: { id: 2, full_name: 'someone/app' } }));
  assert.ok(fork?.kind === 'pull_request' && !fork.sameRepo && fork.headRepo === 'someone/app');
  // Same name but another id: the id decides.
  const renamed = readPullRequest(github('pull_request'), githubBody('opened', { repo: { id: 3, full_name: 'o/app' } }));
  assert.ok(renamed?.kind === 'pull_request' && !renamed.sameRepo);
  const byName = readPullRequest(github('pull_request'), {
    action: 'opened',
    number: 7,
    pull_request: { head: { ref: 't', sha: SHA, repo: { full_name: 'O/App' } }, base: { ref: 'main', repo: { full_name: 'o/app' } } },
  });
  assert.ok(byName?.kind === 'pull_request' && byName.sameRepo);
  const deletedFork = readPullRequest(github('pull_request'), githubBody('opened', { repo: null }));
  assert.ok(deletedFork?.kind === 'pull_request' && !deletedFork.sameRepo);
  const giteaIds = readPullRequest(gitea('pull_request'), { action: 'opened', number: 7, pull_request: { head: { ref: 't', sha: SHA, repo_id: 5 }, base: { ref: 'main', repo_id: 5 } } });
  assert.ok(giteaIds?.kind === 'pull_request' && giteaIds.sameRepo);
});

test('GitLab merge requests: open, reopen, update, close, merge; refs/merge-requests/<iid>/head; projects compared', () => {
  const body = (action: string, source = 1) => ({
    object_kind: 'merge_request',
    object_attributes: { iid: 4, action, source_branch: 'topic', target_branch: 'main', source_project_id: source, target_project_id: 1, last_commit: { id: SHA } },
  });
  const expected: Record<string, string | undefined> = { open: 'open', reopen: 'open', update: 'sync', close: 'close', merge: 'close', approved: undefined, opened: undefined };
  for (const [action, want] of Object.entries(expected)) {
    const read = readPullRequest(gitlab('Merge Request Hook'), body(action));
    if (want === undefined) assert.equal(read?.kind, 'pull_request_other', action);
    else assert.ok(read?.kind === 'pull_request' && read.action === want && read.pullRef === 'refs/merge-requests/4/head' && read.sameRepo, action);
  }
  const merged = readPullRequest(gitlab('Merge Request Hook'), body('merge'));
  assert.ok(merged?.kind === 'pull_request' && merged.merged);
  const fork = readPullRequest(gitlab('Merge Request Hook'), body('open', 9));
  assert.ok(fork?.kind === 'pull_request' && !fork.sameRepo);
});

test('malformed deliveries say what is missing', () => {
  for (const body of [null, [], 'x', { action: 'opened' }, { action: 'opened', number: 7, pull_request: { head: { sha: 'zz' }, base: { ref: 'main' } } }, githubBody('opened', {}, { base: {} })]) {
    assert.equal(readPullRequest(github('pull_request'), body)?.kind, 'pull_request_malformed', JSON.stringify(body));
  }
  assert.equal(readPullRequest(gitlab('Merge Request Hook'), { object_attributes: { iid: 1, action: 'open' } })?.kind, 'pull_request_malformed');
  assert.equal(readPullRequest(gitlab('Merge Request Hook'), {})?.kind, 'pull_request_malformed');
});
