// Build arguments: the ARGs a Dockerfile declares, and the non-secret variables that fill them.
import type { EnvVar } from '../domain/app-config.js';

/**
 * The names of every `ARG` a Dockerfile declares (any stage, before FROM too). Follows the
 * Dockerfile syntax: instructions are case-insensitive, lines continue with the escape character
 * (`\`, or the one an `# escape=` directive names), comment lines are ignored, and one ARG may
 * declare several names, each with an optional (possibly quoted) default.
 */
export function declaredArgs(dockerfile: string): Set<string> {
  const lines = dockerfile.replace(/\r\n?/g, '\n').split('\n');
  let escape = '\\';
  // Parser directives: `# key=value` comment lines at the very top.
  for (const line of lines) {
    const directive = /^\s*#\s*([a-zA-Z]+)\s*=\s*(\S+)\s*$/.exec(line);
    if (directive === null) break;
    if (directive[1]?.toLowerCase() === 'escape' && (directive[2] === '`' || directive[2] === '\\')) escape = directive[2];
  }
  const names = new Set<string>();
  let instruction = '';
  const flush = (): void => {
    const match = /^\s*ARG\s+(.*)$/is.exec(instruction);
    instruction = '';
    if (match?.[1] === undefined) return;
    for (const token of words(match[1])) {
      const name = token.split('=')[0] ?? '';
      if (name !== '') names.add(name);
    }
  };
  for (const line of lines) {
    // Comment lines are dropped, even in the middle of a continued instruction.
    if (/^\s*#/.test(line)) continue;
    const trimmed = line.replace(/\s+$/, '');
    if (trimmed.endsWith(escape)) {
      instruction += `${trimmed.slice(0, -1)} `;
      continue;
    }
    instruction += line;
    flush();
  }
  flush();
  return names;
}

/** Splits ARG's arguments on blanks outside quotes (`A="x y" B` is two words). */
function words(text: string): string[] {
  const out: string[] = [];
  let current = '';
  let quote: string | undefined;
  for (const c of text) {
    if (quote !== undefined) {
      if (c === quote) quote = undefined;
      else current += c;
    } else if (c === '"' || c === "'") {
      quote = c;
    } else if (/\s/.test(c)) {
      if (current !== '') out.push(current);
      current = '';
    } else {
      current += c;
    }
  }
  if (current !== '') out.push(current);
  return out;
}

/** The build arguments of a build: each non-secret variable whose name the Dockerfile declares as an ARG. */
export function buildArgsFor(dockerfile: string, vars: readonly EnvVar[]): Record<string, string> {
  const declared = declaredArgs(dockerfile);
  return Object.fromEntries(vars.filter((v) => !v.secret && declared.has(v.key)).map((v) => [v.key, v.value]));
}
