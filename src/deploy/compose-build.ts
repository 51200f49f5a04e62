// A compose deployment's build: its file planned (every refusal before anything is built), then each service's image made in the build sandbox, giving the release set.
import fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { loadCompose, sourceAt } from '../compose/load-compose.js';
import type { ComposeService } from '../compose/compose-service.js';
import { DomainError } from '../core/errors.js';
import type { EnvVar } from '../domain/app-config.js';
import { EngineBuildError, type ContainerEngine } from '../runtime/engine.js';
import { readDockerfile } from '../runtime/read-dockerfile.js';
import type { ReleaseSet, SetService } from '../runtime/release-set.js';
import { lastLine } from '../runtime/release.js';
import { buildArgsFor } from './build-args.js';
import { buildNetworkNotice, explainNetworkFailure } from './build-network.js';
import type { LifecycleSettings } from './lifecycle-settings.js';

export interface ComposeBuildDeps {
  readonly engine: ContainerEngine;
  readonly settings: LifecycleSettings;
  /** The sandbox every build runs in (the same as a Dockerfile build's). */
  readonly sandbox: Parameters<ContainerEngine['buildImage']>[0]['sandbox'];
  /** Whether the runtime releases sets of services (`docker`); under `swarm` a compose build fails at once. */
  readonly setsSupported: boolean;
}

/** The tag of one service's image of a build: the build's own tag with the service's name. */
export function serviceImageTag(buildTag: string, service: string): string {
  return `${buildTag}-${service.toLowerCase().replace(/[^a-z0-9_.-]/g, '-')}`.slice(0, 128);
}

/**
 * Plans `composePath` from the source at `contextDir` and builds every service: `build` services
 * from their context, `image` services through a one-line `FROM` build (so the image policy, the
 * pull and its failure message are a Dockerfile build's), secrets and configs copied in.
 * Returns the web service's image and the set; on failure the images made are removed.
 */
export async function buildComposeSet(
  deps: ComposeBuildDeps,
  composePath: string,
  contextDir: string,
  buildTag: string,
  vars: readonly EnvVar[],
  signal: AbortSignal,
  log: (text: string) => void,
): Promise<{ image: string; set: ReleaseSet }> {
  if (!deps.setsSupported) {
    throw new DomainError('build_failed', 'compose deployments run under SLIPWAY_RUNTIME=docker only: under swarm, deploy each service as its own deployment (see docs/compose.md)');
  }
  // Interpolation sees the deployment's plain variables only: secrets never reach the stored set.
  const values = new Map(vars.filter((v) => !v.secret).map((v) => [v.key, v.value] as const));
  const plan = loadCompose(sourceAt(contextDir), composePath, values);
  log(`==> compose file ${composePath}: ${plan.services.length} service${plan.services.length === 1 ? '' : 's'} (${plan.services.map((s) => s.name).join(', ')}); web: "${plan.web}"${plan.port === null ? '' : ` on port ${plan.port}`}\n`);
  for (const warning of plan.warnings) log(`${warning}\n`);
  log(buildNetworkNotice(deps.settings.build.network));
  const made: string[] = [];
  try {
    const services: SetService[] = [];
    for (const service of plan.services) {
      signal.throwIfAborted();
      const tag = serviceImageTag(buildTag, service.name);
      await buildService(deps, service, contextDir, tag, vars, signal, log).catch((err: unknown) => {
        throw namedForService(err, service.name);
      });
      made.push(tag);
      services.push(setServiceOf(service, tag));
    }
    const web = services.find((s) => s.name === plan.web);
    if (web === undefined) throw new DomainError('build_failed', `the web service "${plan.web}" was not built`);
    return { image: web.image, set: { web: plan.web, port: plan.port, services } };
  } catch (err) {
    for (const tag of made) await deps.engine.removeImage(tag).catch(() => undefined);
    throw err;
  }
}

/** A failed service build's error, its message naming the service (the failure is read without the log's sections). */
function namedForService(err: unknown, service: string): unknown {
  const name = `service "${service}": `;
  if (err instanceof EngineBuildError) {
    // Kept an image build failure (its record and the failed app's page say so), the service after the prefix.
    const prefix = 'image build failed: ';
    const said = err.message.startsWith(prefix) ? err.message.slice(prefix.length) : lastLine(err.outputTail) || err.message;
    return said.startsWith(name) ? err : new EngineBuildError(`${prefix}${name}${said}`, err.outputTail, { cause: err });
  }
  if (!(err instanceof DomainError) || err.message.startsWith(name)) return err;
  return new DomainError(err.code, `${name}${err.message}`, { cause: err });
}

function setServiceOf(service: ComposeService, image: string): SetService {
  return {
    name: service.name,
    image,
    command: service.command,
    entrypoint: service.entrypoint,
    environment: service.environment,
    healthcheck: service.healthcheck,
    dependsOn: service.dependsOn,
    replicas: service.replicas,
    ports: service.ports,
    volumes: service.volumes,
    workingDir: service.workingDir,
    user: service.user,
  };
}

/** One service's image, its build output in its own section of the log. */
async function buildService(
  deps: ComposeBuildDeps,
  service: ComposeService,
  contextDir: string,
  tag: string,
  vars: readonly EnvVar[],
  signal: AbortSignal,
  log: (text: string) => void,
): Promise<void> {
  const build = (options: { contextDir: string; dockerfile: string; buildArgs?: Record<string, string>; target?: string | undefined }): Promise<unknown> =>
    deps.engine
      .buildImage({
        contextDir: options.contextDir,
        dockerfile: options.dockerfile,
        tag,
        labels: {},
        signal,
        onOutput: log,
        sandbox: deps.sandbox,
        ...(options.buildArgs === undefined ? {} : { buildArgs: options.buildArgs }),
        ...(options.target === undefined ? {} : { target: options.target }),
      })
      .catch((err: unknown) => {
        throw explainNetworkFailure(err, deps.settings.build.network);
      });
  const source = service.source;
  if (source.kind === 'build') {
    const dir = path.join(contextDir, source.context);
    // Compose's args first; the deployment's plain variables fill the ARGs the Dockerfile declares.
    const text = await readDockerfile(dir, source.dockerfile).catch(() => {
      throw new DomainError('build_failed', `service "${service.name}": no Dockerfile at "${path.posix.join(source.context, source.dockerfile)}" in the source`);
    });
    const buildArgs = { ...source.args, ...buildArgsFor(text, vars) };
    log(`==> service "${service.name}": building ${path.posix.join(source.context, source.dockerfile)}${source.target === undefined ? '' : ` (stage ${source.target})`}\n`);
    await build({ contextDir: dir, dockerfile: source.dockerfile, buildArgs, target: source.target });
  } else {
    log(`==> service "${service.name}": image ${source.image}\n`);
    await withGeneratedContext(`FROM ${source.image}\n`, [], (dir) => build({ contextDir: dir, dockerfile: 'Dockerfile' }));
  }
  if (service.files.length > 0) {
    log(`==> service "${service.name}": ${service.files.length} secret and config file${service.files.length === 1 ? '' : 's'} put in place\n`);
    const copies = service.files.map((f, i) => ({ from: path.join(contextDir, f.source), name: `file-${i}`, target: f.target }));
    const dockerfile = `FROM ${tag}\n${copies.map((c) => `COPY ${c.name} ${JSON.stringify(c.target).slice(1, -1)}`).join('\n')}\n`;
    await withGeneratedContext(dockerfile, copies, (dir) => build({ contextDir: dir, dockerfile: 'Dockerfile' }));
  }
}

/** A throwaway build context holding `dockerfile` and copies of `files` (read from the source, never through a symlink out: checked by the plan). */
async function withGeneratedContext<T>(dockerfile: string, files: ReadonlyArray<{ from: string; name: string }>, fn: (dir: string) => Promise<T>): Promise<T> {
  const dir = await fsp.mkdtemp(path.join(os.tmpdir(), 'slipway-compose-'));
  try {
    await fsp.writeFile(path.join(dir, 'Dockerfile'), dockerfile);
    for (const f of files) await fsp.copyFile(f.from, path.join(dir, f.name));
    return await fn(dir);
  } finally {
    await fsp.rm(dir, { recursive: true, force: true });
  }
}
