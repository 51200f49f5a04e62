// An in-memory container engine for lifecycle unit tests: images are names, containers are tiny HTTP servers on loopback.
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import type { Upstream } from '../../src/core/upstream.js';
import {
  EngineBuildError,
  type BuildImageOptions,
  type ContainerEngine,
  type ContainerInfo,
  type ContainerStats,
  type ImageInfo,
  type NetworkInfo,
  type NetworkOptions,
  type RunContainerOptions,
  type VolumeInfo,
  type VolumeOptions,
} from '../../src/runtime/engine.js';

interface FakeContainer {
  readonly id: string;
  readonly name: string;
  readonly image: string;
  readonly labels: Record<string, string>;
  server: http.Server | null;
  upstream: Upstream | null;
  exitCode: number | null;
}

/**
 * What a Dockerfile line makes the fake do: `FAIL` fails the build; `WAIT` holds it until
 * `releaseBuilds()` (or its abort); `UNHEALTHY` gives an image whose app answers 500 on every path.
 * An image's `silent` flag (set by a test, read at each request) makes its apps close every
 * connection without an answer, as an app still starting up does.
 */
export class FakeRuntime implements ContainerEngine {
  readonly images = new Map<string, { unhealthy: boolean; silent?: boolean }>();
  readonly containers = new Map<string, FakeContainer>();
  readonly networks = new Map<string, NetworkInfo>();
  readonly volumes = new Map<string, VolumeInfo>();
  /** The options of every container run and image build, in order (env, volumes, build arguments…). */
  readonly runs: RunContainerOptions[] = [];
  readonly builds: Array<Omit<BuildImageOptions, 'onOutput' | 'signal'>> = [];
  /** Every call, in order (`runContainer <image>`, `stopContainer <id>`…), for assertions. */
  readonly calls: string[] = [];
  /** While true, the engine does not answer (a restarting dockerd): calls that reach it throw. */
  down = false;
  /** How long each container start (startContainer, runContainer) takes. */
  startDelayMs = 0;
  /** Container starts under way now, and the most there ever were at once. */
  startsInFlight = 0;
  maxStartsInFlight = 0;
  #held: Array<() => void> = [];
  #next = 1;

  #answer(): void {
    if (this.down) throw new Error('connect ENOENT /var/run/docker.sock');
  }

  async ping(): Promise<{ version: string; apiVersion: string }> {
    this.#answer();
    return { version: 'fake', apiVersion: 'fake' };
  }

  async buildImage(options: BuildImageOptions): Promise<{ imageId: string }> {
    this.calls.push(`buildImage ${options.tag}`);
    const { onOutput: _onOutput, signal: _signal, ...recorded } = options;
    this.builds.push(recorded);
    const dockerfile = fs.readFileSync(path.join(options.contextDir, options.dockerfile), 'utf8');
    options.onOutput('fake build\n');
    if (/^WAIT$/m.test(dockerfile)) {
      await new Promise<void>((resolve, reject) => {
        const abort = (): void => {
          this.#held = this.#held.filter((held) => held !== resolve);
          reject(Object.assign(new Error('the build was aborted'), { name: 'AbortError' }));
        };
        if (options.signal.aborted) return abort();
        options.signal.addEventListener('abort', abort, { once: true });
        this.#held.push(resolve);
      });
    }
    options.signal.throwIfAborted();
    if (/^FAIL$/m.test(dockerfile)) throw new EngineBuildError('the build failed', 'FAIL: the fake build step failed');
    this.images.set(options.tag, { unhealthy: /^UNHEALTHY$/m.test(dockerfile) });
    return { imageId: `sha256:${options.tag}` };
  }

  /** Lets every build held by a `WAIT` line go on. */
  releaseBuilds(): void {
    for (const release of this.#held.splice(0)) release();
  }

  /** How many builds wait on a `WAIT` line. */
  get heldBuilds(): number {
    return this.#held.length;
  }

  async imageExposedPorts(): Promise<number[]> {
    return [8080];
  }

  async imageExists(image: string): Promise<boolean> {
    this.#answer();
    return this.images.has(image);
  }

  async removeImage(image: string): Promise<void> {
    this.calls.push(`removeImage ${image}`);
    this.images.delete(image);
  }

  async runContainer(options: RunContainerOptions): Promise<ContainerInfo> {
    this.#answer();
    this.calls.push(`runContainer ${options.image}`);
    this.runs.push(options);
    if (!this.images.has(options.image)) throw new Error(`no such image: ${options.image}`);
    const container: FakeContainer = {
      id: `fake-${this.#next++}`,
      name: options.name,
      image: options.image,
      labels: { ...options.labels },
      server: null,
      upstream: null,
      exitCode: null,
    };
    this.containers.set(container.id, container);
    await this.#starting(() => this.#start(container));
    return this.#info(container);
  }

  async inspectContainer(id: string): Promise<ContainerInfo | null> {
    this.#answer();
    const container = this.containers.get(id);
    return container === undefined ? null : this.#info(container);
  }

  async startContainer(id: string): Promise<ContainerInfo> {
    this.#answer();
    this.calls.push(`startContainer ${id}`);
    const container = this.containers.get(id);
    if (container === undefined) throw new Error(`no such container: ${id}`);
    if (container.server === null) await this.#starting(() => this.#start(container));
    return this.#info(container);
  }

  /** Counts a start in flight while it runs (with the configured delay). */
  async #starting(start: () => Promise<void>): Promise<void> {
    this.startsInFlight += 1;
    this.maxStartsInFlight = Math.max(this.maxStartsInFlight, this.startsInFlight);
    try {
      if (this.startDelayMs > 0) await new Promise((resolve) => setTimeout(resolve, this.startDelayMs));
      await start();
    } finally {
      this.startsInFlight -= 1;
    }
  }

  async stopContainer(id: string): Promise<void> {
    this.calls.push(`stopContainer ${id}`);
    const container = this.containers.get(id);
    if (container !== undefined) await this.#halt(container, 0);
  }

  async removeContainer(id: string): Promise<void> {
    this.calls.push(`removeContainer ${id}`);
    const container = this.containers.get(id);
    if (container === undefined) return;
    await this.#halt(container, 137);
    this.containers.delete(id);
  }

  /** The engine restarting a crashed container (restart policy): it comes back on another port. */
  async crash(id: string): Promise<void> {
    const container = this.containers.get(id);
    if (container === undefined) throw new Error(`no such container: ${id}`);
    const old = container.server;
    await this.#start(container);
    await new Promise<void>((resolve) => (old === null ? resolve() : old.close(() => resolve())));
  }

  /** A container removed behind Slipway's back (or lost with the engine's state). */
  async vanish(id: string): Promise<void> {
    const container = this.containers.get(id);
    if (container !== undefined) await this.#halt(container, 137);
    this.containers.delete(id);
  }

  async containerStats(id: string): Promise<ContainerStats | null> {
    const container = this.containers.get(id);
    if (container?.server == null) return null;
    return { cpuPercent: 0, memoryBytes: 1 << 20, memoryLimitBytes: 256 << 20, networkRxBytes: 0, networkTxBytes: 0, restarts: 0, startedAt: new Date(0).toISOString() };
  }

  async *containerLogs(id: string, options?: { timestamps?: boolean }): AsyncIterable<string> {
    const container = this.containers.get(id);
    if (container === undefined) throw new Error(`no such container: ${id}`);
    yield `${options?.timestamps === true ? `${new Date().toISOString()} ` : ''}log of ${container.name}\n`;
  }

  async listContainers(labels: Record<string, string>): Promise<ContainerInfo[]> {
    this.#answer();
    return [...this.containers.values()].filter((c) => Object.entries(labels).every(([k, v]) => c.labels[k] === v)).map((c) => this.#info(c));
  }

  async listImages(): Promise<ImageInfo[]> {
    return [...this.images.keys()].map((tag) => ({ id: `sha256:${tag}`, tags: [tag], labels: {} }));
  }

  async ensureNetwork(options: NetworkOptions): Promise<{ id: string }> {
    const existing = this.networks.get(options.name);
    if (existing !== undefined) return { id: existing.id };
    this.networks.set(options.name, { id: `net-${options.name}`, name: options.name, labels: options.labels });
    return { id: `net-${options.name}` };
  }

  async removeNetwork(name: string): Promise<void> {
    for (const [key, network] of this.networks) if (network.id === name || network.name === name) this.networks.delete(key);
  }

  async listNetworks(labels: Record<string, string>): Promise<NetworkInfo[]> {
    return [...this.networks.values()].filter((n) => Object.entries(labels).every(([k, v]) => n.labels[k] === v));
  }

  async ensureVolume(options: VolumeOptions): Promise<void> {
    if (!this.volumes.has(options.name)) this.volumes.set(options.name, { name: options.name, labels: options.labels });
  }

  async removeVolume(name: string): Promise<void> {
    this.volumes.delete(name);
  }

  async listVolumes(labels: Record<string, string>): Promise<VolumeInfo[]> {
    return [...this.volumes.values()].filter((v) => Object.entries(labels).every(([k, val]) => v.labels[k] === val));
  }

  /** Running containers of a deployment. */
  running(deploymentId: string): FakeContainer[] {
    return [...this.containers.values()].filter((c) => c.server !== null && c.labels['dev.slipway.deployment'] === deploymentId);
  }

  /** Stops every container's server (end of a test). */
  async close(): Promise<void> {
    for (const container of this.containers.values()) await this.#halt(container, 0);
  }

  async #start(container: FakeContainer): Promise<void> {
    const unhealthy = this.images.get(container.image)?.unhealthy ?? false;
    const server = http.createServer((req, res) => {
      if (this.images.get(container.image)?.silent === true) {
        req.socket.destroy();
        return;
      }
      res.writeHead(unhealthy ? 500 : 200, { 'content-type': 'text/plain' });
      res.end(`${container.labels['dev.slipway.build'] ?? ''}\n`);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
    container.server = server;
    container.upstream = { host: '127.0.0.1', port: (server.address() as AddressInfo).port };
    container.exitCode = null;
  }

  async #halt(container: FakeContainer, exitCode: number): Promise<void> {
    const server = container.server;
    container.server = null;
    container.upstream = null;
    container.exitCode = exitCode;
    if (server !== null) {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  }

  #info(c: FakeContainer): ContainerInfo {
    const running = c.server !== null;
    return {
      id: c.id,
      name: c.name,
      running,
      exitCode: running ? null : c.exitCode,
      hostPort: c.upstream?.port ?? null,
      upstream: c.upstream,
      labels: { ...c.labels },
      state: running ? 'running' : 'exited',
    };
  }
}
