// Merging the output of a release's replicas: time order for what was written, arrival order when following, `[n] ` prefixes.

/** A source of one replica's output: timestamped lines (RFC 3339 then a space) as text chunks. */
export type ReplicaLogSource = (options: { tail?: number | undefined; follow: boolean; signal: AbortSignal }) => AsyncIterable<string>;

/** Nanoseconds since the epoch of an RFC 3339 time with up to 9 fraction digits (the engine trims zeros); NaN if unreadable. */
function timeKey(stamp: string): bigint | null {
  const match = /^(.*T\d\d:\d\d:\d\d)(?:\.(\d{1,9}))?(Z|[+-]\d\d:\d\d)$/.exec(stamp);
  if (match === null) return null;
  const seconds = Date.parse(`${match[1] ?? ''}${match[3] ?? 'Z'}`);
  if (Number.isNaN(seconds)) return null;
  return BigInt(seconds) * 1_000_000n + BigInt((match[2] ?? '').padEnd(9, '0'));
}

/** Splits a timestamped line into its time and its text (text alone when it carries no time). */
function splitStamp(line: string): { key: bigint | null; text: string } {
  const space = line.indexOf(' ');
  const key = space === -1 ? null : timeKey(line.slice(0, space));
  return key === null ? { key: null, text: line } : { key, text: line.slice(space + 1) };
}

/** Whole lines of a chunked stream (the last one completed at its end). */
async function* lines(chunks: AsyncIterable<string>): AsyncIterable<string> {
  let rest = '';
  for await (const chunk of chunks) {
    rest += chunk;
    let newline: number;
    while ((newline = rest.indexOf('\n')) !== -1) {
      yield rest.slice(0, newline);
      rest = rest.slice(newline + 1);
    }
  }
  if (rest !== '') yield rest;
}

/**
 * The replicas' output as one text: the lines written so far (the last `tail` of them) merged in
 * time order, then, when following, each new line as it arrives; every line prefixed `[n] `.
 */
export async function* mergeReplicaLogs(
  sources: readonly ReplicaLogSource[],
  options: { tail?: number | undefined; follow: boolean; signal: AbortSignal },
  labels: readonly string[] = sources.map((_, i) => String(i + 1)),
): AsyncIterable<string> {
  const { signal } = options;
  const written: Array<{ key: bigint; order: number; text: string }> = [];
  let order = 0;
  await Promise.all(
    sources.map(async (source, i) => {
      for await (const line of lines(source({ tail: options.tail, follow: false, signal }))) {
        const { key, text } = splitStamp(line);
        written.push({ key: key ?? 0n, order: order++, text: `[${labels[i] ?? i + 1}] ${text}` });
      }
    }),
  );
  written.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : a.order - b.order));
  const kept = options.tail === undefined ? written : written.slice(Math.max(0, written.length - options.tail));
  if (kept.length > 0) yield kept.map((l) => `${l.text}\n`).join('');
  if (!options.follow || signal.aborted) return;

  // Following: new lines only (tail 0), from every replica, in the order they come.
  const queue: string[] = [];
  let wake: (() => void) | undefined;
  let open = sources.length;
  const push = (text: string): void => {
    queue.push(text);
    wake?.();
  };
  for (const [i, source] of sources.entries()) {
    void (async () => {
      try {
        for await (const line of lines(source({ tail: 0, follow: true, signal }))) push(`[${labels[i] ?? i + 1}] ${splitStamp(line).text}\n`);
      } catch {
        // One replica's stream broke (it was removed): the others go on.
      } finally {
        open -= 1;
        wake?.();
      }
    })();
  }
  const onAbort = (): void => wake?.();
  signal.addEventListener('abort', onAbort, { once: true });
  try {
    while (!signal.aborted) {
      if (queue.length > 0) {
        yield queue.splice(0).join('');
        continue;
      }
      if (open === 0) return;
      await new Promise<void>((resolve) => (wake = resolve));
      wake = undefined;
    }
  } finally {
    signal.removeEventListener('abort', onAbort);
  }
}
