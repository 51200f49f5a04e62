// A small Prometheus registry: labelled counters and histograms, gauges read at scrape time, text exposition 0.0.4.

/** Label values of one series, in the order of the metric's label names. */
type LabelValues = readonly string[];

interface Family {
  readonly name: string;
  readonly help: string;
  readonly type: 'counter' | 'histogram' | 'gauge';
  render(lines: string[]): void;
}

/** `a="x",b="y"` with the exposition format's escaping. */
function labelText(names: readonly string[], values: LabelValues): string {
  return names.map((n, i) => `${n}="${(values[i] ?? '').replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n')}"`).join(',');
}

function braces(text: string): string {
  return text === '' ? '' : `{${text}}`;
}

function num(value: number): string {
  if (Number.isNaN(value)) return 'NaN';
  if (value === Infinity) return '+Inf';
  if (value === -Infinity) return '-Inf';
  return String(value);
}

/** A monotonically increasing count per label combination. */
export class Counter implements Family {
  readonly type = 'counter' as const;
  readonly #values = new Map<string, { labels: LabelValues; value: number }>();

  constructor(
    readonly name: string,
    readonly help: string,
    readonly labelNames: readonly string[] = [],
  ) {}

  inc(labels: LabelValues = [], by = 1): void {
    const key = labels.join('\u0000');
    const entry = this.#values.get(key);
    if (entry === undefined) this.#values.set(key, { labels: [...labels], value: by });
    else entry.value += by;
  }

  render(lines: string[]): void {
    for (const { labels, value } of this.#values.values()) lines.push(`${this.name}${braces(labelText(this.labelNames, labels))} ${num(value)}`);
  }

  /** The current samples. */
  samples(): Array<{ labels: LabelValues; value: number }> {
    return [...this.#values.values()].map(({ labels, value }) => ({ labels, value }));
  }
}

/** Observations counted into cumulative buckets (upper bounds in the metric's unit), with their sum. */
export class Histogram implements Family {
  readonly type = 'histogram' as const;
  readonly #series = new Map<string, { labels: LabelValues; buckets: number[]; sum: number; count: number }>();

  constructor(
    readonly name: string,
    readonly help: string,
    readonly bounds: readonly number[],
    readonly labelNames: readonly string[] = [],
  ) {}

  observe(value: number, labels: LabelValues = []): void {
    const key = labels.join('\u0000');
    let series = this.#series.get(key);
    if (series === undefined) {
      series = { labels: [...labels], buckets: this.bounds.map(() => 0), sum: 0, count: 0 };
      this.#series.set(key, series);
    }
    for (let i = 0; i < this.bounds.length; i += 1) if (value <= this.bounds[i]!) series.buckets[i]! += 1;
    series.sum += value;
    series.count += 1;
  }

  render(lines: string[]): void {
    for (const { labels, buckets, sum, count } of this.#series.values()) {
      const base = labelText(this.labelNames, labels);
      const withLe = (le: string): string => braces(base === '' ? `le="${le}"` : `${base},le="${le}"`);
      this.bounds.forEach((bound, i) => lines.push(`${this.name}_bucket${withLe(num(bound))} ${buckets[i]}`));
      lines.push(`${this.name}_bucket${withLe('+Inf')} ${count}`);
      lines.push(`${this.name}_sum${braces(base)} ${num(sum)}`);
      lines.push(`${this.name}_count${braces(base)} ${count}`);
    }
  }
}

/** Samples read when scraped (live tunnels, data plane up, counters kept by another process). */
export class Collected implements Family {
  constructor(
    readonly name: string,
    readonly help: string,
    readonly type: 'gauge' | 'counter',
    readonly labelNames: readonly string[],
    readonly read: () => ReadonlyArray<{ labels: LabelValues; value: number }>,
  ) {}

  render(lines: string[]): void {
    for (const { labels, value } of this.read()) lines.push(`${this.name}${braces(labelText(this.labelNames, labels))} ${num(value)}`);
  }
}

/** A gauge read when scraped. */
export class Gauge extends Collected {
  constructor(name: string, help: string, labelNames: readonly string[], read: () => ReadonlyArray<{ labels: LabelValues; value: number }>) {
    super(name, help, 'gauge', labelNames, read);
  }
}

/** The metric families of one server, rendered in registration order. */
export class MetricsRegistry {
  readonly #families: Family[] = [];

  add<T extends Family>(family: T): T {
    if (this.#families.some((f) => f.name === family.name)) throw new Error(`metric ${family.name} registered twice`);
    this.#families.push(family);
    return family;
  }

  /** The Prometheus text exposition format (version 0.0.4). */
  render(): string {
    const lines: string[] = [];
    for (const family of this.#families) {
      lines.push(`# HELP ${family.name} ${family.help.replace(/\\/g, '\\\\').replace(/\n/g, '\\n')}`);
      lines.push(`# TYPE ${family.name} ${family.type}`);
      family.render(lines);
    }
    return lines.join('\n') + '\n';
  }
}
