// A .env file parser: KEY=VALUE lines, `export` prefix, comments, single/double/backtick quotes, escapes.

/** A line the parser cannot read; the message names the line, never the value. */
export class DotenvError extends Error {
  override readonly name = 'DotenvError';
}

const KEY = /^[A-Za-z_][A-Za-z0-9_.-]*/;
const ESCAPES: Record<string, string> = { n: '\n', r: '\r', t: '\t', '"': '"', '\\': '\\', $: '$', "'": "'", '`': '`' };

/**
 * Parses dotenv text into entries in file order (a key given twice keeps its last value).
 * - blank lines and lines starting with `#` are skipped; `export KEY=VALUE` is KEY=VALUE;
 * - unquoted values are trimmed and end at ` #` (an inline comment);
 * - `'single'` and `` `backtick` `` values are literal; `"double"` values take the escapes
 *   \n \r \t \" \\ \$ (another backslash stays as written); quoted values may span lines;
 * - `${VAR}` is not expanded: values are taken as written.
 */
export function parseDotenv(text: string): Map<string, string> {
  const source = text.replace(/^\uFEFF/, '').replace(/\r\n?/g, '\n');
  const entries = new Map<string, string>();
  let i = 0;
  let line = 1;
  const fail = (at: number, message: string): never => {
    throw new DotenvError(`line ${at}: ${message}`);
  };
  while (i < source.length) {
    const end = source.indexOf('\n', i) === -1 ? source.length : source.indexOf('\n', i);
    const raw = source.slice(i, end);
    const start = line;
    const trimmed = raw.trimStart();
    if (trimmed === '' || trimmed.startsWith('#')) {
      i = end + 1;
      line += 1;
      continue;
    }
    let rest = trimmed.replace(/^export[ \t]+/, '');
    const key = KEY.exec(rest)?.[0];
    if (key === undefined) fail(start, 'expected KEY=VALUE');
    rest = rest.slice((key as string).length).trimStart();
    if (!rest.startsWith('=')) fail(start, `expected "=" after ${key as string}`);
    // The value starts after "=": from here on, work on the whole source, since quotes may span lines.
    const valueStart = end - rest.length + 1;
    let j = valueStart;
    while (source[j] === ' ' || source[j] === '\t') j += 1;
    const quote = source[j];
    let value: string;
    if (quote === '"' || quote === "'" || quote === '`') {
      let k = j + 1;
      value = '';
      for (;;) {
        const c = source[k];
        if (c === undefined) fail(start, `the ${quote} quote of ${key as string} is never closed`);
        if (c === quote) break;
        if (c === '\n') line += 1;
        if (c === '\\' && quote === '"') {
          const next = source[k + 1];
          if (next !== undefined && ESCAPES[next] !== undefined) {
            value += ESCAPES[next];
            k += 2;
            continue;
          }
        }
        value += c;
        k += 1;
      }
      const after = source.indexOf('\n', k) === -1 ? source.length : source.indexOf('\n', k);
      const tail = source.slice(k + 1, after).trim();
      if (tail !== '' && !tail.startsWith('#')) fail(line, `unexpected text after the closing quote of ${key as string}`);
      i = after + 1;
    } else {
      const text = source.slice(j, end);
      const comment = /(^|[ \t])#/.exec(text);
      value = (comment === null ? text : text.slice(0, comment.index)).trim();
      i = end + 1;
    }
    entries.delete(key as string);
    entries.set(key as string, value);
    line += 1;
  }
  return entries;
}
