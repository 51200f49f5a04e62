// Terminal escape sequences (colours, cursor moves, titles) removed from text that is stored or piped.

/** CSI (`ESC [ … final`), OSC (`ESC ] … BEL` or `ESC ] … ESC \`) and two-character escapes. */
const ESCAPE = /\u001b(?:\[[0-?]*[ -/]*[@-~]|\][^\u0007\u001b]*(?:\u0007|\u001b\\)|[@-Z\\-_])/g;
/** An escape begun but not finished at the end of a chunk. */
const UNFINISHED = /\u001b(?:\[[0-?]*[ -/]*|\][^\u0007\u001b]*\u001b?)?$/;
/** Longest unfinished escape held back for the next chunk; a longer one is not an escape. */
const MAX_HELD = 256;

/** `text` without its terminal escape sequences (and without stray escape characters). */
export function stripAnsi(text: string): string {
  // An escape character left over (not the start of any sequence) would still garble a terminal.
  return text.replace(ESCAPE, '').replace(/\u001b/g, '');
}

/**
 * Strips escape sequences from a stream of chunks: a sequence split between two chunks is held back
 * until the rest arrives, so none survives the cut.
 */
export class AnsiStripper {
  #held = '';

  push(chunk: string): string {
    const text = this.#held + chunk;
    this.#held = '';
    const unfinished = UNFINISHED.exec(text);
    if (unfinished !== null && unfinished[0].length <= MAX_HELD) {
      this.#held = unfinished[0];
      return stripAnsi(text.slice(0, unfinished.index));
    }
    return stripAnsi(text);
  }
}
