// Fetching from servers that cannot serve a shallow fetch (git's dumb HTTP transport): the same fetch again, in full.

/** True when git's stderr says the server cannot serve `--depth` (dumb HTTP, some old servers). */
export function shallowUnsupported(stderr: string): boolean {
  return /does not support shallow|shallow (?:capabilities|clone) (?:are|is) not supported|server does not support --depth/i.test(stderr);
}

/**
 * Wraps a git runner: a `fetch --depth=N` that `refused` says the server cannot do shallow is run
 * again without `--depth` (the whole history), with one line saying so on `onOutput`; every other
 * call and failure is passed through. Later depth fetches of the same runner go without `--depth` at once.
 */
export function withoutDepthWhenRefused(
  git: (args: string[]) => Promise<string>,
  refused: (err: unknown) => boolean,
  onOutput: ((text: string) => void) | undefined,
): (args: string[]) => Promise<string> {
  let full = false;
  const isDepth = (arg: string): boolean => arg.startsWith('--depth=');
  return async (args) => {
    if (args[0] !== 'fetch' || !args.some(isDepth)) return git(args);
    if (full) return git(args.filter((arg) => !isDepth(arg)));
    try {
      return await git(args);
    } catch (err) {
      if (!refused(err)) throw err;
      full = true;
      onOutput?.('The server does not support shallow fetches (a dumb HTTP server): fetching the whole history instead.\n');
      return git(args.filter((arg) => !isDepth(arg)));
    }
  };
}
