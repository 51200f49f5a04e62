// Which Dockerfile a build uses: the source's own at dockerfile_path, else one generated from its stack (decisions §24).
import { lstat } from 'node:fs/promises';
import path from 'node:path';
import type { EnvVar } from '../domain/app-config.js';
import type { UsedDockerfile } from '../domain/used-dockerfile.js';
import { EngineBuildError } from '../runtime/engine.js';
import { readDockerfile } from '../runtime/read-dockerfile.js';
import { STACK_VARIABLE } from '../stacks/detect-stack.js';
import { generateDockerfile } from '../stacks/generate-dockerfile.js';
import { readSourceTree } from '../stacks/read-source-tree.js';
import { DEFAULT_BASE_IMAGES, StackError, type BaseImages } from '../stacks/stack-types.js';

/**
 * The Dockerfile for a build of `contextDir`: the file at `dockerfilePath` when there is anything
 * there (read without following links, as before), else a generated one, whose detection goes to
 * `log`. A source without a Dockerfile or a known stack fails the build (EngineBuildError) with
 * the detector's message. The deployment variable SLIPWAY_STACK (not a secret) picks a stack
 * when several match.
 */
export async function chooseDockerfile(
  contextDir: string,
  dockerfilePath: string,
  vars: readonly EnvVar[],
  images: BaseImages | undefined,
  log: (text: string) => void,
): Promise<UsedDockerfile> {
  const present = await lstat(path.join(contextDir, dockerfilePath)).then(
    () => true,
    () => false,
  );
  if (present) return { path: dockerfilePath, dockerfile: await readDockerfile(contextDir, dockerfilePath), generated: false, detection: null };
  log(`==> Dockerfile not found at "${dockerfilePath}" in the source: detecting the stack to generate one\n`);
  const preferred = vars.find((v) => v.key === STACK_VARIABLE && !v.secret)?.value;
  try {
    const generated = generateDockerfile(readSourceTree(contextDir), { images: images ?? DEFAULT_BASE_IMAGES, dockerfilePath, preferred });
    log(generated.summary.map((line) => `==> ${line}\n`).join(''));
    log('==> the generated Dockerfile is shown on the build page, and by GET …/builds/{build_id}/dockerfile\n');
    return { path: dockerfilePath, dockerfile: generated.dockerfile, generated: true, detection: generated.summary };
  } catch (err) {
    if (err instanceof StackError) throw new EngineBuildError(err.message, err.message);
    throw err;
  }
}
