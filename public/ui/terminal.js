// A <pre> that behaves like a terminal: carriage returns rewrite the line (git's progress), and it follows new output unless the reader scrolled up.

/**
 * Wraps `pre`. `append(text)` takes output in pieces as they arrive (a "\r\n" may be split across
 * two pieces). A "\r" not followed by "\n" moves back to the start of the line: what follows
 * replaces the line, as a terminal shows `Receiving objects:  45%` counting up in place.
 */
export function terminal(pre) {
  let line = new Text('');
  pre.append(line);
  let returned = false; // a "\r" was the last thing seen: the line is replaced by what comes next, unless "\n"
  return {
    clear() {
      pre.textContent = '';
      line = new Text('');
      pre.append(line);
      returned = false;
    },
    append(text) {
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
