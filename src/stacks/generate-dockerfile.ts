// From a source to a Dockerfile: detect the stack (facts and reasons), then fill that stack's template.
import { detectStack, type StackChoice } from './detect-stack.js';
import { header } from './dockerfile-text.js';
import { goDockerfile } from './go-dockerfile.js';
import { nodeDockerfile } from './node-dockerfile.js';
import { pythonDockerfile } from './python-dockerfile.js';
import type { SourceTree } from './source-tree.js';
import type { BaseImages, StackFacts } from './stack-types.js';
import { staticDockerfile } from './static-dockerfile.js';

export interface GenerateOptions {
  readonly images: BaseImages;
  /** Where the Dockerfile sits in the build context (a static site leaves it out of what it serves). */
  readonly dockerfilePath: string;
  /** SLIPWAY_STACK: the stack chosen when several match. */
  readonly preferred?: string | undefined;
}

/** A generated Dockerfile and the detection behind it. */
export interface GeneratedDockerfile {
  readonly choice: StackChoice;
  readonly dockerfile: string;
  /** What the build log and `slipway dockerfile` say: the stack, why, and any note. */
  readonly summary: readonly string[];
}

const TITLES: Record<StackFacts['stack'], string> = { node: 'a Node.js app', python: 'a Python app', go: 'a Go app', static: 'a static site' };

/** Detects `tree`'s stack and generates its Dockerfile. Throws StackError (see detectStack) when it cannot. */
export function generateDockerfile(tree: SourceTree, options: GenerateOptions): GeneratedDockerfile {
  const choice = detectStack(tree, options.preferred);
  const body = stackBody(choice.facts, options);
  const dockerfile = `${header(TITLES[choice.facts.stack], choice.reasons, choice.notes)}\n\n${body}\n`;
  const summary = [
    `detected ${TITLES[choice.facts.stack]}:`,
    ...choice.reasons.map((r) => `  - ${r}`),
    ...choice.notes.map((n) => `  note: ${n}`),
  ];
  return { choice, dockerfile, summary };
}

function stackBody(facts: StackFacts, options: GenerateOptions): string {
  switch (facts.stack) {
    case 'node':
      return nodeDockerfile(facts, options.images, options.dockerfilePath);
    case 'python':
      return pythonDockerfile(facts, options.images);
    case 'go':
      return goDockerfile(facts, options.images);
    case 'static':
      return staticDockerfile(facts, options.images, options.dockerfilePath);
  }
}
