// Reads the Prometheus text format (0.0.4) the way a scraper does: a series is its name and its
// label set, whatever order the labels are written in.
import assert from 'node:assert/strict';

export interface Sample {
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly value: number;
}

export interface Exposition {
  /** `name type` per TYPE line, in the order written. */
  readonly types: string[];
  readonly help: Map<string, string>;
  readonly samples: Sample[];
}

const SAMPLE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/;
const LABEL = /^([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"(,|$)/;

/** Every line checked: a malformed one fails the test. */
export function parseExposition(text: string): Exposition {
  const types: string[] = [];
  const help = new Map<string, string>();
  const samples: Sample[] = [];
  for (const line of text.split('\n')) {
    if (line === '') continue;
    const meta = /^# (HELP|TYPE) (\S+) (.*)$/.exec(line);
    if (meta !== null) {
      if (meta[1] === 'TYPE') types.push(`${meta[2]} ${meta[3]}`);
      else help.set(meta[2]!, meta[3]!);
      continue;
    }
    const m = SAMPLE.exec(line);
    assert.ok(m !== null, `a sample line: ${JSON.stringify(line)}`);
    const labels: Record<string, string> = {};
    let rest = m[2] ?? '';
    while (rest !== '') {
      const l = LABEL.exec(rest);
      assert.ok(l !== null, `labels of ${JSON.stringify(line)}`);
      assert.ok(!(l[1]! in labels), `label ${l[1]} once in ${line}`);
      labels[l[1]!] = l[2]!.replace(/\\(.)/g, (_, c: string) => (c === 'n' ? '\n' : c));
      rest = rest.slice(l[0].length);
    }
    const value = m[3] === '+Inf' ? Infinity : m[3] === '-Inf' ? -Infinity : Number(m[3]);
    assert.ok(m[3] === 'NaN' || !Number.isNaN(value), `value of ${line}`);
    samples.push({ name: m[1]!, labels, value });
  }
  return { types, help, samples };
}

function sameLabels(a: Readonly<Record<string, string>>, b: Readonly<Record<string, string>>): boolean {
  const keys = Object.keys(a);
  return keys.length === Object.keys(b).length && keys.every((k) => b[k] === a[k]);
}

/** The value of the series `name` with exactly these labels, or undefined when absent (fails if twice). */
export function sampleValue(exposition: Exposition | string, name: string, labels: Readonly<Record<string, string>> = {}): number | undefined {
  const e = typeof exposition === 'string' ? parseExposition(exposition) : exposition;
  const found = e.samples.filter((s) => s.name === name && sameLabels(s.labels, labels));
  assert.ok(found.length <= 1, `one series ${name} ${JSON.stringify(labels)}`);
  return found[0]?.value;
}
