// The engine's build output: JSON-lines progress events turned into text, and the tail kept for errors.

/** Lines of build output kept for EngineBuildError.outputTail. */
const TAIL_LINES = 30;
/** Characters of build output kept in memory to cut the tail from. */
const TAIL_CHARS = 32_768;

export interface BuildEvent {
  stream?: string;
  status?: string;
  id?: string;
  progress?: string;
  error?: string;
  errorDetail?: { message?: string };
  aux?: { ID?: string };
}

export function parseEvent(line: string): BuildEvent {
  try {
    const value: unknown = JSON.parse(line);
    if (typeof value === 'object' && value !== null) return value as BuildEvent;
  } catch {
    // Not JSON: pass the raw text on as output rather than lose it.
  }
  return { stream: `${line}\n` };
}

export function eventText(event: BuildEvent): string {
  if (typeof event.stream === 'string') return event.stream;
  if (typeof event.error === 'string') return `${event.errorDetail?.message ?? event.error}\n`;
  // Pull progress bars would flood the log; their final status lines are kept.
  if (typeof event.status === 'string' && event.progress === undefined) {
    return `${event.id === undefined ? '' : `${event.id}: `}${event.status}\n`;
  }
  return '';
}

/** Keeps the end of the build output for error reports. */
export class OutputTail {
  #text = '';

  add(text: string): void {
    this.#text += text;
    if (this.#text.length > TAIL_CHARS * 2) this.#text = this.#text.slice(-TAIL_CHARS);
  }

  tail(): string {
    return this.#text.trimEnd().split('\n').slice(-TAIL_LINES).join('\n');
  }
}
