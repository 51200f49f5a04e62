// Step two: `${NAME}`, `${NAME:-default}`, `${NAME-default}` and `$$` in a compose file's strings, from the values given (never the server's environment).

/** Replaces variables in every string of `value` (keys are left as written); `$$` is a literal `$`. */
export function interpolate(value: unknown, values: ReadonlyMap<string, string>): unknown {
  if (typeof value === 'string') return interpolateString(value, values);
  if (Array.isArray(value)) return value.map((v) => interpolate(v, values));
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, interpolate(v, values)]));
  }
  return value;
}

const PATTERN = /\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?-)([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)/g;

function interpolateString(text: string, values: ReadonlyMap<string, string>): string {
  return text.replace(PATTERN, (match, braced: string | undefined, op: string | undefined, fallback: string | undefined, bare: string | undefined) => {
    if (match === '$$') return '$';
    const name = braced ?? bare ?? '';
    const found = values.get(name);
    if (op === ':-') return found === undefined || found === '' ? (fallback ?? '') : found;
    if (op === '-') return found ?? fallback ?? '';
    return found ?? '';
  });
}
