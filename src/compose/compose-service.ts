// Step three, per service: one compose service checked against §21's lists and read into what Slipway builds and runs.
import type { SetHealthcheck, SetService, SetVolume } from '../runtime/release-set.js';
import type { ComposeProblem } from './compose-problems.js';
import { REFUSED_SERVICE_KEYS, SUPPORTED_BUILD_KEYS, SUPPORTED_SERVICE_KEYS, isExtension } from './compose-keys.js';
import { asMap, parseEnvFile, readArgv, readDuration, readEnvironment } from './compose-values.js';

/** Where a service's image comes from: built from the source, or an image reference. */
export type ServiceSource =
  | { readonly kind: 'build'; readonly context: string; readonly dockerfile: string; readonly args: Readonly<Record<string, string>>; readonly target?: string | undefined }
  | { readonly kind: 'image'; readonly image: string };

/** A file of the source (secret or config) put read-only into a service's containers. */
export interface ServiceFile {
  /** Path inside the source. */
  readonly source: string;
  /** Absolute path inside the container. */
  readonly target: string;
}

/** One compose service as Slipway runs it, before its image exists: a set's service with where its image comes from, and its files. */
export type ComposeService = Omit<SetService, 'image'> & {
  readonly source: ServiceSource;
  readonly files: readonly ServiceFile[];
};

/** What a service may refer to at the top level of the file, and how to look into the source. */
export interface ServiceScope {
  /** Named volumes declared at the top level. */
  readonly volumes: ReadonlySet<string>;
  /** Top-level secrets and configs with their file in the source. */
  readonly secrets: ReadonlyMap<string, string>;
  readonly configs: ReadonlyMap<string, string>;
  /** Services started with the set (those without `profiles`). */
  readonly started: ReadonlySet<string>;
  /** Services declared (started or not). */
  readonly declared: ReadonlySet<string>;
  /** Why a path of the source may not be used (outside it, through a symlink out…); undefined when it may. */
  pathProblem(relative: string): string | undefined;
  /** A file of the source as text; undefined when it does not exist. */
  readSource(relative: string): string | undefined;
  lineOf(path: readonly string[]): number | undefined;
}

/** The outcome of reading one service: the service unless a problem was found, and what it ignores. */
export interface ServiceReading {
  readonly service?: ComposeService;
  readonly problems: ComposeProblem[];
  /** Warning lines for the build log, one per ignored key. */
  readonly warnings: string[];
}

/** Largest replica count of a service (as for a deployment). */
const MAX_REPLICAS = 20;

const isPort = (n: number): boolean => Number.isInteger(n) && n >= 1 && n <= 65535;

/** Checks and reads service `name` of the file. */
export function readService(name: string, raw: unknown, scope: ServiceScope): ServiceReading {
  const problems: ComposeProblem[] = [];
  const warnings: string[] = [];
  const line = (...keys: string[]): number | undefined => scope.lineOf(['services', name, ...keys]);
  const refuse = (key: string, message: string, ...at: string[]): void => {
    problems.push({ service: name, key, message, line: line(...(at.length === 0 ? [key.split('.')[0] ?? key] : at)) });
  };
  const ignore = (key: string): void => {
    const at = line(...key.split('.'));
    warnings.push(`warning: service "${name}": "${key}" is ignored${at === undefined ? '' : ` (line ${at})`}`);
  };
  const data = asMap(raw);
  if (data === undefined) {
    refuse('services', 'a service must be a mapping', name);
    return { problems, warnings };
  }
  for (const [key, value] of Object.entries(data)) {
    if (REFUSED_SERVICE_KEYS.has(key)) {
      if (value !== false && value !== null) refuse(key, `"${key}" is refused: it would give the service the host's privileges or namespaces`);
    } else if (!SUPPORTED_SERVICE_KEYS.has(key) && !isExtension(key) && key !== 'profiles') ignore(key);
  }

  const source = readSource(name, data, scope, refuse, ignore);
  const command = readArgvKey(data, 'command', refuse);
  const entrypoint = readArgvKey(data, 'entrypoint', refuse);
  const environment = readEnv(data, scope, refuse);
  const healthcheck = readHealthcheck(data['healthcheck'], refuse, ignore);
  const dependsOn = readDependsOn(name, data['depends_on'], scope, refuse, ignore, warnings);
  const replicas = readDeploy(data['deploy'], refuse, ignore);
  const hostPartIgnored = (entry: string): void => {
    const at = line('ports');
    warnings.push(`warning: service "${name}": "ports" ${entry}: the host port is not published (nothing is, on any host); the container port is used${at === undefined ? '' : ` (line ${at})`}`);
  };
  const ports = readPorts(data, refuse, ignore, hostPartIgnored);
  const volumes = readVolumes(data['volumes'], scope, refuse, ignore);
  const files = [...readFiles('secrets', data['secrets'], scope.secrets, refuse), ...readFiles('configs', data['configs'], scope.configs, refuse)];
  const workingDir = readString(data, 'working_dir', refuse);
  const user = data['user'] === undefined ? undefined : typeof data['user'] === 'number' ? String(data['user']) : readString(data, 'user', refuse);
  if (problems.length > 0 || source === undefined) return { problems, warnings };
  return {
    service: { name, source, command, entrypoint, environment, healthcheck, dependsOn, replicas, ports, volumes, files, workingDir, user },
    problems,
    warnings,
  };
}

type Refuse = (key: string, message: string, ...at: string[]) => void;
type Ignore = (key: string) => void;

function readString(data: Record<string, unknown>, key: string, refuse: Refuse): string | undefined {
  const value = data[key];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'string') {
    refuse(key, `"${key}" must be a string`);
    return undefined;
  }
  return value;
}

function readArgvKey(data: Record<string, unknown>, key: string, refuse: Refuse): string[] | undefined {
  const value = data[key];
  if (value === undefined || value === null) return undefined;
  const argv = readArgv(value);
  if (argv === undefined) refuse(key, `"${key}" must be a string or a list of strings`);
  return argv;
}

function readSource(name: string, data: Record<string, unknown>, scope: ServiceScope, refuse: Refuse, ignore: Ignore): ServiceSource | undefined {
  const build = data['build'];
  const image = data['image'];
  if (build !== undefined && build !== null) {
    const spec = typeof build === 'string' ? { context: build } : asMap(build);
    if (spec === undefined) {
      refuse('build', '"build" must be a path or a mapping');
      return undefined;
    }
    for (const key of Object.keys(spec)) if (!SUPPORTED_BUILD_KEYS.has(key) && !isExtension(key)) ignore(`build.${key}`);
    const context = spec['context'] === undefined ? '.' : spec['context'];
    const dockerfile = spec['dockerfile'] === undefined ? 'Dockerfile' : spec['dockerfile'];
    if (typeof context !== 'string' || typeof dockerfile !== 'string') {
      refuse('build.context', '"build.context" and "build.dockerfile" must be strings', 'build');
      return undefined;
    }
    const outside = scope.pathProblem(context);
    if (outside !== undefined) {
      refuse('build.context', `the build context "${context}" ${outside}`, 'build');
      return undefined;
    }
    const dockerfilePath = joinRelative(context, dockerfile);
    const dockerfileOutside = scope.pathProblem(dockerfilePath);
    if (dockerfileOutside !== undefined) {
      refuse('build.dockerfile', `the Dockerfile "${dockerfile}" ${dockerfileOutside}`, 'build');
      return undefined;
    }
    const args = readEnvironment(spec['args'] ?? {});
    if (args === undefined) refuse('build.args', '"build.args" must be a list of KEY=value or a mapping', 'build');
    const target = spec['target'];
    if (target !== undefined && typeof target !== 'string') refuse('build.target', '"build.target" must be a string', 'build');
    return { kind: 'build', context: normalizeRelative(context), dockerfile, args: args ?? {}, target: typeof target === 'string' ? target : undefined };
  }
  if (typeof image === 'string' && image.trim() !== '') return { kind: 'image', image: image.trim() };
  refuse(image === undefined ? 'image' : 'image', `service "${name}" needs "image" or "build"`, ...(image === undefined ? [] : ['image']));
  return undefined;
}

/** `a/b` joined with `c` as a path of the source (forward slashes, no leading `./`). */
export function joinRelative(dir: string, file: string): string {
  return normalizeRelative(`${dir.replace(/\/+$/, '')}/${file}`);
}

/** A relative path written with forward slashes and without `.` segments (`..` kept, for the checks to refuse). */
export function normalizeRelative(p: string): string {
  const parts: string[] = [];
  for (const part of p.replace(/\\/g, '/').split('/')) {
    if (part === '' || part === '.') continue;
    parts.push(part);
  }
  return parts.length === 0 ? '.' : parts.join('/');
}

function readEnv(data: Record<string, unknown>, scope: ServiceScope, refuse: Refuse): Record<string, string> {
  const env: Record<string, string> = {};
  const files = data['env_file'];
  if (files !== undefined && files !== null) {
    const list = Array.isArray(files) ? files : [files];
    for (const entry of list) {
      const spec = typeof entry === 'string' ? { path: entry, required: true } : asMap(entry);
      const file = spec?.['path'];
      if (typeof file !== 'string') {
        refuse('env_file', '"env_file" must be a path or a list of paths');
        continue;
      }
      const outside = scope.pathProblem(file);
      if (outside !== undefined) {
        refuse('env_file', `the env_file "${file}" ${outside}`);
        continue;
      }
      const text = scope.readSource(normalizeRelative(file));
      if (text === undefined) {
        if (spec?.['required'] !== false) refuse('env_file', `the env_file "${file}" is not in the source`);
        continue;
      }
      Object.assign(env, parseEnvFile(text));
    }
  }
  if (data['environment'] !== undefined && data['environment'] !== null) {
    const own = readEnvironment(data['environment']);
    if (own === undefined) refuse('environment', '"environment" must be a list of KEY=value or a mapping of scalars');
    else Object.assign(env, own);
  }
  return env;
}

function readHealthcheck(raw: unknown, refuse: Refuse, ignore: Ignore): SetHealthcheck | undefined {
  if (raw === undefined || raw === null) return undefined;
  const spec = asMap(raw);
  if (spec === undefined) {
    refuse('healthcheck', '"healthcheck" must be a mapping');
    return undefined;
  }
  if (spec['disable'] === true) return undefined;
  for (const key of Object.keys(spec)) {
    if (!['test', 'interval', 'timeout', 'retries', 'start_period', 'disable'].includes(key)) ignore(`healthcheck.${key}`);
  }
  const testRaw = spec['test'];
  let test: string[] | undefined;
  if (typeof testRaw === 'string') test = ['CMD-SHELL', testRaw];
  else if (Array.isArray(testRaw) && testRaw.every((t) => typeof t === 'string') && testRaw.length > 0) test = testRaw as string[];
  if (test === undefined || !['CMD', 'CMD-SHELL', 'NONE'].includes(test[0] ?? '')) {
    refuse('healthcheck.test', '"healthcheck.test" must be a string or a list starting with CMD, CMD-SHELL or NONE', 'healthcheck');
    return undefined;
  }
  if (test[0] === 'NONE') return undefined;
  const duration = (key: string, fallback: number): number => {
    if (spec[key] === undefined) return fallback;
    const ms = readDuration(spec[key]);
    if (ms === undefined) {
      refuse(`healthcheck.${key}`, `"healthcheck.${key}" must be a duration such as 10s or 1m30s`, 'healthcheck');
      return fallback;
    }
    return ms;
  };
  const retries = spec['retries'] === undefined ? 3 : Number(spec['retries']);
  if (!Number.isInteger(retries) || retries < 1 || retries > 100) refuse('healthcheck.retries', '"healthcheck.retries" must be a whole number from 1 to 100', 'healthcheck');
  return { test, intervalMs: duration('interval', 30_000), timeoutMs: duration('timeout', 30_000), retries, startPeriodMs: duration('start_period', 0) };
}

function readDependsOn(
  name: string,
  raw: unknown,
  scope: ServiceScope,
  refuse: Refuse,
  ignore: Ignore,
  warnings: string[],
): Array<{ service: string; condition: 'service_started' | 'service_healthy' }> {
  if (raw === undefined || raw === null) return [];
  const entries: Array<[string, unknown]> = Array.isArray(raw) ? raw.map((s) => [String(s), undefined]) : Object.entries(asMap(raw) ?? {});
  if (!Array.isArray(raw) && asMap(raw) === undefined) refuse('depends_on', '"depends_on" must be a list of services or a mapping');
  const out: Array<{ service: string; condition: 'service_started' | 'service_healthy' }> = [];
  for (const [service, spec] of entries) {
    if (!scope.declared.has(service)) {
      refuse('depends_on', `"depends_on" names "${service}", which is not a service of the file`);
      continue;
    }
    if (service === name) {
      refuse('depends_on', `the service depends on itself`);
      continue;
    }
    if (!scope.started.has(service)) {
      warnings.push(`warning: service "${name}": "depends_on" names "${service}", which has profiles and is not started: ignored`);
      continue;
    }
    const condition = asMap(spec)?.['condition'];
    for (const key of Object.keys(asMap(spec) ?? {})) if (key !== 'condition') ignore(`depends_on.${service}.${key}`);
    if (condition === 'service_healthy') out.push({ service, condition });
    else {
      if (condition !== undefined && condition !== 'service_started') ignore(`depends_on.${service}.condition`);
      out.push({ service, condition: 'service_started' });
    }
  }
  return out;
}

function readDeploy(raw: unknown, refuse: Refuse, ignore: Ignore): number {
  if (raw === undefined || raw === null) return 1;
  const spec = asMap(raw);
  if (spec === undefined) {
    refuse('deploy', '"deploy" must be a mapping');
    return 1;
  }
  for (const key of Object.keys(spec)) if (key !== 'replicas') ignore(`deploy.${key}`);
  if (spec['replicas'] === undefined) return 1;
  const replicas = Number(spec['replicas']);
  if (!Number.isInteger(replicas) || replicas < 1 || replicas > MAX_REPLICAS) {
    refuse('deploy.replicas', `"deploy.replicas" must be a whole number from 1 to ${MAX_REPLICAS}`, 'deploy');
    return 1;
  }
  return replicas;
}

/**
 * Container ports of `expose` and `ports`. §21 takes "the container port only; never published on a
 * host": a host port or address in an entry (`"8000:80"`, `published:`) is left out with a warning,
 * not refused (published ports are not in the contract's refused list).
 */
function readPorts(data: Record<string, unknown>, refuse: Refuse, ignore: Ignore, hostPartIgnored: (entry: string) => void): number[] {
  const ports = new Set<number>();
  const add = (key: string, text: string): void => {
    const m = /^(\d+)(?:\/(tcp|udp))?$/.exec(text.trim());
    if (m === null) {
      if (/^\d+-\d+(\/(tcp|udp))?$/.test(text.trim())) ignore(`${key}.${text.trim()}`);
      else refuse(key, `"${text}" is not a container port`);
      return;
    }
    const port = Number(m[1]);
    if (!isPort(port)) refuse(key, `"${text}" is not a port number`);
    else if (m[2] !== 'udp') ports.add(port);
  };
  const expose = data['expose'];
  if (expose !== undefined && expose !== null) {
    if (!Array.isArray(expose)) refuse('expose', '"expose" must be a list of ports');
    else for (const p of expose) add('expose', String(p));
  }
  const published = data['ports'];
  if (published !== undefined && published !== null) {
    if (!Array.isArray(published)) refuse('ports', '"ports" must be a list');
    else {
      for (const p of published) {
        const long = asMap(p);
        if (long !== undefined) {
          if (long['published'] !== undefined || long['host_ip'] !== undefined) hostPartIgnored(`${String(long['published'] ?? long['host_ip'])}:${String(long['target'])}`);
          add('ports', String(long['target']));
          continue;
        }
        const text = String(p);
        if (text.includes(':')) {
          hostPartIgnored(`"${text}"`);
          add('ports', text.split(':').at(-1) ?? '');
        } else add('ports', text);
      }
    }
  }
  return [...ports];
}

/** Where a string volume's source points on the host (a path, `~`, a socket); named volumes are plain names. */
const isHostSource = (source: string): boolean => /[/\\~]/.test(source) || source === '.' || source === '..';

function readVolumes(raw: unknown, scope: ServiceScope, refuse: Refuse, ignore: Ignore): SetVolume[] {
  if (raw === undefined || raw === null) return [];
  if (!Array.isArray(raw)) {
    refuse('volumes', '"volumes" must be a list');
    return [];
  }
  const out: SetVolume[] = [];
  for (const entry of raw) {
    let source: string | undefined;
    let target: string | undefined;
    let readOnly = false;
    let type = 'volume';
    if (typeof entry === 'string') {
      const parts = entry.split(':');
      if (parts.length === 1) {
        target = parts[0];
      } else {
        source = parts[0];
        target = parts[1];
        readOnly = (parts[2] ?? '').split(',').includes('ro');
      }
      if (source !== undefined && isHostSource(source)) type = 'bind';
    } else {
      const spec = asMap(entry) ?? {};
      type = typeof spec['type'] === 'string' ? spec['type'] : 'volume';
      source = typeof spec['source'] === 'string' ? spec['source'] : undefined;
      target = typeof spec['target'] === 'string' ? spec['target'] : undefined;
      readOnly = spec['read_only'] === true;
    }
    const shown = typeof entry === 'string' ? entry : `${source ?? ''}:${target ?? ''}`;
    if (type === 'bind' || type === 'npipe' || (type === 'volume' && source !== undefined && isHostSource(source))) {
      refuse('volumes', `"${shown}" mounts a host path or socket, which is refused: use a named volume`);
      continue;
    }
    if (type === 'tmpfs' || source === undefined || source === '') {
      ignore(`volumes.${target ?? shown}`);
      continue;
    }
    if (target === undefined || !target.startsWith('/')) {
      refuse('volumes', `"${shown}" needs an absolute path in the container`);
      continue;
    }
    if (!scope.volumes.has(source)) {
      refuse('volumes', `the volume "${source}" is not declared under the top-level "volumes"`);
      continue;
    }
    out.push({ name: source, target, readOnly });
  }
  return out;
}

function readFiles(key: 'secrets' | 'configs', raw: unknown, declared: ReadonlyMap<string, string>, refuse: Refuse): ServiceFile[] {
  if (raw === undefined || raw === null) return [];
  if (!Array.isArray(raw)) {
    refuse(key, `"${key}" must be a list`);
    return [];
  }
  const out: ServiceFile[] = [];
  for (const entry of raw) {
    const spec = typeof entry === 'string' ? { source: entry } : asMap(entry);
    const source = spec?.['source'];
    if (typeof source !== 'string') {
      refuse(key, `each of "${key}" must be a name or a mapping with "source"`);
      continue;
    }
    const file = declared.get(source);
    if (file === undefined) {
      refuse(key, `"${source}" is not declared under the top-level "${key}" with a "file" in the source`);
      continue;
    }
    const target = typeof spec?.['target'] === 'string' ? spec['target'] : undefined;
    const path = key === 'secrets' ? (target?.startsWith('/') === true ? target : `/run/secrets/${target ?? source}`) : (target ?? `/${source}`);
    out.push({ source: file, target: path });
  }
  return out;
}
