// What a Dockerfile makes the engine fetch, and the policy that refuses fetches aimed at private networks.
//
// The engine fetches `ADD <url>` sources and base images itself, from the host's network namespace,
// outside any build network: a Dockerfile could make it read the host's loopback (the server's own
// API, another tenant's app) or the cloud metadata service. So before a build, every `ADD` source
// and every image reference (`FROM`, `COPY --from`) is read from the Dockerfile and checked.
import { isIP } from 'node:net';
import { isPrivateAddress } from '../core/private-address.js';

/** Something the Dockerfile asks the engine to fetch, with the line it is on (1-based). */
export type DockerfileFetch =
  | { kind: 'image'; ref: string; line: number; instruction: string }
  | { kind: 'add'; source: string; line: number }
  /** A value that depends on variables the Dockerfile does not define (a base image's ENV...). */
  | { kind: 'unresolved'; text: string; line: number; instruction: string };

interface Instruction {
  keyword: string;
  args: string;
  line: number;
}

/**
 * Logical instructions of a Dockerfile: parser directives read, line continuations joined (with
 * comment and blank lines inside them dropped, as the engine does), keywords upper-cased.
 */
function instructions(text: string): { escape: string; list: Instruction[] } {
  const lines = text.replace(/^\uFEFF/, '').split(/\r?\n/);
  let escape = '\\';
  let i = 0;
  // Parser directives: `# name=value` lines at the very top, before anything else.
  for (; i < lines.length; i++) {
    const match = /^#\s*([a-zA-Z][a-zA-Z0-9]*)\s*=\s*(.*?)\s*$/.exec(lines[i] ?? '');
    if (match === null) break;
    if (match[1]?.toLowerCase() === 'escape' && (match[2] === '`' || match[2] === '\\')) escape = match[2];
  }
  const list: Instruction[] = [];
  let current: { text: string; line: number } | null = null;
  const continues = new RegExp(`${escape === '\\' ? '\\\\' : '`'}[ \\t]*$`);
  for (; i < lines.length; i++) {
    const raw = lines[i] ?? '';
    const trimmed = raw.trim();
    if (trimmed === '' || trimmed.startsWith('#')) {
      // Comments and blank lines end nothing: inside a continuation they are simply skipped.
      continue;
    }
    const more = continues.test(raw);
    const part = more ? raw.replace(continues, '') : raw;
    if (current === null) current = { text: part.trimStart(), line: i + 1 };
    else current.text += part;
    if (!more) {
      list.push(split(current.text, current.line));
      current = null;
    }
  }
  if (current !== null) list.push(split(current.text, current.line));
  return { escape, list };
}

function split(text: string, line: number): Instruction {
  const match = /^(\S+)\s*([\s\S]*)$/.exec(text.trim());
  return { keyword: (match?.[1] ?? '').toUpperCase(), args: match?.[2] ?? '', line };
}

/** Leading `--name=value` / `--name` flags, and what follows them. */
function flags(args: string): { flags: Map<string, string>; rest: string } {
  const found = new Map<string, string>();
  let rest = args.trimStart();
  for (;;) {
    const match = /^--([a-zA-Z][a-zA-Z0-9-]*)(?:=(\S*))?(?:\s+|$)/.exec(rest);
    if (match === null) break;
    found.set((match[1] ?? '').toLowerCase(), match[2] ?? '');
    rest = rest.slice(match[0].length);
  }
  return { flags: found, rest };
}

type Vars = ReadonlyMap<string, string>;

/**
 * Substitutes `$VAR`, `${VAR}`, `${VAR:-word}` and `${VAR:+word}` as the engine does; the escape
 * character protects a `$`. `unresolved` is set when a variable is not in `vars`.
 */
function expand(word: string, vars: Vars, escape: string, strictUnknown: boolean): { value: string; unresolved: boolean } {
  let out = '';
  let unresolved = false;
  for (let i = 0; i < word.length; i++) {
    const c = word[i];
    if (c === escape && i + 1 < word.length) {
      out += word[i + 1];
      i++;
      continue;
    }
    if (c !== '$') {
      out += c;
      continue;
    }
    const rest = word.slice(i + 1);
    const braced = /^\{([A-Za-z_][A-Za-z0-9_]*)(?:(:[-+])([^}]*))?\}/.exec(rest);
    const bare = /^[A-Za-z_][A-Za-z0-9_]*/.exec(rest);
    if (braced !== null) {
      const value = vars.get(braced[1] ?? '');
      // A variable the Dockerfile does not define may still come from the base image's ENV.
      if (value === undefined && strictUnknown) unresolved = true;
      const set = value !== undefined && value !== '';
      const word = (): string => {
        const inner = expand(braced[3] ?? '', vars, escape, strictUnknown);
        unresolved ||= inner.unresolved;
        return inner.value;
      };
      if (braced[2] === ':-') out += set ? value : word();
      else if (braced[2] === ':+') out += set ? word() : '';
      else out += value ?? '';
      i += braced[0].length;
    } else if (bare !== null) {
      const value = vars.get(bare[0]);
      if (value === undefined && strictUnknown) unresolved = true;
      out += value ?? '';
      i += bare[0].length;
    } else if (rest.startsWith('{')) {
      // A form this parser does not know (`${VAR#x}`...): its value cannot be known here.
      unresolved = strictUnknown;
      const end = rest.indexOf('}');
      i += end === -1 ? rest.length : end + 1;
    } else {
      out += c;
    }
  }
  return { value: out, unresolved };
}

/** Shell-like words: whitespace splits, quotes group (single quotes stop substitution). */
function words(args: string, vars: Vars, escape: string): { values: string[]; unresolved: boolean } {
  const trimmed = args.trim();
  if (trimmed.startsWith('[')) {
    try {
      const parsed: unknown = JSON.parse(trimmed);
      if (Array.isArray(parsed) && parsed.every((w) => typeof w === 'string')) {
        let unresolved = false;
        const values = (parsed as string[]).map((w) => {
          const r = expand(w, vars, escape, true);
          unresolved ||= r.unresolved;
          return r.value;
        });
        return { values, unresolved };
      }
    } catch {
      // Not JSON: shell form.
    }
  }
  const values: string[] = [];
  let unresolved = false;
  let word = '';
  let inWord = false;
  for (let i = 0; i < trimmed.length; i++) {
    const c = trimmed[i] ?? '';
    if (/\s/.test(c)) {
      if (inWord) values.push(word);
      word = '';
      inWord = false;
      continue;
    }
    inWord = true;
    if (c === "'") {
      const end = trimmed.indexOf("'", i + 1);
      word += trimmed.slice(i + 1, end === -1 ? trimmed.length : end);
      i = end === -1 ? trimmed.length : end;
    } else if (c === '"') {
      let j = i + 1;
      let inner = '';
      for (; j < trimmed.length && trimmed[j] !== '"'; j++) {
        if (trimmed[j] === escape && j + 1 < trimmed.length) {
          inner += trimmed.slice(j, j + 2);
          j++;
        } else inner += trimmed[j];
      }
      const r = expand(inner, vars, escape, true);
      unresolved ||= r.unresolved;
      word += r.value;
      i = j;
    } else {
      let j = i;
      let plain = '';
      for (; j < trimmed.length && !/[\s'"]/.test(trimmed[j] ?? ''); j++) {
        if (trimmed[j] === escape && j + 1 < trimmed.length) {
          plain += trimmed.slice(j, j + 2);
          j++;
        } else plain += trimmed[j];
      }
      const r = expand(plain, vars, escape, true);
      unresolved ||= r.unresolved;
      word += r.value;
      i = j - 1;
    }
  }
  if (inWord) values.push(word);
  return { values, unresolved };
}

/** `NAME=value` pairs (or a lone `NAME`) of an ARG or ENV instruction; legacy `ENV NAME value` too. */
function assignments(keyword: 'ARG' | 'ENV', args: string, vars: Vars, escape: string): [string, string | undefined][] {
  const legacy = /^([A-Za-z_][A-Za-z0-9_]*)\s+([^=\s][\s\S]*)$/.exec(args.trim());
  if (keyword === 'ENV' && legacy !== null && !(legacy[1] ?? '').includes('=')) {
    return [[legacy[1] ?? '', expand((legacy[2] ?? '').trim(), vars, escape, false).value]];
  }
  return words(args, vars, escape).values.map((w) => {
    const eq = w.indexOf('=');
    return eq === -1 ? [w, undefined] : [w.slice(0, eq), w.slice(eq + 1)];
  });
}

/** Whether an ADD source is fetched by the engine rather than read from the build context. */
export function isRemoteSource(source: string): boolean {
  return /^[a-zA-Z][a-zA-Z0-9+.-]*:\/\//.test(source) || /^[^\s/@]+@[^\s/:]+:/.test(source);
}

/**
 * Everything the Dockerfile asks the engine to fetch itself: ADD sources that are URLs (or cannot
 * be known), and image references of FROM and COPY --from that are not earlier stages.
 */
export function dockerfileFetches(text: string, buildArgs: Readonly<Record<string, string>> = {}): DockerfileFetch[] {
  const { escape, list } = instructions(text);
  const found: DockerfileFetch[] = [];
  const globalArgs = new Map<string, string>();
  const stages = new Set<string>();
  let stageVars: Map<string, string> | null = null;
  for (const listed of list) {
    // A trigger runs when an image built from this one is used as a base, a later stage included:
    // `ONBUILD ADD <url>` is checked like the ADD itself.
    const ins = listed.keyword === 'ONBUILD' ? split(listed.args, listed.line) : listed;
    if (listed.keyword === 'ONBUILD' && ins.keyword !== 'ADD' && ins.keyword !== 'COPY') continue;
    switch (ins.keyword) {
      case 'ARG': {
        for (const [name, declared] of assignments('ARG', ins.args, stageVars ?? globalArgs, escape)) {
          // A build argument given for a declared ARG replaces its default, as the engine does.
          const value = Object.hasOwn(buildArgs, name) ? buildArgs[name] : declared;
          if (stageVars === null) {
            if (value !== undefined) globalArgs.set(name, value);
          } else {
            const inherited = globalArgs.get(name);
            if (value !== undefined) stageVars.set(name, value);
            else if (inherited !== undefined) stageVars.set(name, inherited);
          }
        }
        break;
      }
      case 'ENV': {
        if (stageVars === null) break;
        for (const [name, value] of assignments('ENV', ins.args, stageVars, escape)) {
          if (value !== undefined) stageVars.set(name, value);
        }
        break;
      }
      case 'FROM': {
        const { rest } = flags(ins.args);
        // FROM sees only the ARGs declared before the first FROM; an unknown one is empty.
        const parts = rest.trim().split(/\s+/);
        const image = expand(parts[0] ?? '', globalArgs, escape, false).value;
        if (image !== '' && image.toLowerCase() !== 'scratch' && !stages.has(image.toLowerCase())) {
          found.push({ kind: 'image', ref: image, line: ins.line, instruction: 'FROM' });
        }
        if ((parts[1] ?? '').toUpperCase() === 'AS' && parts[2] !== undefined) stages.add(parts[2].toLowerCase());
        stageVars = new Map();
        break;
      }
      case 'COPY':
      case 'ADD': {
        const parsed = flags(ins.args);
        const from = parsed.flags.get('from');
        if (from !== undefined) {
          const r = expand(from, stageVars ?? globalArgs, escape, true);
          if (r.unresolved) found.push({ kind: 'unresolved', text: from, line: ins.line, instruction: `${ins.keyword} --from` });
          // A number names a stage by its index.
          else if (!stages.has(r.value.toLowerCase()) && !/^\d+$/.test(r.value)) {
            found.push({ kind: 'image', ref: r.value, line: ins.line, instruction: `${ins.keyword} --from` });
          }
        }
        if (ins.keyword === 'ADD') {
          const { values, unresolved } = words(parsed.rest, stageVars ?? globalArgs, escape);
          const sources = values.length > 1 ? values.slice(0, -1) : values;
          for (const source of sources) if (isRemoteSource(source)) found.push({ kind: 'add', source, line: ins.line });
          if (unresolved) found.push({ kind: 'unresolved', text: parsed.rest.trim(), line: ins.line, instruction: 'ADD' });
        }
        break;
      }
      default:
        break;
    }
  }
  return found;
}

/** The registry host an image reference names explicitly (brackets and port removed), or null. */
export function registryHost(ref: string): string | null {
  const slash = ref.indexOf('/');
  if (slash === -1) return null;
  const first = ref.slice(0, slash);
  // The engine's rule: a first component with a dot or a colon, `localhost`, or upper case is a registry.
  if (!(first.includes('.') || first.includes(':') || first === 'localhost' || first !== first.toLowerCase())) return null;
  const v6 = /^\[([^\]]*)\](?::\d+)?$/.exec(first);
  if (v6 !== null) return v6[1] ?? '';
  return first.replace(/:\d*$/, '');
}

/** Images of Slipway installations (`slipway-<8 hex>/…`): other deployments' code, never a base. */
const SLIPWAY_IMAGE = /^slipway-[0-9a-f]{8}\//;

/** The names Docker Hub goes by: the engine resolves a reference on any of them to the same local image. */
const DOCKER_HUB_HOSTS = new Set(['docker.io', 'index.docker.io', 'registry-1.docker.io']);

/**
 * The repository a reference names, as the engine looks it up locally: lower-cased, digest and tag
 * removed, a Docker Hub host and its `library/` namespace dropped (`docker.io/library/node:20@sha256:…`
 * → `node`). A reference on another registry keeps its host.
 */
export function imageRepository(ref: string): string {
  let name = ref.trim().toLowerCase();
  const at = name.indexOf('@');
  if (at !== -1) name = name.slice(0, at);
  // A tag is a colon after the last slash (a colon before it is a registry port).
  const colon = name.lastIndexOf(':');
  if (colon > name.lastIndexOf('/')) name = name.slice(0, colon);
  for (;;) {
    const slash = name.indexOf('/');
    const first = slash === -1 ? '' : name.slice(0, slash);
    if (DOCKER_HUB_HOSTS.has(first) || DOCKER_HUB_HOSTS.has(first.replace(/:443$/, ''))) name = name.slice(slash + 1);
    else break;
  }
  while (name.startsWith('library/')) name = name.slice('library/'.length);
  return name;
}

/**
 * Why an image reference may not be used, before any lookup: another deployment's image (in any
 * spelling the engine resolves to it), or a name the engine would also match against image ids (a
 * bare hex string, `sha256:…`), which could pick up any image on the engine.
 */
function localImageProblem(ref: string): string | null {
  const lower = ref.trim().toLowerCase();
  if (SLIPWAY_IMAGE.test(imageRepository(ref)) || SLIPWAY_IMAGE.test(lower)) return 'it names an image built by Slipway for a deployment';
  // The engine matches ids against the reference exactly as written, so only these two forms reach it.
  if (/^sha256:/.test(lower) || /^[0-9a-f]+$/.test(lower)) return 'it could name a local image by its id';
  return null;
}

export type Resolve = (host: string) => Promise<string[]>;

/**
 * Checks what the Dockerfile makes the engine fetch. Resolves with null when the build may go
 * ahead, or with a sentence saying why not: an ADD of a URL (the engine would fetch it from the
 * host's network, outside the build's confinement; use COPY, or RUN with curl/wget, which run
 * confined), an ADD whose source depends on undefined variables, an image on a registry host that
 * is, or resolves to, a loopback/private/link-local/reserved address or does not resolve at all,
 * or a local image that is not the app's to use.
 */
export async function dockerfileProblem(text: string, resolve: Resolve, buildArgs: Readonly<Record<string, string>> = {}): Promise<string | null> {
  for (const fetch of dockerfileFetches(text, buildArgs)) {
    const where = `line ${fetch.line}`;
    if (fetch.kind === 'add') {
      return `${where}: ADD ${fetch.source} refused: ADD may not fetch URLs (the engine would fetch them from the host's own network); COPY files from the source, or download them in a RUN step`;
    }
    if (fetch.kind === 'unresolved') {
      return `${where}: ${fetch.instruction} ${fetch.text} refused: it uses variables not defined in the Dockerfile, so what it fetches cannot be checked`;
    }
    const local = localImageProblem(fetch.ref);
    if (local !== null) return `${where}: ${fetch.instruction} ${fetch.ref} refused: ${local}`;
    const host = registryHost(fetch.ref);
    if (host === null) continue;
    let addresses: string[];
    if (isIP(host) !== 0) addresses = [host];
    else {
      try {
        addresses = await resolve(host);
      } catch {
        addresses = [];
      }
      if (addresses.length === 0) return `${where}: ${fetch.instruction} ${fetch.ref} refused: the registry host "${host}" could not be resolved`;
    }
    const blocked = addresses.find((a) => isPrivateAddress(a));
    if (blocked !== undefined) {
      return `${where}: ${fetch.instruction} ${fetch.ref} refused: the registry host "${host}" is on a loopback, private or reserved network (${blocked})`;
    }
  }
  return null;
}

/**
 * Checks a base image's ONBUILD triggers (they run in this build, as if written after its FROM):
 * null when they may run, else why not.
 */
export async function triggersProblem(triggers: readonly string[], resolve: Resolve): Promise<string | null> {
  const text = ['FROM scratch', ...triggers.map((t) => t.replace(/[\r\n]+/g, ' '))].join('\n');
  const problem = await dockerfileProblem(text, resolve);
  return problem === null ? null : problem.replace(/^line \d+: /, '');
}
