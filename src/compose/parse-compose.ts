// Step one of loading a compose file: YAML text to plain data (anchors, merge keys), with the line of any node findable.
import { LineCounter, YAMLParseError, isMap, isScalar, parseDocument, type Node } from 'yaml';
import { composeFailure } from './compose-problems.js';

/** A parsed compose file: its data and the line where a key path starts. */
export interface ParsedCompose {
  readonly data: Record<string, unknown>;
  /** The 1-based line of `path` (keys from the top, e.g. ['services', 'db', 'privileged']); undefined when not found. */
  lineOf(path: readonly string[]): number | undefined;
}

/** The largest compose file read (a compose file is a few kilobytes; this bounds the parser's work). */
export const MAX_COMPOSE_BYTES = 256 * 1024;

/**
 * Parses `text` (the file `file` of the source) as YAML 1.2 with `<<` merge keys. A malformed file
 * fails with its line and column; a file whose top level is not a mapping with `services` fails too.
 */
export function parseCompose(file: string, text: string): ParsedCompose {
  if (Buffer.byteLength(text) > MAX_COMPOSE_BYTES) throw composeFailure(file, `larger than ${MAX_COMPOSE_BYTES / 1024} KiB`);
  const lineCounter = new LineCounter();
  const doc = parseDocument(text, { merge: true, lineCounter, prettyErrors: false, uniqueKeys: true });
  const first = doc.errors[0];
  if (first !== undefined) {
    const pos = first instanceof YAMLParseError ? lineCounter.linePos(first.pos[0]) : undefined;
    const at = pos === undefined ? 'an unknown position' : `line ${pos.line}, column ${pos.col}`;
    throw composeFailure(file, `not valid YAML at ${at}: ${first.message.split('\n')[0]?.replace(/ at line \d+, column \d+:?$/, '')}`);
  }
  let data: unknown;
  try {
    data = doc.toJS({ maxAliasCount: 1000 });
  } catch (err) {
    throw composeFailure(file, `not valid YAML: ${err instanceof Error ? err.message : String(err)}`);
  }
  if (data === null || typeof data !== 'object' || Array.isArray(data)) throw composeFailure(file, 'its top level must be a mapping with a "services" key');
  const top = data as Record<string, unknown>;
  const services = top['services'];
  if (services === null || typeof services !== 'object' || Array.isArray(services) || Object.keys(services).length === 0) {
    throw composeFailure(file, 'it declares no services (a "services" mapping with at least one service)');
  }
  return {
    data: top,
    lineOf(path) {
      let node: unknown = doc.contents;
      let line: number | undefined;
      for (const key of path) {
        if (!isMap(node)) return line;
        const pair = node.items.find((p) => isScalar(p.key) && String(p.key.value) === key);
        if (pair === undefined) return line;
        const keyNode = pair.key as Node;
        if (keyNode.range !== undefined && keyNode.range !== null) line = lineCounter.linePos(keyNode.range[0]).line;
        node = pair.value;
      }
      return line;
    },
  };
}
