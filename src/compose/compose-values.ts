// Small readers of compose values: argv from a string or a list, durations, environment lists and maps, dotenv files.

/** Splits a command string into argv the way compose does (quotes and backslashes, no shell). */
export function splitCommand(text: string): string[] {
  const out: string[] = [];
  let current = '';
  let has = false;
  let quote: '"' | "'" | null = null;
  for (let i = 0; i < text.length; i++) {
    const c = text[i] ?? '';
    if (quote !== null) {
      if (c === quote) quote = null;
      else if (c === '\\' && quote === '"' && i + 1 < text.length) current += text[++i];
      else current += c;
    } else if (c === '"' || c === "'") {
      quote = c;
      has = true;
    } else if (c === '\\' && i + 1 < text.length) {
      current += text[++i];
      has = true;
    } else if (/\s/.test(c)) {
      if (has || current !== '') out.push(current);
      current = '';
      has = false;
    } else current += c;
  }
  if (has || current !== '') out.push(current);
  return out;
}

/** An argv from a compose `command`/`entrypoint`: a list of scalars, or a string split like compose; undefined when neither. */
export function readArgv(value: unknown): string[] | undefined {
  if (typeof value === 'string') return splitCommand(value);
  if (Array.isArray(value) && value.every((v) => ['string', 'number', 'boolean'].includes(typeof v))) return value.map(String);
  return undefined;
}

const UNIT_MS: Record<string, number> = { ns: 1e-6, us: 1e-3, µs: 1e-3, ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

/** A compose duration (`1m30s`, `10s`, `500ms`, or a number of seconds) in ms; undefined when malformed. */
export function readDuration(value: unknown): number | undefined {
  if (typeof value === 'number' && Number.isFinite(value) && value >= 0) return value * 1000;
  if (typeof value !== 'string' || value.trim() === '') return undefined;
  let rest = value.trim();
  let total = 0;
  while (rest !== '') {
    const m = /^(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)/.exec(rest);
    if (m === null) return undefined;
    total += Number(m[1]) * (UNIT_MS[m[2] ?? 's'] ?? 0);
    rest = rest.slice(m[0].length);
  }
  return Math.round(total);
}

/** `environment` as a list (`KEY=value`, or `KEY` alone: left out) or a map (null values left out); undefined when neither. */
export function readEnvironment(value: unknown): Record<string, string> | undefined {
  const out: Record<string, string> = {};
  if (Array.isArray(value)) {
    for (const item of value) {
      if (typeof item !== 'string') return undefined;
      const eq = item.indexOf('=');
      if (eq > 0) out[item.slice(0, eq)] = item.slice(eq + 1);
    }
    return out;
  }
  if (value !== null && typeof value === 'object') {
    for (const [k, v] of Object.entries(value)) {
      if (v === null || v === undefined) continue;
      if (typeof v === 'object') return undefined;
      out[k] = String(v);
    }
    return out;
  }
  return undefined;
}

/** A dotenv file's variables: `KEY=value` lines, `#` comments, optional `export `, quotes removed. */
export function parseEnvFile(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const raw of text.split(/\r?\n/)) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) continue;
    const m = /^(?:export\s+)?([A-Za-z_][A-Za-z0-9_.-]*)\s*=\s*(.*)$/.exec(line);
    if (m === null) continue;
    let v = m[2] ?? '';
    if ((v.startsWith('"') && v.endsWith('"') && v.length >= 2) || (v.startsWith("'") && v.endsWith("'") && v.length >= 2)) v = v.slice(1, -1);
    else v = v.replace(/\s+#.*$/, '');
    out[m[1] ?? ''] = v;
  }
  return out;
}

/** A list of strings from a string or a list; undefined when neither. */
export function readStringList(value: unknown): string[] | undefined {
  if (typeof value === 'string') return [value];
  if (Array.isArray(value) && value.every((v) => typeof v === 'string')) return value as string[];
  return undefined;
}

/** A plain mapping, or undefined. */
export function asMap(value: unknown): Record<string, unknown> | undefined {
  return value !== null && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
}
