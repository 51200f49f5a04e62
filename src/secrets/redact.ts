// Redaction of secret values (and their encoded forms) from app output and error text before it is stored or returned.

/** What a redacted value is replaced with. */
export const REDACTED = '[redacted]';

/**
 * Values shorter than this are not redacted: a one- or two-character secret would blank out that
 * text everywhere in the output and hide nothing worth hiding.
 */
export const MIN_REDACTED_LENGTH = 4;

/** Base64 forms of `bytes` at each of the three alignments it can take inside a longer encoded text. */
function base64Forms(bytes: Buffer): string[] {
  const forms: string[] = [];
  for (let offset = 0; offset < 3; offset++) {
    const encoded = Buffer.concat([Buffer.alloc(offset), bytes]).toString('base64').replace(/=+$/, '');
    // Drop the characters that mix in the neighbouring bytes: the leading ones (with an offset) and a partial last one.
    const start = offset === 0 ? 0 : Math.ceil((offset * 8) / 6);
    const end = (bytes.length + offset) % 3 === 0 ? encoded.length : encoded.length - 1;
    const core = encoded.slice(start, end);
    // An unaligned form is only a fragment of the value: only long ones are specific enough to redact.
    if (core.length >= (offset === 0 ? MIN_REDACTED_LENGTH : 8)) forms.push(core);
  }
  // The final character of the aligned form can be partial too: keep the full one as well, padded and not.
  const padded = bytes.toString('base64');
  if (padded.length >= MIN_REDACTED_LENGTH) forms.push(padded, padded.replace(/=+$/, ''));
  return forms.flatMap((form) => [form, form.replace(/\+/g, '-').replace(/\//g, '_')]);
}

/** URL-encoded forms: percent-encoding (upper and lower case hex) and form encoding (spaces as `+`). */
function urlForms(value: string): string[] {
  const encoded = encodeURIComponent(value);
  return [encoded, encoded.replace(/%[0-9A-F]{2}/g, (m) => m.toLowerCase()), encoded.replace(/%20/g, '+')];
}

/** Every text to redact for `values`: each value, its base64 and URL-encoded forms; longest first, unique. */
export function secretForms(values: readonly string[]): string[] {
  const forms = new Set<string>();
  for (const value of values) {
    if (value.length < MIN_REDACTED_LENGTH) continue;
    forms.add(value);
    for (const form of [...base64Forms(Buffer.from(value, 'utf8')), ...urlForms(value)]) {
      if (form.length >= MIN_REDACTED_LENGTH) forms.add(form);
    }
  }
  return [...forms].sort((a, b) => b.length - a.length);
}

/** A redactor for a fixed set of secret values. */
export class SecretRedactor {
  readonly #forms: string[];
  readonly #pattern: RegExp | null;

  constructor(values: readonly string[]) {
    this.#forms = secretForms(values);
    this.#pattern = this.#forms.length === 0 ? null : new RegExp(this.#forms.map(escapeRegExp).join('|'), 'g');
  }

  /** Whether there is anything to redact. */
  get empty(): boolean {
    return this.#pattern === null;
  }

  /** `text` with every secret form replaced by {@link REDACTED}. */
  redact(text: string): string {
    return this.#pattern === null ? text : text.replace(this.#pattern, REDACTED);
  }

  /**
   * How many characters at the end of `text` could be the start of a secret form split across two
   * chunks of a stream (the longest suffix that is a proper prefix of a form).
   */
  heldBack(text: string): number {
    let longest = 0;
    for (const form of this.#forms) {
      for (let n = Math.min(form.length - 1, text.length); n > longest; n--) {
        if (text.endsWith(form.slice(0, n))) {
          longest = n;
          break;
        }
      }
    }
    return longest;
  }

  /**
   * A stream filter: `push` returns what can be passed on now (redacted), holding back a possible
   * start of a secret until the next chunk shows whether it is one; `flush` returns the rest.
   */
  stream(): { push(chunk: string): string; flush(): string } {
    let pending = '';
    return {
      push: (chunk: string): string => {
        if (this.#pattern === null) return chunk;
        const text = this.redact(pending + chunk);
        const keep = this.heldBack(text);
        pending = text.slice(text.length - keep);
        return text.slice(0, text.length - keep);
      },
      flush: (): string => {
        const rest = this.redact(pending);
        pending = '';
        return rest;
      },
    };
  }
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/** A redactor for the secret variables among `vars`. */
export function redactorFor(vars: readonly { value: string; secret: boolean }[]): SecretRedactor {
  return new SecretRedactor(vars.filter((v) => v.secret).map((v) => v.value));
}

/** `chunks` with the secrets redacted, a secret split across two chunks included. */
export async function* redactedStream(redactor: SecretRedactor, chunks: AsyncIterable<string>): AsyncGenerator<string> {
  if (redactor.empty) {
    yield* chunks;
    return;
  }
  const filter = redactor.stream();
  for await (const chunk of chunks) {
    const out = filter.push(chunk);
    if (out !== '') yield out;
  }
  const rest = filter.flush();
  if (rest !== '') yield rest;
}

/** An error to log: `err` itself when there is nothing to redact, else a copy with its message and stack redacted. */
export function redactError(redactor: SecretRedactor, err: unknown): unknown {
  if (redactor.empty) return err;
  if (!(err instanceof Error)) return redactor.redact(String(err));
  const copy = new Error(redactor.redact(err.message));
  copy.name = err.name;
  copy.stack = redactor.redact(err.stack ?? '');
  return copy;
}
