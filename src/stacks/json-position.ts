// Where a JSON text stops being JSON: JSON.parse in Node 20 no longer says, and users need a line and column.

/** A parse failure's place (1-based line and column) and what was found there. */
export interface JsonFailure {
  readonly line: number;
  readonly column: number;
  readonly found: string;
}

/**
 * Parses `text` as JSON. On failure, returns where the text stops being valid JSON (the first
 * character no JSON value can continue with), found by a small recursive-descent reader.
 */
export function parseJson(text: string): { ok: true; value: unknown } | { ok: false; failure: JsonFailure } {
  try {
    return { ok: true, value: JSON.parse(text) as unknown };
  } catch {
    return { ok: false, failure: locate(text, firstInvalidOffset(text)) };
  }
}

function locate(text: string, offset: number): JsonFailure {
  const before = text.slice(0, offset);
  const line = before.split('\n').length;
  const column = offset - (before.lastIndexOf('\n') + 1) + 1;
  const found = offset >= text.length ? 'the end of the file' : JSON.stringify(text.slice(offset, offset + 1));
  return { line, column, found };
}

/** The offset of the first character that cannot continue a JSON document. */
function firstInvalidOffset(text: string): number {
  let at = 0;
  const fail = (): never => {
    throw new Failed(at);
  };
  const space = (): void => {
    while (at < text.length && ' \t\n\r'.includes(text[at] ?? '')) at += 1;
  };
  const literal = (word: string): void => {
    for (const ch of word) {
      if (text[at] !== ch) fail();
      at += 1;
    }
  };
  const string = (): void => {
    at += 1;
    for (;;) {
      const ch = text[at];
      if (ch === undefined || ch < ' ') fail();
      if (ch === '"') return void (at += 1);
      if (ch === '\\') {
        at += 1;
        const esc = text[at];
        if (esc === 'u') {
          at += 1;
          for (let i = 0; i < 4; i += 1, at += 1) if (!/[0-9a-fA-F]/.test(text[at] ?? '')) fail();
          continue;
        }
        if (esc === undefined || !'"\\/bfnrt'.includes(esc)) fail();
      }
      at += 1;
    }
  };
  const number = (): void => {
    const match = /^-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?/.exec(text.slice(at));
    if (match === null || match[0] === '' || match[0] === '-') fail();
    at += match?.[0].length ?? 0;
  };
  const value = (): void => {
    space();
    const ch = text[at];
    if (ch === '{') {
      at += 1;
      space();
      if (text[at] === '}') return void (at += 1);
      for (;;) {
        space();
        if (text[at] !== '"') fail();
        string();
        space();
        if (text[at] !== ':') fail();
        at += 1;
        value();
        space();
        if (text[at] === ',') at += 1;
        else if (text[at] === '}') return void (at += 1);
        else fail();
      }
    }
    if (ch === '[') {
      at += 1;
      space();
      if (text[at] === ']') return void (at += 1);
      for (;;) {
        value();
        space();
        if (text[at] === ',') at += 1;
        else if (text[at] === ']') return void (at += 1);
        else fail();
      }
    }
    if (ch === '"') return string();
    if (ch === 't') return literal('true');
    if (ch === 'f') return literal('false');
    if (ch === 'n') return literal('null');
    number();
  };
  try {
    value();
    space();
    if (at < text.length) fail();
    return text.length;
  } catch (err) {
    if (err instanceof Failed) return err.offset;
    throw err;
  }
}

class Failed {
  constructor(readonly offset: number) {}
}
