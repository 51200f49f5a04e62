// Which stack a source is: every detector runs; when several match at the root, one is chosen and the log says how to choose.
import { detectGo } from './go-stack.js';
import { detectNode } from './node-stack.js';
import { detectPython } from './python-stack.js';
import type { SourceTree } from './source-tree.js';
import { NotAnAppError, StackError, type Detection, type StackName } from './stack-types.js';
import { detectStatic } from './static-stack.js';

/** The name of the deployment variable (or `slipway dockerfile --stack`) that picks a stack when several match. */
export const STACK_VARIABLE = 'SLIPWAY_STACK';

export const STACK_NAMES: readonly StackName[] = ['node', 'python', 'go', 'static'];

/**
 * When several stacks match, the first of this order is chosen: a Go or Python app often carries
 * a package.json for its front-end assets, while the reverse is rare.
 */
const APP_STACKS: ReadonlyArray<readonly [StackName, (tree: SourceTree) => Detection | null]> = [
  ['go', detectGo],
  ['python', detectPython],
  ['node', detectNode],
];

/** What was looked for, for the message of a source with no stack. */
export const LOOKED_FOR =
  'package.json (Node.js), requirements.txt or pyproject.toml (Python), go.mod (Go), index.html (a static site)';

/** The stack of a source and why; `notes` are what the user should know (another stack that matched, and how to pick it). */
export interface StackChoice extends Detection {
  readonly notes: readonly string[];
}

/**
 * Detects the stack of `tree`. `preferred` (SLIPWAY_STACK) picks one when several match. Throws
 * StackError when nothing matches (naming what was looked for), when the chosen stack's files
 * cannot be used, or when `preferred` names a stack that is not there.
 */
export function detectStack(tree: SourceTree, preferred?: string): StackChoice {
  if (preferred !== undefined && !(STACK_NAMES as readonly string[]).includes(preferred)) {
    throw new StackError(`${STACK_VARIABLE} is "${preferred}"; it must be one of ${STACK_NAMES.join(', ')}`);
  }
  // A detector that recognises its files but cannot use them still counts as a match: its error is the answer if it is chosen.
  const matched: Array<{ name: StackName; result: Detection | StackError }> = [];
  // Files that hold no app (a package.json for tooling alone) yield to any other stack, a static site included.
  const notApps: Array<{ name: StackName; result: NotAnAppError }> = [];
  for (const [name, detect] of APP_STACKS) {
    try {
      const found = detect(tree);
      if (found !== null) matched.push({ name, result: found });
    } catch (err) {
      if (!(err instanceof StackError)) throw err;
      if (err instanceof NotAnAppError) notApps.push({ name, result: err });
      else matched.push({ name, result: err });
    }
  }
  const site = detectStatic(tree);
  if (site !== null && (matched.length === 0 || preferred === 'static')) matched.push({ name: 'static', result: site });
  // Their error stays the answer when nothing else matched, or when SLIPWAY_STACK names their stack.
  const yielded = notApps.filter((n) => matched.length > 0 && preferred !== n.name);
  matched.push(...notApps.filter((n) => !yielded.includes(n)));

  if (matched.length === 0) {
    throw new StackError(
      `no Dockerfile and no known stack in the source: looked for ${LOOKED_FOR} at its root. Add a Dockerfile (or set the deployment's dockerfile_path to one), or one of those files`,
    );
  }
  let chosen = matched[0];
  const notes: string[] = [];
  if (preferred !== undefined) {
    chosen = matched.find((m) => m.name === preferred);
    if (chosen === undefined) throw new StackError(`${STACK_VARIABLE} is "${preferred}" but no ${preferred} app is at the root (found: ${matched.map((m) => m.name).join(', ')})`);
    if (matched.length > 1) notes.push(`several stacks at the root (${matched.map((m) => m.name).join(', ')}): ${preferred} chosen by ${STACK_VARIABLE}`);
  } else if (matched.length > 1 && chosen !== undefined) {
    notes.push(
      `several stacks at the root (${matched.map((m) => m.name).join(', ')}): ${chosen.name} was chosen. To choose another, set the variable ${STACK_VARIABLE}=<${matched.map((m) => m.name).join('|')}> on the deployment, or add a Dockerfile (dockerfile_path)`,
    );
  }
  if (chosen === undefined) throw new StackError('no stack');
  if (chosen.result instanceof StackError) throw chosen.result;
  return { ...chosen.result, reasons: [...yielded.map((n) => n.result.reason), ...chosen.result.reasons], notes };
}
