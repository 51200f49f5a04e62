// The build pipeline: a build's source → image → healthy container → traffic switch, its log written and its outcome recorded.
import fsp from 'node:fs/promises';
import path from 'node:path';
import { AnsiStripper } from '../core/ansi.js';
import { DomainError } from '../core/errors.js';
import type { EnvVar } from '../domain/app-config.js';
import type { BuildRow } from '../domain/builds.js';
import type { DeploymentRow } from '../domain/deployments.js';
import { addedSecretVars } from '../runtime/app-runtime.js';
import { releaseTarget } from '../runtime/release.js';
import { serializeReleaseSet, type ReleaseSet } from '../runtime/release-set.js';
import { redactError, redactorFor, type SecretRedactor } from '../secrets/redact.js';
import type { TakenBuild } from './build-queue.js';
import { describeFailure, failedStep, isExpectedFailure, summarizeFailure } from './failures.js';
import { buildReleaseImage } from './image-build.js';
import { isServing, nextStatus, publishRoute, type LifecycleParts } from './lifecycle-parts.js';
import type { ReleaseSwitch } from './release-switch.js';

/** How a pipeline starts: a build taken from the queue (holding a slot), or one that fails at once. */
export interface PipelineStart {
  readonly taken?: TakenBuild;
  readonly unreadable?: string;
}

/** Why a build was aborted: a cancel (by the user, a newer deploy, a stop, a delete, a shutdown). */
export class Cancelled extends Error {
  override readonly name = 'Cancelled';
}

/** Seconds since `since`, with one decimal. */
function seconds(since: number): string {
  return ((Date.now() - since) / 1000).toFixed(1);
}

/** Build → image → healthy container → traffic switch. Never throws: the outcome goes to the database. */
export async function runBuildPipeline(
  parts: LifecycleParts,
  releases: ReleaseSwitch,
  dep: DeploymentRow,
  build: BuildRow,
  vars: readonly EnvVar[],
  cancel: AbortSignal,
  start: PipelineStart,
): Promise<void> {
  const { deps, runtime, queue, locks, recovery } = parts;
  const { engine, buildLogs, settings, store } = deps;
  const { taken, unreadable } = start;
  // The slot a build taken from the queue holds: freed once its image is built (or it ended).
  let slotHeld = taken !== undefined;
  const releaseSlot = (): void => {
    if (!slotHeld || taken === undefined) return;
    slotHeld = false;
    void queue.release(taken.buildId).catch((err: unknown) => deps.log('warn', 'freeing a build slot failed', { err }));
  };
  // Queued by another instance (or by a lost one): it is this instance's build from now on.
  if (taken?.queuedBy !== undefined && !(await store.claimBuild(build.id, taken.queuedBy).catch(() => false))) {
    releaseSlot();
    return;
  }
  // Output that arrives after the log is closed (an engine stream still draining after a cancel)
  // must not reopen it: a reopened log would never be closed, and its followers never finish.
  let logOpen = true;
  // App output and engine errors can hold the deployment's secrets: they are redacted before they are stored.
  // The release's start-up output lands here too, and the runtime adds secrets of its own to the
  // release (a linked database's URL and password), which are not among `vars`. If they cannot be
  // read, the build fails (below) rather than risk an unmasked log.
  let added: Awaited<ReturnType<typeof addedSecretVars>> = [];
  let unmaskable: unknown;
  try {
    added = await addedSecretVars(runtime, dep.id);
  } catch (err) {
    unmaskable = err;
  }
  const redactor = redactorFor([...vars, ...added]);
  const redacted = redactor.stream();
  // Stored without terminal colours (the builder's own included): the dashboard and a piped CLI show plain text.
  const plain = new AnsiStripper();
  const log = (text: string): void => {
    if (logOpen) buildLogs.append(dep.id, build.id, redacted.push(plain.push(text)));
  };
  // Writes what the redactor holds and closes the log: before a failed build is marked ended, so
  // whoever sees it ended reads its whole log (the failure line included).
  const sealLog = async (): Promise<void> => {
    if (!logOpen) return;
    const rest = redacted.flush();
    if (rest !== '') buildLogs.append(dep.id, build.id, rest);
    logOpen = false;
    await buildLogs.close(build.id);
  };
  const workDir = path.join(settings.dataDir, 'work', build.id);
  let image: string | undefined;
  let set: ReleaseSet | null = null;
  const startedAt = Date.now();
  const what = `deploy of ${dep.name} (${dep.subdomain}, build ${build.id.slice(0, 8)})`;
  deps.log('info', `${what} started`);
  try {
    if (taken?.lostFrom !== undefined) log(`==> the instance running this build (${taken.lostFrom}) was lost; instance ${taken.takenBy ?? 'this'} builds it again from the start\n`);
    log(`==> build ${build.id} of ${dep.name} (${dep.source_type} ${build.commit_sha || 'unresolved'})\n`);
    if (unreadable !== undefined) throw new DomainError('build_failed', unreadable);
    if (unmaskable !== undefined) throw unmaskable;
    cancel.throwIfAborted();
    try {
      const built = await buildReleaseImage(
        { engine, settings, restoreUpload: deps.restoreUpload, sources: deps.sources, recordDockerfile: (id, used) => store.recordDockerfile(id, used), setsSupported: runtime.releasesSets },
        dep, build, vars, workDir, cancel, log,
      );
      image = built.image;
      set = built.set;
      await store.setImage(build.id, image);
      if (set !== null) await store.setReleaseSet?.(build.id, serializeReleaseSet(set));
    } finally {
      releaseSlot();
      await fsp.rm(workDir, { recursive: true, force: true });
    }

    const container = await runtime.startRelease(releaseTarget(dep, { id: build.id, image, vars, set }, settings), {
      timeoutMs: settings.startupTimeoutMs,
      signal: cancel,
      onOutput: log,
    });
    // Switch traffic under the deployment's lock; a canceller holding the lock aborts this wait.
    // Recovery of the release this build replaces is moot: it does not keep the switch waiting.
    recovery.interrupt(dep.id);
    let releaseLock: () => void;
    try {
      releaseLock = await locks.acquire(dep.id, cancel);
    } catch (err) {
      await runtime.removeRelease(container.id).catch(() => undefined);
      throw err;
    }
    try {
      const current = await store.deployment(dep.id);
      if (current === undefined || cancel.aborted) {
        await runtime.removeRelease(container.id).catch(() => undefined);
        throw cancel.reason ?? new Cancelled('the deployment was deleted');
      }
      await releases.switchTo(current, build.id, container.id, container.upstreams, nextStatus(current, 'build_succeeded').to);
    } finally {
      releaseLock();
    }
    log(`==> live at build ${build.id}\n`);
    deps.events?.emit({ type: 'deploy.succeeded', deploymentId: dep.id, subdomain: dep.subdomain, buildId: build.id });
    deps.log('info', `${what} succeeded in ${seconds(startedAt)} s`);
    deps.onBuildEnd?.('succeeded', (Date.now() - startedAt) / 1000);
  } catch (err) {
    await recordFailure(parts, dep, build, image, err, cancel, log, sealLog, redactor);
    const verb = cancel.aborted ? 'cancelled' : 'failed';
    deps.onBuildEnd?.(verb, (Date.now() - startedAt) / 1000);
    deps.log('info', `${what} ${verb} after ${seconds(startedAt)} s: ${summarizeFailure(err, cancel)}`);
  } finally {
    releaseSlot();
    await sealLog();
  }
}

/** Records a build that failed or was cancelled: its log's last line, its status, its image removed, the deployment's status and route. */
async function recordFailure(
  parts: LifecycleParts,
  dep: DeploymentRow,
  build: BuildRow,
  image: string | undefined,
  err: unknown,
  cancel: AbortSignal,
  log: (text: string) => void,
  sealLog: () => Promise<void>,
  redactor: SecretRedactor,
): Promise<void> {
  const { deps } = parts;
  const { store } = deps;
  const cancelled = cancel.aborted;
  const message = redactor.redact(describeFailure(err, cancel));
  if (!cancelled && !isExpectedFailure(err)) deps.log('error', 'build failed unexpectedly', { buildId: build.id, err: redactError(redactor, err) });
  log(`==> ${cancelled ? 'cancelled' : 'failed'}: ${message}\n`);
  await sealLog();
  await store.finishBuild(build.id, cancelled ? 'cancelled' : 'failed', message);
  if (!cancelled) deps.events?.emit({ type: 'deploy.failed', deploymentId: dep.id, subdomain: dep.subdomain, buildId: build.id, message });
  if (image !== undefined) await deps.engine.removeImage(image).catch(() => undefined);
  await store.setImage(build.id, null);
  if (!cancelled) {
    const current = await store.deployment(dep.id);
    if (current !== undefined) {
      const next = nextStatus(current, 'build_failed');
      if (!next.noop) await store.setStatus(dep.id, next.to);
      if (!(await isServing(parts, current))) publishRoute(parts, current.subdomain, dep.id, 'failed', failedStep(err, image !== undefined));
    }
  }
}
