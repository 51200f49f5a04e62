// Loading a compose file, as a pipeline: read → parse → interpolate → check every service → order → choose the web service → the plan a deploy builds and releases.
import { composeFailure, composeRefusal, type ComposeProblem } from './compose-problems.js';
import { MAX_SERVICES, SUPPORTED_TOP_KEYS, isExtension } from './compose-keys.js';
import { asMap } from './compose-values.js';
import { chooseWeb } from './choose-web.js';
import { interpolate } from './interpolate.js';
import { parseCompose } from './parse-compose.js';
import { startOrder } from './compose-order.js';
import { normalizeRelative, readService, type ComposeService } from './compose-service.js';
import { readSourceFile, sourcePathProblem } from './compose-paths.js';

/** What a deploy of a compose file builds and starts. */
export interface ComposePlan {
  readonly file: string;
  /** The started services in start order (dependencies first). */
  readonly services: readonly ComposeService[];
  readonly web: string;
  /** The web service's port; null: the app's PORT rule (its image's single EXPOSE, else 8080). */
  readonly port: number | null;
  /** One line per ignored service and key, for the build log. */
  readonly warnings: readonly string[];
}

/** How the plan looks into the source (a directory in production, a map in unit tests). */
export interface ComposeSource {
  pathProblem(relative: string): string | undefined;
  readSource(relative: string): string | undefined;
}

/** The source at `dir` on disk. */
export function sourceAt(dir: string): ComposeSource {
  return { pathProblem: (rel) => sourcePathProblem(dir, rel), readSource: (rel) => readSourceFile(dir, rel) };
}

/**
 * Reads `file` from the source and plans it. Fails (DomainError build_failed) when the file is
 * missing (its path named), is not YAML (line and column), or has problems: every refused key of
 * every service at once, named with its service, key and line.
 */
export function loadCompose(source: ComposeSource, file: string, values: ReadonlyMap<string, string>): ComposePlan {
  const outside = source.pathProblem(file);
  if (outside !== undefined) throw composeFailure(file, `the path ${outside}`);
  const text = source.readSource(normalizeRelative(file));
  if (text === undefined) throw composeFailure(file, `not found at "${file}" in the source`);
  return planCompose(file, text, source, values);
}

/** Plans compose text already read (see loadCompose). */
export function planCompose(file: string, text: string, source: ComposeSource, values: ReadonlyMap<string, string>): ComposePlan {
  const parsed = parseCompose(file, text);
  const data = interpolate(parsed.data, values) as Record<string, unknown>;
  const problems: ComposeProblem[] = [];
  const warnings: string[] = [];
  const top = (key: string): number | undefined => parsed.lineOf([key]);
  for (const key of Object.keys(data)) {
    if (!SUPPORTED_TOP_KEYS.has(key) && !isExtension(key)) warnings.push(`warning: top-level "${key}" is ignored${lineText(top(key))}`);
  }

  const volumes = new Set<string>();
  for (const [name, spec] of Object.entries(asMap(data['volumes']) ?? {})) {
    const fields = asMap(spec) ?? {};
    if (fields['external'] !== undefined && fields['external'] !== false) {
      problems.push({ key: `volumes.${name}`, message: 'an external volume is refused: volumes are the deployment\'s own', line: parsed.lineOf(['volumes', name]) });
      continue;
    }
    for (const key of Object.keys(fields)) if (!isExtension(key)) warnings.push(`warning: volume "${name}": "${key}" is ignored${lineText(parsed.lineOf(['volumes', name, key]))}`);
    volumes.add(name);
  }
  const files = (kind: 'secrets' | 'configs'): Map<string, string> => {
    const out = new Map<string, string>();
    for (const [name, spec] of Object.entries(asMap(data[kind]) ?? {})) {
      const file = asMap(spec)?.['file'];
      const line = parsed.lineOf([kind, name]);
      if (typeof file !== 'string') {
        problems.push({ key: `${kind}.${name}`, message: `only ${kind} with a "file" inside the source are supported`, line });
        continue;
      }
      const outside = source.pathProblem(file);
      if (outside !== undefined) problems.push({ key: `${kind}.${name}`, message: `the file "${file}" ${outside}`, line });
      else if (source.readSource(normalizeRelative(file)) === undefined) problems.push({ key: `${kind}.${name}`, message: `the file "${file}" is not in the source`, line });
      else out.set(name, normalizeRelative(file));
    }
    return out;
  };
  const secrets = files('secrets');
  const configs = files('configs');

  const declaredServices = asMap(data['services']) ?? {};
  const names = Object.keys(declaredServices);
  if (names.length > MAX_SERVICES) {
    problems.push({ key: 'services', message: `${names.length} services declared; at most ${MAX_SERVICES} are allowed`, line: top('services') });
  }
  const started = new Set(
    names.filter((name) => {
      const profiles = asMap(declaredServices[name])?.['profiles'];
      if (profiles === undefined || profiles === null || (Array.isArray(profiles) && profiles.length === 0)) return true;
      warnings.push(`warning: service "${name}": "profiles" is ignored: the service is not started${lineText(parsed.lineOf(['services', name, 'profiles']))}`);
      return false;
    }),
  );
  const scope = { volumes, secrets, configs, started, declared: new Set(names), lineOf: parsed.lineOf, ...source };
  const services: ComposeService[] = [];
  for (const name of names) {
    const reading = readService(name, declaredServices[name], scope);
    problems.push(...reading.problems);
    warnings.push(...reading.warnings);
    if (reading.service !== undefined && started.has(name)) services.push(reading.service);
  }
  if (started.size === 0) problems.push({ key: 'services', message: 'every service has profiles: none would be started', line: top('services') });

  const ordered = startOrder(services);
  if ('cycle' in ordered) {
    problems.push({ service: ordered.cycle[0], key: 'depends_on', message: `a depends_on cycle: ${ordered.cycle.join(' → ')}`, line: parsed.lineOf(['services', ordered.cycle[0] ?? '', 'depends_on']) });
  }
  if (problems.length > 0) throw composeRefusal(file, problems);

  const hint = asMap(data['x-slipway']);
  const web = chooseWeb(services, hint === undefined ? undefined : { web: hint['web'], port: hint['port'] });
  if ('problem' in web) throw composeFailure(file, web.problem);
  const byName = new Map(services.map((s) => [s.name, s]));
  const order = 'order' in ordered ? ordered.order : [];
  return { file, services: order.flatMap((n) => byName.get(n) ?? []), web: web.web, port: web.port, warnings };
}

const lineText = (line: number | undefined): string => (line === undefined ? '' : ` (line ${line})`);
