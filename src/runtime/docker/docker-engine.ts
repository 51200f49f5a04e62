// The container engine on Docker: dockerode over the Engine API (never the docker CLI).
import crypto from 'node:crypto';
import { lookup } from 'node:dns/promises';
import { Readable } from 'node:stream';
import Dockerode from 'dockerode';
import { APP_CAPABILITIES, APP_LOG_MAX_FILES, APP_LOG_MAX_SIZE, EngineBuildError } from '../engine.js';
import type {
  BuildImageOptions,
  BuildSandbox,
  ContainerEngine,
  ContainerExit,
  ContainerInfo,
  ContainerStats,
  ExecResult,
  ExecStream,
  ImageInfo,
  NetworkInfo,
  NetworkOptions,
  OutputLine,
  RunContainerOptions,
  VolumeInfo,
  VolumeOptions,
} from '../engine.js';
import { dockerfileFetches, dockerfileProblem, triggersProblem } from '../dockerfile-policy.js';
import { buildContext } from './build-context.js';
import { readDockerfile } from '../read-dockerfile.js';
import { buildBridgeName, createBuildCgroup, ensureAppFirewall, ensureBuildFirewall, removeAppFirewall, sweepBuildCgroups } from './build-sandbox.js';
import { ensureInternalGuard, removeInternalGuard } from './internal-guard.js';
import { OutputTail, eventText, parseEvent } from './build-output.js';
import { LogDemuxer } from './log-demuxer.js';
import { parseStampedLogs } from './stamped-logs.js';
import { statsFigures, type EngineStatsSample } from './container-stats.js';
import { connectTo, disconnectFrom, execIn, pull } from './service-calls.js';
import { execStream } from './exec-stream.js';
import { PUBLISH_HOST, bridgeOf, checkNetwork, fromInspect, labelFilters, parseDieEvents, pullFailure } from './engine-answers.js';
import { abortError, engineMessage, ignoreStatus, statusCode, timeoutError, withTimeout } from './engine-calls.js';

/** Time limit of one short engine call (inspect, create, list, remove...). */
const CALL_TIMEOUT_MS = 30_000;
/**
 * Time limit of removing one image: the engine deletes its layers from disk before it answers,
 * which under heavy disk use (builds, backups) takes far longer than a short call.
 */
const IMAGE_REMOVE_TIMEOUT_MS = 180_000;
/** CFS period of build containers; the CPU limit is a quota of it. */
const CPU_PERIOD_US = 100_000;
/** /dev/shm of build containers (counted in their memory). */
const BUILD_SHM_BYTES = 64 * 1024 * 1024;
/** Time limit of resolving a registry host named in a Dockerfile. */
const RESOLVE_TIMEOUT_MS = 10_000;
/** Extra time, beyond the stop grace period, given to the engine to kill and report back. */
const STOP_MARGIN_MS = 30_000;

/** A client certificate and the CA to trust, for an engine run with `--tlsverify`. */
export interface DockerTls {
  readonly ca: Buffer;
  readonly cert: Buffer;
  readonly key: Buffer;
}

/**
 * A dockerode client for `dockerHost`: `unix:///path/docker.sock`, `tcp://host:port`, or with `tls`
 * `https://host:port` (tcp:// too is then dialled with TLS, port 2376 by default); undefined means
 * the local socket /var/run/docker.sock. Throws on any other scheme.
 */
export function createDockerClient(dockerHost?: string, tls?: DockerTls): Dockerode {
  if (dockerHost === undefined || dockerHost === '') {
    // `host: undefined` stops docker-modem from preferring its own reading of DOCKER_HOST.
    return new Dockerode({ socketPath: '/var/run/docker.sock', host: undefined });
  }
  if (dockerHost.startsWith('unix://')) {
    return new Dockerode({ socketPath: dockerHost.slice('unix://'.length), host: undefined });
  }
  if (tls !== undefined && (dockerHost.startsWith('tcp://') || dockerHost.startsWith('https://'))) {
    const url = new URL(dockerHost);
    const port = url.port !== '' ? Number(url.port) : url.protocol === 'https:' ? 443 : 2376;
    return new Dockerode({ protocol: 'https', host: url.hostname, port, ca: tls.ca, cert: tls.cert, key: tls.key });
  }
  if (dockerHost.startsWith('tcp://')) {
    const url = new URL(dockerHost);
    // TLS (DOCKER_TLS_VERIFY / DOCKER_CERT_PATH, port 2376) is decided by docker-modem itself.
    return new Dockerode({ host: url.hostname, port: url.port === '' ? 2375 : Number(url.port) });
  }
  throw new Error(`DOCKER_HOST must be unix:///path or tcp://host:port (https://host:port with TLS), got "${dockerHost}"`);
}

/** The Docker-backed ContainerEngine for `dockerHost` (see createDockerClient). */
export function createDockerEngine(dockerHost?: string, options: DockerEngineOptions = {}, tls?: DockerTls): ContainerEngine {
  return new DockerEngine(createDockerClient(dockerHost, tls), options);
}

export interface DockerEngineOptions {
  /** Ports of the host that apps on a confined network may still open (the edge's public ports). */
  readonly appHostPorts?: readonly number[];
  /** Told once when a confined network's firewall cannot be installed (apps then run unconfined). */
  readonly warn?: (message: string) => void;
}

/** What the engine's host looks like, for build confinement (asked once). */
interface EngineHost {
  /** The engine runs on this machine (unix socket): its firewall and cgroups are ours to set. */
  local: boolean;
  cgroupDriver: string;
  cgroupVersion: '1' | '2';
}

/** ContainerEngine on a dockerode client; every call has a time limit. */
export class DockerEngine implements ContainerEngine {
  #docker: Dockerode;
  #host: Promise<EngineHost> | undefined;
  /** The sweep of build cgroups left by earlier runs (once per process). */
  #swept: Promise<void> | undefined;
  /** Network creations in flight, by name: the engine's duplicate check is not atomic, so concurrent callers share one. */
  readonly #ensuringNetworks = new Map<string, Promise<{ id: string }>>();

  readonly #options: DockerEngineOptions;
  /** Confined networks whose firewall is installed (or being installed), by network id. */
  readonly #confined = new Map<string, Promise<void>>();
  #warned = false;

  constructor(docker: Dockerode, options: DockerEngineOptions = {}) {
    this.#docker = docker;
    this.#options = options;
  }

  #engineHost(): Promise<EngineHost> {
    this.#host ??= withTimeout('info', CALL_TIMEOUT_MS, () => this.#docker.info() as Promise<{ CgroupDriver?: string; CgroupVersion?: string }>).then(
      (info) => ({
        local: isLocal(this.#docker),
        cgroupDriver: info.CgroupDriver ?? 'cgroupfs',
        cgroupVersion: info.CgroupVersion === '2' ? '2' : '1',
      }),
      (err: unknown) => {
        this.#host = undefined;
        throw err;
      },
    );
    return this.#host;
  }

  /**
   * The build API's sandbox parameters: limits, the network (firewall and bridge made ready), and
   * a pids-limited parent cgroup when the engine's host allows one (else a note in the output).
   */
  async #sandbox(sandbox: BuildSandbox, onOutput: (text: string) => void): Promise<{ params: Record<string, unknown>; cleanup: () => Promise<void> }> {
    const host = await this.#engineHost();
    const params: Record<string, unknown> = {
      memory: sandbox.memoryBytes,
      memswap: sandbox.memoryBytes, // no swap beyond the memory limit
      cpuperiod: CPU_PERIOD_US,
      cpuquota: Math.max(1000, Math.round((sandbox.nanoCpus / 1e9) * CPU_PERIOD_US)),
      shmsize: BUILD_SHM_BYTES,
    };
    if (sandbox.network.mode === 'none') {
      params['networkmode'] = 'none';
    } else {
      if (!host.local) {
        throw new Error('build confinement needs the engine on this machine (its firewall); with a remote DOCKER_HOST set SLIPWAY_BUILD_NETWORK=none');
      }
      try {
        await ensureBuildFirewall();
      } catch (err) {
        throw new Error(
          `the build network cannot be confined (${err instanceof Error ? err.message : String(err)}); run Slipway as root with iptables, or set SLIPWAY_BUILD_NETWORK=none`,
          { cause: err },
        );
      }
      const bridgeName = buildBridgeName(sandbox.network.name);
      await this.ensureNetwork({ name: sandbox.network.name, labels: sandbox.network.labels, isolated: true, bridgeName });
      params['networkmode'] = sandbox.network.name;
    }
    let cleanup = async (): Promise<void> => undefined;
    if (host.local && host.cgroupDriver === 'cgroupfs') {
      try {
        this.#swept ??= sweepBuildCgroups(host.cgroupVersion).catch(() => undefined);
        const cgroup = await createBuildCgroup(crypto.randomBytes(8).toString('hex'), sandbox.pidsLimit, host.cgroupVersion);
        params['cgroupparent'] = cgroup.cgroupParent;
        cleanup = () => cgroup.remove();
      } catch (err) {
        onOutput(`==> note: no pids limit on this build (${err instanceof Error ? err.message : String(err)})\n`);
      }
    } else {
      onOutput(`==> note: no pids limit on this build (it needs a local engine with the cgroupfs driver)\n`);
    }
    return { params, cleanup };
  }

  async ping(signal?: AbortSignal): Promise<{ version: string; apiVersion: string }> {
    const version = await withTimeout('version', CALL_TIMEOUT_MS, () => this.#docker.version(), signal);
    return { version: version.Version, apiVersion: version.ApiVersion };
  }

  async buildImage(options: BuildImageOptions): Promise<{ imageId: string }> {
    const { signal } = options;
    if (signal.aborted) throw abortError('build', signal);
    const dockerfile = options.dockerfile.replace(/\\/g, '/').replace(/^\.\//, '');
    // What the engine would fetch itself, from the host's network, is checked first (see dockerfile-policy).
    const text = options.dockerfileText ?? (await readDockerfile(options.contextDir, dockerfile));
    const resolve = (host: string): Promise<string[]> =>
      withTimeout(`resolving ${host}`, RESOLVE_TIMEOUT_MS, async () => (await lookup(host, { all: true, verbatim: true })).map((a) => a.address), signal);
    const buildArgs = options.buildArgs ?? {};
    const problem = (await dockerfileProblem(text, resolve, buildArgs)) ?? (await this.#baseImageProblem(text, resolve, signal, buildArgs));
    if (problem !== null) throw new EngineBuildError(`refused: ${problem}`, `refused: ${problem}`);
    const sandbox = await this.#sandbox(options.sandbox, options.onOutput);
    try {
      return await this.#build(options, dockerfile, sandbox.params);
    } finally {
      await sandbox.cleanup();
    }
  }

  /**
   * The ONBUILD triggers of the base images run in this build as if the Dockerfile held them, so
   * they are checked too: each FROM image (pulled first when the engine lacks it) is inspected.
   * A base image that can be neither found nor pulled ends the build here, with one clear message.
   */
  async #baseImageProblem(
    text: string,
    resolve: (host: string) => Promise<string[]>,
    signal: AbortSignal,
    buildArgs: Readonly<Record<string, string>>,
  ): Promise<string | null> {
    for (const fetch of dockerfileFetches(text, buildArgs)) {
      if (fetch.kind !== 'image' || fetch.instruction !== 'FROM') continue;
      let image = await this.#inspectImage(fetch.ref);
      if (image === null) {
        const failure = await this.#pull(fetch.ref, signal).then(
          () => null,
          (err: unknown) => {
            if (signal.aborted) throw abortError('build', signal);
            return err;
          },
        );
        image = await this.#inspectImage(fetch.ref);
        // Said once, here, rather than as the builder's raw error at each step that reports it.
        if (image === null && failure !== null) throw pullFailure(fetch.ref, failure);
      }
      const triggers = image?.Config?.OnBuild ?? [];
      if (triggers.length === 0) continue;
      const problem = await triggersProblem(triggers, resolve);
      if (problem !== null) return `line ${fetch.line}: FROM ${fetch.ref} refused: an ONBUILD trigger of that image: ${problem}`;
    }
    return null;
  }

  /** Pulls an image (as the builder would for FROM), following its progress to the end. */
  async #pull(ref: string, signal: AbortSignal): Promise<void> {
    const stream = (await this.#docker.pull(ref, { abortSignal: signal })) as Readable;
    await new Promise<void>((resolve, reject) => {
      this.#docker.modem.followProgress(stream, (err: Error | null) => (err === null ? resolve() : reject(err)));
    });
  }

  async #build(options: BuildImageOptions, dockerfile: string, sandbox: Record<string, unknown>): Promise<{ imageId: string }> {
    const { signal } = options;
    const context = await buildContext(options.contextDir, dockerfile, options.dockerfileText);
    const output = new OutputTail();

    let response: Readable;
    try {
      // version '1': the classic builder, whose JSON-lines progress stream is parsed below.
      response = (await this.#docker.buildImage(context, {
        t: options.tag,
        labels: options.labels,
        dockerfile,
        rm: true,
        forcerm: true,
        version: '1',
        ...sandbox,
        ...(options.buildArgs === undefined || Object.keys(options.buildArgs).length === 0 ? {} : { buildargs: options.buildArgs }),
        ...(options.target === undefined ? {} : { target: options.target }),
        abortSignal: signal,
      })) as Readable; // dockerode hands back the http.IncomingMessage
    } catch (err) {
      context.destroy();
      if (signal.aborted) throw abortError('build', signal);
      // The engine refused the build outright (e.g. no Dockerfile at that path): the user's fault.
      if (statusCode(err) !== undefined) {
        const message = engineMessage(err);
        throw new EngineBuildError(message, message, { cause: err });
      }
      throw err;
    }

    const onAbort = (): void => {
      // Closing the connection makes the engine cancel the build and remove its container.
      response.destroy();
      context.destroy();
    };
    signal.addEventListener('abort', onAbort, { once: true });
    let imageId: string | undefined;
    let failure: string | undefined;
    try {
      let pending = '';
      const decoder = new TextDecoder(); // keeps a UTF-8 character split across chunks whole
      const handle = (line: string): void => {
        if (line.trim() === '') return;
        const event = parseEvent(line);
        if (event.aux?.ID !== undefined) imageId = event.aux.ID;
        const text = eventText(event);
        if (text !== '') {
          output.add(text);
          options.onOutput(text);
        }
        if (event.error !== undefined || event.errorDetail !== undefined) {
          failure = event.errorDetail?.message ?? event.error ?? 'build failed';
        }
      };
      for await (const chunk of response) {
        pending += typeof chunk === 'string' ? chunk : decoder.decode(chunk as Uint8Array, { stream: true });
        const lines = pending.split('\n');
        pending = lines.pop() ?? '';
        for (const line of lines) handle(line);
      }
      handle(pending + decoder.decode());
    } catch (err) {
      if (signal.aborted) throw abortError('build', signal);
      throw err;
    } finally {
      signal.removeEventListener('abort', onAbort);
    }
    if (signal.aborted) throw abortError('build', signal);
    if (failure !== undefined) throw new EngineBuildError(`image build failed: ${failure}`, output.tail());

    if (imageId === undefined) {
      const image = await this.#inspectImage(options.tag);
      if (image === null) throw new EngineBuildError('image build ended without an image', output.tail());
      imageId = image.Id;
    }
    return { imageId };
  }

  async imageExposedPorts(image: string): Promise<number[]> {
    const info = await this.#inspectImage(image);
    if (info === null) throw new Error(`image ${image} does not exist`);
    const ports = new Set<number>();
    for (const key of Object.keys(info.Config?.ExposedPorts ?? {})) {
      const match = /^(\d+)(?:\/(\w+))?$/.exec(key);
      if (match !== null && (match[2] ?? 'tcp') === 'tcp') ports.add(Number(match[1]));
    }
    return [...ports].sort((a, b) => a - b);
  }

  async imageExists(image: string): Promise<boolean> {
    return (await this.#inspectImage(image)) !== null;
  }

  async removeImage(image: string): Promise<void> {
    await ignoreStatus([404], () =>
      withTimeout(`remove image ${image}`, IMAGE_REMOVE_TIMEOUT_MS, (s) =>
        this.#docker.getImage(image).remove({ force: true, abortSignal: s }),
      ),
    );
  }

  async runContainer(options: RunContainerOptions): Promise<ContainerInfo> {
    const port = `${options.containerPort}/tcp`;
    const env = Object.entries(options.env).map(([key, value]) => {
      if (key === '' || key.includes('=') || key.includes('\0') || value.includes('\0')) {
        throw new TypeError(`invalid environment variable ${JSON.stringify(key)}`);
      }
      return `${key}=${value}`;
    });
    const container = await withTimeout(`create container ${options.name}`, CALL_TIMEOUT_MS, (s) =>
      this.#docker.createContainer({
        name: options.name,
        Image: options.image,
        Env: env,
        Labels: options.labels,
        ExposedPorts: { [port]: {} },
        ...(options.command === undefined ? {} : { Cmd: [...options.command] }),
        ...(options.entrypoint === undefined ? {} : { Entrypoint: [...options.entrypoint] }),
        ...(options.workingDir === undefined ? {} : { WorkingDir: options.workingDir }),
        ...(options.user === undefined ? {} : { User: options.user }),
        ...(options.healthcheck === undefined ? {} : { Healthcheck: engineHealthcheck(options.healthcheck) }),
        ...(options.networkAliases === undefined ? {} : { NetworkingConfig: { EndpointsConfig: { [options.network]: { Aliases: [...options.networkAliases] } } } }),
        Tty: false, // keeps stdout/stderr multiplexed, which containerLogs demultiplexes
        AttachStdin: false,
        OpenStdin: false,
        HostConfig: {
          // HostPort '' lets the engine choose a free port; bound on loopback only (decisions §5).
          PortBindings: options.publish === false ? {} : { [port]: [{ HostIp: PUBLISH_HOST, HostPort: '' }] },
          RestartPolicy: { Name: options.restartOnCrash === false ? 'no' : 'unless-stopped' },
          Memory: options.memoryBytes,
          MemorySwap: options.memoryBytes, // no swap beyond the memory limit
          NanoCpus: options.nanoCpus,
          PidsLimit: options.pidsLimit,
          NetworkMode: options.network,
          CapDrop: ['ALL'],
          CapAdd: [...(options.capabilities ?? APP_CAPABILITIES)],
          // Setuid binaries and file capabilities can no longer raise a process's privileges.
          SecurityOpt: ['no-new-privileges'],
          LogConfig: { Type: 'json-file', Config: { 'max-size': APP_LOG_MAX_SIZE, 'max-file': String(APP_LOG_MAX_FILES) } },
          // An init (tini) as PID 1 forwards SIGTERM and reaps zombies: an app that ignores signals
          // as PID 1 would otherwise wait out the whole stop timeout.
          Init: true,
          Mounts: (options.volumes ?? []).map((v) => ({ Type: 'volume' as const, Source: v.source, Target: v.target, ReadOnly: v.readOnly === true })),
        },
        abortSignal: s,
      }),
    );
    try {
      for (const network of options.extraNetworks ?? []) await connectTo(this.#docker, network, container.id);
      if (options.aliasedNetwork !== undefined) await connectTo(this.#docker, options.aliasedNetwork.name, container.id, options.aliasedNetwork.aliases);
      if (options.start !== false) await withTimeout(`start container ${options.name}`, CALL_TIMEOUT_MS, (s) => container.start({ abortSignal: s }));
    } catch (err) {
      await this.removeContainer(container.id).catch(() => undefined);
      throw err;
    }
    const info = await this.inspectContainer(container.id);
    if (info === null) throw new Error(`container ${options.name} vanished right after it started`);
    return info;
  }

  async containerOutput(id: string, signal?: AbortSignal): Promise<OutputLine[]> {
    const buffer = await withTimeout(
      `logs of container ${id}`,
      CALL_TIMEOUT_MS,
      (s) => this.#docker.getContainer(id).logs({ stdout: true, stderr: true, timestamps: true, follow: false, abortSignal: s }),
      signal,
    );
    return parseStampedLogs(Buffer.isBuffer(buffer) ? buffer : Buffer.from(String(buffer)));
  }

  async containerExits(labels: Record<string, string>, sinceMs: number, untilMs: number, signal?: AbortSignal): Promise<ContainerExit[]> {
    // Whole seconds: a window that ends in the past makes the engine answer what it logged and close.
    const since = Math.floor(sinceMs / 1000);
    const until = Math.max(since, Math.floor(untilMs / 1000));
    const text = await withTimeout(
      'engine events',
      CALL_TIMEOUT_MS,
      async (s) => {
        const stream = await this.#docker.getEvents({ since, until, filters: { type: ['container'], event: ['die'], label: labelFilters(labels) }, abortSignal: s } as Dockerode.GetEventsOptions);
        let body = '';
        for await (const chunk of stream as AsyncIterable<Buffer | string>) body += chunk.toString();
        return body;
      },
      signal,
    );
    return parseDieEvents(text);
  }

  async keepRestarting(id: string): Promise<void> {
    await withTimeout(`update container ${id}`, CALL_TIMEOUT_MS, (s) =>
      this.#docker.getContainer(id).update({ RestartPolicy: { Name: 'unless-stopped' }, abortSignal: s }),
    );
  }

  async inspectContainer(id: string): Promise<ContainerInfo | null> {
    const info = await ignoreStatus([404], () =>
      withTimeout(`inspect container ${id}`, CALL_TIMEOUT_MS, (s) => this.#docker.getContainer(id).inspect({ abortSignal: s })),
    );
    return info === undefined ? null : fromInspect(info);
  }

  async startContainer(id: string): Promise<ContainerInfo> {
    await ignoreStatus([304], () =>
      withTimeout(`start container ${id}`, CALL_TIMEOUT_MS, (s) => this.#docker.getContainer(id).start({ abortSignal: s })),
    );
    const info = await this.inspectContainer(id);
    if (info === null) throw new Error(`container ${id} does not exist`);
    return info;
  }

  async stopContainer(id: string, timeoutSeconds: number): Promise<void> {
    const t = Math.max(0, Math.ceil(timeoutSeconds));
    await ignoreStatus([304, 404], () =>
      withTimeout(`stop container ${id}`, t * 1000 + STOP_MARGIN_MS, (s) =>
        this.#docker.getContainer(id).stop({ t, abortSignal: s }),
      ),
    );
  }

  async removeContainer(id: string): Promise<void> {
    // 409 here means a removal of the same container is already under way.
    await ignoreStatus([404, 409], () =>
      withTimeout(`remove container ${id}`, CALL_TIMEOUT_MS, (s) =>
        this.#docker.getContainer(id).remove({ force: true, v: true, abortSignal: s }),
      ),
    );
  }

  async containerStats(id: string, signal?: AbortSignal): Promise<ContainerStats | null> {
    const container = this.#docker.getContainer(id);
    const info = await ignoreStatus([404], () =>
      withTimeout(`inspect container ${id}`, CALL_TIMEOUT_MS, (s) => container.inspect({ abortSignal: s }), signal),
    );
    if (info === undefined || info.State.Status !== 'running') return null;
    // stream=false without one-shot: the engine takes two samples a second apart, so precpu_stats
    // is filled and the CPU figure covers that second.
    const sample = await ignoreStatus([404, 409], () =>
      withTimeout(`stats of container ${id}`, CALL_TIMEOUT_MS, // The typings omit abortSignal, which dockerode passes to the request.
      (s) => container.stats({ stream: false, abortSignal: s } as { stream: false }), signal),
    );
    if (sample === undefined) return null;
    return {
      ...statsFigures(sample as EngineStatsSample),
      restarts: info.RestartCount ?? 0,
      startedAt: new Date(info.State.StartedAt).toISOString(),
    };
  }

  async *containerLogs(
    id: string,
    options: { tail?: number; follow: boolean; signal?: AbortSignal; timestamps?: boolean },
  ): AsyncIterable<string> {
    const { signal } = options;
    if (signal?.aborted) return;
    const query = { stdout: true, stderr: true, timestamps: options.timestamps === true };
    const tail = options.tail === undefined ? {} : { tail: Math.max(0, Math.floor(options.tail)) };
    const demux = new LogDemuxer();
    const container = this.#docker.getContainer(id);

    if (!options.follow) {
      let buffer: Buffer;
      try {
        buffer = await withTimeout(`logs of container ${id}`, CALL_TIMEOUT_MS, (s) =>
          container.logs({ ...query, ...tail, follow: false, abortSignal: s }),
        signal);
      } catch (err) {
        if (signal?.aborted) return;
        throw err;
      }
      const text = demux.push(Buffer.isBuffer(buffer) ? buffer : Buffer.from(String(buffer))) + demux.end();
      if (text !== '') yield text;
      return;
    }

    // A follow stream may rightly stay quiet for hours: only the wait for its start is timed.
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(timeoutError(`logs of container ${id}`, CALL_TIMEOUT_MS)), CALL_TIMEOUT_MS);
    const onAbort = (): void => controller.abort(signal?.reason);
    signal?.addEventListener('abort', onAbort, { once: true });
    let stream: Readable | undefined;
    const destroy = (): void => {
      stream?.destroy();
    };
    controller.signal.addEventListener('abort', destroy, { once: true });
    try {
      try {
        stream = (await container.logs({ ...query, ...tail, follow: true, abortSignal: controller.signal })) as Readable;
      } catch (err) {
        if (signal?.aborted) return;
        if (controller.signal.aborted) throw controller.signal.reason;
        throw err;
      } finally {
        clearTimeout(timer);
      }
      try {
        for await (const chunk of stream) {
          const text = demux.push(Buffer.isBuffer(chunk) ? chunk : Buffer.from(String(chunk)));
          if (text !== '') yield text;
        }
      } catch (err) {
        if (signal?.aborted) return;
        throw err;
      }
      const rest = demux.end();
      if (rest !== '') yield rest;
    } finally {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      controller.signal.removeEventListener('abort', destroy);
      stream?.destroy();
    }
  }

  async listContainers(labels: Record<string, string>): Promise<ContainerInfo[]> {
    const list = await withTimeout('list containers', CALL_TIMEOUT_MS, (s) =>
      this.#docker.listContainers({ all: true, filters: { label: labelFilters(labels) }, abortSignal: s }),
    );
    return list.map((c) => {
      const published = (c.Ports ?? []).find((p) => p.Type === 'tcp' && p.IP === PUBLISH_HOST && p.PublicPort > 0);
      const exited = /^(?:Exited|Restarting) \((-?\d+)\)/.exec(c.Status ?? '');
      return {
        id: c.Id,
        name: (c.Names?.[0] ?? '').replace(/^\//, ''),
        running: c.State === 'running',
        exitCode: c.State !== 'running' && exited !== null ? Number(exited[1]) : null,
        hostPort: published?.PublicPort ?? null,
        upstream: published === undefined ? null : { host: PUBLISH_HOST, port: published.PublicPort },
        labels: c.Labels ?? {},
        state: c.State,
        volumes: (c.Mounts ?? []).flatMap((m) => (m.Type === 'volume' && m.RW && m.Name !== undefined ? [m.Name] : [])),
        ...healthOfStatus(c.Status),
      };
    });
  }

  async listImages(labels: Record<string, string>): Promise<ImageInfo[]> {
    const list = await withTimeout('list images', CALL_TIMEOUT_MS, (s) =>
      this.#docker.listImages({ filters: { label: labelFilters(labels) }, abortSignal: s }),
    );
    return list.map((i) => ({
      id: i.Id,
      tags: (i.RepoTags ?? []).filter((t) => t !== '<none>:<none>'),
      labels: i.Labels ?? {},
    }));
  }

  async ensureNetwork(options: NetworkOptions): Promise<{ id: string }> {
    // Two releases starting at once (two first deploys) both found no network and both created one:
    // the engine then refuses the name as ambiguous, for every later release of the installation.
    const inFlight = this.#ensuringNetworks.get(options.name);
    const ensuring = inFlight ?? this.#ensureNetwork(options).finally(() => this.#ensuringNetworks.delete(options.name));
    if (inFlight === undefined) this.#ensuringNetworks.set(options.name, ensuring);
    if (options.confined !== true) return ensuring;
    const network = await ensuring;
    await this.#confine(network.id, options.name, options.internal === true);
    return network;
  }

  /**
   * Installs the app firewall for a network (once per network and process). The engine must run on
   * this machine; when it does not, or iptables cannot be run (not root), the apps run unconfined
   * and `warn` is told once: a deploy never fails for it.
   */
  #confine(networkId: string, name: string, internal: boolean): Promise<void> {
    let confining = this.#confined.get(networkId);
    if (confining === undefined) {
      confining = (async () => {
        const host = await this.#engineHost();
        if (!host.local) throw new Error('the engine is not on this machine');
        const info = await this.#inspectNetwork(name);
        if (info === null) throw new Error(`network ${name} is gone`);
        await ensureAppFirewall(bridgeOf(info), this.#options.appHostPorts ?? []);
        // The engine's own isolation of an internal network lapses while it creates any network (see internal-guard).
        if (internal) await ensureInternalGuard(bridgeOf(info));
      })().catch((err: unknown) => {
        this.#confined.delete(networkId);
        if (!this.#warned) {
          this.#warned = true;
          this.#options.warn?.(`app containers are not confined (${err instanceof Error ? err.message : String(err)}): they can reach cloud metadata and the host; run Slipway as root with iptables`);
        }
      });
      this.#confined.set(networkId, confining);
    }
    return confining;
  }

  async #ensureNetwork(options: NetworkOptions): Promise<{ id: string }> {
    const existing = await this.#inspectNetwork(options.name);
    if (existing !== null) return checkNetwork(existing, options);
    try {
      const created = await withTimeout(`create network ${options.name}`, CALL_TIMEOUT_MS, (s) =>
        this.#docker.createNetwork({
          Name: options.name,
          Driver: 'bridge',
          CheckDuplicate: true,
          Labels: options.labels,
          ...(options.internal === true ? { Internal: true } : {}),
          ...(options.subnet === undefined ? {} : { IPAM: { Driver: 'default', Config: [{ Subnet: options.subnet }] } }),
          Options: {
            ...(options.isolated ? { 'com.docker.network.bridge.enable_icc': 'false' } : {}),
            ...(options.bridgeName === undefined ? {} : { 'com.docker.network.bridge.name': options.bridgeName }),
          },
          abortSignal: s,
        }),
      );
      return { id: created.id };
    } catch (err) {
      // 409: another caller created it first; use theirs.
      if (statusCode(err) !== 409) throw err;
      const raced = await this.#inspectNetwork(options.name);
      if (raced === null) throw err;
      return checkNetwork(raced, options);
    }
  }

  async removeNetwork(name: string): Promise<void> {
    // By name or id (the sweep of stray networks passes ids).
    const info = (await ignoreStatus([404], () =>
      withTimeout(`inspect network ${name}`, CALL_TIMEOUT_MS, () => this.#docker.getNetwork(name).inspect()),
    )) as Dockerode.NetworkInspectInfo | undefined;
    if (info === undefined) return;
    await ignoreStatus([404], () =>
      withTimeout(`remove network ${name}`, CALL_TIMEOUT_MS, (s) => this.#docker.getNetwork(name).remove({ abortSignal: s })),
    );
    // An app network's firewall goes with it (its chains are named after the bridge, which is gone).
    const bridge = bridgeOf(info);
    this.#confined.delete(info.Id);
    if (bridge.startsWith('br-') && (await this.#engineHost()).local) {
      await removeAppFirewall(bridge).catch(() => undefined);
      if (info.Internal === true) await removeInternalGuard(bridge).catch(() => undefined);
    }
  }

  async listNetworks(labels: Record<string, string>): Promise<NetworkInfo[]> {
    const list = await withTimeout('list networks', CALL_TIMEOUT_MS, (s) =>
      this.#docker.listNetworks({ filters: { label: labelFilters(labels) }, abortSignal: s }),
    );
    return list.map((n) => ({ id: n.Id, name: n.Name, labels: n.Labels ?? {} }));
  }

  async ensureVolume(options: VolumeOptions): Promise<void> {
    // Creating a volume that exists is a no-op for the engine: it answers with the existing one.
    await withTimeout(`create volume ${options.name}`, CALL_TIMEOUT_MS, (s) =>
      this.#docker.createVolume({ Name: options.name, Driver: 'local', Labels: options.labels, abortSignal: s }),
    );
  }

  async removeVolume(name: string): Promise<void> {
    await ignoreStatus([404], () =>
      withTimeout(`remove volume ${name}`, CALL_TIMEOUT_MS, (s) => this.#docker.getVolume(name).remove({ abortSignal: s })),
    );
  }

  async listVolumes(labels: Record<string, string>): Promise<VolumeInfo[]> {
    const list = await withTimeout('list volumes', CALL_TIMEOUT_MS, (s) =>
      this.#docker.listVolumes({ filters: { label: labelFilters(labels) }, abortSignal: s }),
    );
    return (list.Volumes ?? []).map((v) => ({ name: v.Name, labels: v.Labels ?? {} }));
  }

  execInContainer(id: string, argv: readonly string[], options: { env?: Record<string, string>; timeoutMs: number }): Promise<ExecResult> {
    return execIn(this.#docker, id, argv, options);
  }

  execStream(id: string, argv: readonly string[], options: { env?: Record<string, string>; stdin?: Readable; signal: AbortSignal; onStderr?: (text: string) => void }): Promise<ExecStream> {
    return execStream(this.#docker, id, argv, options);
  }

  connectNetwork(network: string, containerId: string, aliases?: readonly string[]): Promise<void> {
    return connectTo(this.#docker, network, containerId, aliases);
  }

  disconnectNetwork(network: string, containerId: string): Promise<void> {
    return disconnectFrom(this.#docker, network, containerId);
  }

  async containerAddress(id: string, network: string): Promise<string | null> {
    const info = await ignoreStatus([404], () =>
      withTimeout(`inspect container ${id}`, CALL_TIMEOUT_MS, (s) => this.#docker.getContainer(id).inspect({ abortSignal: s })),
    );
    const address = info?.NetworkSettings?.Networks?.[network]?.IPAddress;
    return address === undefined || address === '' ? null : address;
  }

  pullImage(ref: string, signal: AbortSignal): Promise<void> {
    return pull(this.#docker, ref, signal);
  }

  async #inspectNetwork(name: string): Promise<Dockerode.NetworkInspectInfo | null> {
    const info = await ignoreStatus([404], () =>
      withTimeout(`inspect network ${name}`, CALL_TIMEOUT_MS, () => this.#docker.getNetwork(name).inspect()),
    );
    // A lookup by name also matches an id prefix: only an exact name counts.
    return info !== undefined && info.Name === name ? (info as Dockerode.NetworkInspectInfo) : null;
  }

  async #inspectImage(image: string): Promise<Dockerode.ImageInspectInfo | null> {
    const info = await ignoreStatus([404], () =>
      withTimeout(`inspect image ${image}`, CALL_TIMEOUT_MS, () => this.#docker.getImage(image).inspect()),
    );
    return info ?? null;
  }
}

/** Whether the client talks to the engine over a unix socket, i.e. on this machine. */
function isLocal(docker: Dockerode): boolean {
  const socketPath: unknown = (docker.modem as { socketPath?: unknown }).socketPath;
  return typeof socketPath === 'string' && socketPath !== '';
}

/** A health check as the engine takes it (durations in nanoseconds). */
function engineHealthcheck(check: NonNullable<RunContainerOptions['healthcheck']>): Dockerode.HealthConfig {
  const ns = (ms: number): number => Math.round(ms * 1e6);
  return { Test: [...check.test], Interval: ns(check.intervalMs), Timeout: ns(check.timeoutMs), Retries: check.retries, StartPeriod: ns(check.startPeriodMs) };
}

/** The health the engine's list shows in a container's status (`Up 3 s (healthy)`); none when it has no check. */
function healthOfStatus(status: string | undefined): { health?: string } {
  const found = /\((healthy|unhealthy|health: starting)\)/.exec(status ?? '');
  return found?.[1] === undefined ? {} : { health: found[1] === 'health: starting' ? 'starting' : found[1] };
}
