// A release's image: the commit to build, its source fetched (git) or found (upload), built by the engine in the build sandbox.
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';
import { DomainError } from '../core/errors.js';
import type { EnvVar } from '../domain/app-config.js';
import type { BuildRow } from '../domain/builds.js';
import type { DeploymentRow } from '../domain/deployments.js';
import { LABEL_INSTANCE, LABEL_MANAGED, buildNetworkName, type BuildSandbox, type ContainerEngine } from '../runtime/engine.js';
import { fetchCommit, redactCredentials, resolveCommit } from '../source/git.js';
import type { SourceStore } from '../source/source-store.js';
import type { UsedDockerfile } from '../domain/used-dockerfile.js';
import { buildArgsFor } from './build-args.js';
import { chooseDockerfile } from './build-dockerfile.js';
import { buildNetworkNotice, explainNetworkFailure } from './build-network.js';
import { BuildTimeLimit } from './failures.js';
import { imageTag } from './images.js';
import { buildComposeSet } from './compose-build.js';
import type { ReleaseSet } from '../runtime/release-set.js';
import type { LifecycleSettings } from './lifecycle-settings.js';

/** Time limit of `git ls-remote` at trigger time. */
const RESOLVE_TIMEOUT_MS = 60_000;

/**
 * The commit to build. Bad input (an unknown branch, a refused host) is a validation_error and
 * records nothing; a repository that cannot be reached is recorded as a build that fails, like any
 * other build failure (`commit_sha` is then empty).
 */
export async function resolveSource(dep: DeploymentRow, settings: LifecycleSettings): Promise<{ sha: string; branch: string; unreadable?: string }> {
  try {
    return await resolveCommit(dep.repo_url ?? '', dep.branch ?? undefined, gitOptions(settings, AbortSignal.timeout(RESOLVE_TIMEOUT_MS)));
  } catch (err) {
    const unresolvable = err instanceof DomainError && err.message.endsWith('could not be resolved');
    if (err instanceof DomainError && !unresolvable) throw err;
    const reason = redactCredentials(err instanceof Error ? err.message : String(err));
    return { sha: '', branch: dep.branch ?? '', unreadable: `cannot read the repository: ${reason}` };
  }
}

/** How git runs for a deployment: private hosts allowed or not, the build's time limit, its environment. */
function gitOptions(settings: LifecycleSettings, signal: AbortSignal): { allowPrivate: boolean; timeoutMs: number; signal: AbortSignal; gitEnv: Record<string, string> } {
  return { allowPrivate: settings.allowPrivateGit, timeoutMs: settings.buildTimeoutMs, signal, gitEnv: settings.gitEnv };
}

/** How builds' RUN steps are confined: no network, or this installation's build network; memory, CPU and pids limits. */
export function buildSandbox(settings: LifecycleSettings): BuildSandbox {
  const { instanceId, build } = settings;
  return {
    network:
      build.network === 'none'
        ? { mode: 'none' }
        : { mode: 'confined', name: buildNetworkName(instanceId), labels: { [LABEL_MANAGED]: 'true', [LABEL_INSTANCE]: instanceId } },
    memoryBytes: build.memoryBytes,
    nanoCpus: build.nanoCpus,
    pidsLimit: build.pidsLimit,
  };
}

/** Writes an upload another instance received into this one's source store (decisions §15); false when there is none. */
export type RestoreUpload = (deploymentId: string, uploadId: string, dockerfilePath: string, signal: AbortSignal) => Promise<boolean>;

export interface ImageBuildDeps {
  readonly engine: ContainerEngine;
  readonly settings: LifecycleSettings;
  readonly sources: SourceStore;
  readonly restoreUpload: RestoreUpload | undefined;
  /** Whether the runtime releases sets of services (compose deployments, contract §21). */
  readonly setsSupported?: boolean | undefined;
  /** Records the Dockerfile a build uses (decisions §24). */
  readonly recordDockerfile?: (buildId: string, used: UsedDockerfile) => Promise<void>;
}

/**
 * Builds `build`'s image and returns its tag: a git source is fetched into `workDir` (the caller
 * removes it), an upload is read where it was received (or back from the database); the build's
 * output goes to `log`. Aborted by `cancel` or the build time limit.
 */
export async function buildReleaseImage(
  deps: ImageBuildDeps,
  dep: DeploymentRow,
  build: BuildRow,
  vars: readonly EnvVar[],
  workDir: string,
  cancel: AbortSignal,
  log: (text: string) => void,
): Promise<{ image: string; set: ReleaseSet | null }> {
  const limit = AbortSignal.timeout(deps.settings.buildTimeoutMs);
  try {
    return await buildWithin(deps, dep, build, vars, workDir, AbortSignal.any([cancel, limit]), log);
  } catch (err) {
    // Whatever step the limit cut short (a fetch, the engine's build), the build's limit is the cause.
    if (limit.aborted && !cancel.aborted) throw new BuildTimeLimit(deps.settings.buildTimeoutMs);
    throw err;
  }
}

async function buildWithin(
  deps: ImageBuildDeps,
  dep: DeploymentRow,
  build: BuildRow,
  vars: readonly EnvVar[],
  workDir: string,
  buildSignal: AbortSignal,
  log: (text: string) => void,
): Promise<{ image: string; set: ReleaseSet | null }> {
  const { engine, settings } = deps;
  let contextDir: string;
  if (dep.source_type === 'git') {
    const at = build.source_ref.startsWith('refs/') ? ` (${build.source_ref})` : '';
    log(`==> fetching ${redactCredentials(dep.repo_url ?? '')} at ${build.commit_sha}${at}\n`);
    await fsp.mkdir(path.dirname(workDir), { recursive: true, mode: 0o700 });
    await fetchCommit(dep.repo_url ?? '', build.commit_sha, workDir, {
      ...gitOptions(settings, buildSignal),
      // A preview's commit is fetched at the forge's pull ref (refs/pull/<n>/head…), so a fork's is found too.
      ...(build.source_ref.startsWith('refs/') ? { ref: build.source_ref } : { branch: build.source_ref }),
      onOutput: log,
    });
    // The repository's history is not part of the app: keep it out of the build context.
    await fsp.rm(path.join(workDir, '.git'), { recursive: true, force: true });
    contextDir = workDir;
  } else {
    contextDir = deps.sources.sourceDir(dep.id, build.source_ref);
    // Received by another instance (decisions §15): read back from the database.
    if (!fs.existsSync(contextDir) && deps.restoreUpload !== undefined) {
      log('==> reading the upload from the database (another instance received it)\n');
      await deps.restoreUpload(dep.id, build.source_ref, dep.dockerfile_path, buildSignal);
    }
  }
  if (dep.compose_path !== null && dep.compose_path !== undefined) {
    const sandbox = buildSandbox(settings);
    const tag = imageTag(settings.instanceId, dep.id, build.id);
    return buildComposeSet({ engine, settings, sandbox, setsSupported: deps.setsSupported === true }, dep.compose_path, contextDir, tag, vars, buildSignal, log);
  }
  // The source's Dockerfile (read as the engine reads it: never through a symbolic link), or one generated from its stack.
  const used = await chooseDockerfile(contextDir, dep.dockerfile_path, vars, settings.baseImages, log);
  await deps.recordDockerfile?.(build.id, used);
  // Non-secret variables fill the ARGs the Dockerfile declares; secrets never reach a build.
  const buildArgs = buildArgsFor(used.dockerfile, vars);
  const argNames = Object.keys(buildArgs);
  log(`==> building image (${dep.dockerfile_path})${argNames.length === 0 ? '' : ` with build arguments ${argNames.join(', ')}`}\n`);
  log(buildNetworkNotice(settings.build.network));
  const tag = imageTag(settings.instanceId, dep.id, build.id);
  await engine.buildImage({
    contextDir,
    dockerfile: dep.dockerfile_path,
    tag,
    labels: {},
    signal: buildSignal,
    onOutput: log,
    sandbox: buildSandbox(settings),
    buildArgs,
    ...(used.generated ? { dockerfileText: used.dockerfile } : {}),
  }).catch((err: unknown) => {
    throw explainNetworkFailure(err, settings.build.network);
  });
  return { image: tag, set: null };
}
