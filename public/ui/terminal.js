// A <pre> that behaves like a terminal: carriage returns rewrite the line (git's progress), colour codes are dropped, and it follows new output unless the reader scrolled up.

/** Terminal escapes (colours, cursor moves, titles): an app's runtime output keeps them, the page shows plain text. */
const ESCAPE = /\u001b(?:\[[0-?]*[ -/]*[@-~]|\][^\u0007\u001b]*(?:\u0007|\u001b\\)|[@-Z\\-_])/g;
/** An escape begun at the end of a piece, finished by the next one. */
const UNFINISHED = /\u001b(?:\[[0-?]*[ -/]*|\][^\u0007\u001b]*\u001b?)?$/;

/**
 * Wraps `pre`. `append(text)` takes output in pieces as they arrive (a "\r\n" may be split across
 * two pieces). A "\r" not followed by "\n" moves back to the start of the line: what follows
 * replaces the line, as a terminal shows `Receiving objects:  45%` counting up in place.
 */
export function terminal(pre) {
  let line = new Text('');
  pre.append(line);
  let returned = false; // a "\r" was the last thing seen: the line is replaced by what comes next, unless "\n"
  let held = ''; // an escape split between two pieces
  const plain = (piece) => {
    let text = held + piece;
    held = '';
    const unfinished = UNFINISHED.exec(text);
    if (unfinished !== null && unfinished[0].length <= 256) {
      held = unfinished[0];
      text = text.slice(0, unfinished.index);
    }
    return text.replace(ESCAPE, '').replace(/\u001b/g, '');
  };
  return {
    clear() {
      pre.textContent = '';
      line = new Text('');
      pre.append(line);
      returned = false;
      held = '';
    },
    append(piece) {
      const text = plain(piece);
      const atBottom = pre.scrollHeight - pre.scrollTop - pre.clientHeight < 24;
      let done = ''; // whole lines of this piece, added as one node
      let current = line.data;
      for (const part of text.split(/(\r|\n)/)) {
        if (part === '') continue;
        if (part === '\n') { done += `${current}\n`; current = ''; returned = false; }
        else if (part === '\r') returned = true;
        else { if (returned) { current = ''; returned = false; } current += part; }
      }
      if (done !== '') {
        line.data = '';
        line.before(new Text(done));
      }
      line.data = current;
      if (atBottom) pre.scrollTop = pre.scrollHeight;
    },
  };
}
