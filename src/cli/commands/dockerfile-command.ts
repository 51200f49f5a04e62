// Command: dockerfile — the Dockerfile Slipway would generate for a folder without one, and why; --write keeps it.
import fs from 'node:fs';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { Command } from 'commander';
import { STACK_NAMES } from '../../stacks/detect-stack.js';
import { generateDockerfile } from '../../stacks/generate-dockerfile.js';
import { readSourceTree } from '../../stacks/read-source-tree.js';
import { DEFAULT_BASE_IMAGES, StackError } from '../../stacks/stack-types.js';
import { CliError, usageError } from '../cli-error.js';
import type { CliIo } from '../cli-io.js';
import { withJson, type JsonOption } from '../command-context.js';
import { printJson } from '../output.js';

interface DockerfileOptions extends JsonOption {
  write?: boolean;
  force?: boolean;
  stack?: string;
  dockerfile?: string;
}

/** Registers `dockerfile` on `program`. */
export function registerDockerfileCommand(program: Command, io: CliIo): void {
  withJson(
    program
      .command('dockerfile [dir]')
      .description('print the Dockerfile Slipway would generate for a folder without one, and why')
      .option('--write', 'save it in the folder (never over an existing file unless --force)')
      .option('--force', 'with --write: replace an existing Dockerfile')
      .option('--stack <stack>', `the stack to use when several match (${STACK_NAMES.join(', ')}); on the server, the variable SLIPWAY_STACK`)
      .option('--dockerfile <path>', 'where the Dockerfile goes inside the folder (default: Dockerfile)'),
  )
    .addHelpText(
      'after',
      `
Works offline: it reads the folder as \`slipway deploy\` uploads it (.dockerignore, else
.gitignore, respected; .git left out) and nothing else. What it detected goes to stderr, the
Dockerfile to stdout. Base images follow the SLIPWAY_BASE_IMAGE_* settings, as on the server.

Examples:
  slipway dockerfile
  slipway dockerfile ./api > Dockerfile.slipway
  slipway dockerfile --write
  slipway dockerfile --stack python --write --force`,
    )
    .action((dir: string | undefined, options: DockerfileOptions) => dockerfile(io, dir ?? '.', options));
}

async function dockerfile(io: CliIo, dirArg: string, options: DockerfileOptions): Promise<void> {
  const dir = path.resolve(io.cwd, dirArg);
  if (!fs.statSync(dir, { throwIfNoEntry: false })?.isDirectory()) throw usageError(`${dirArg} is not a folder`);
  const target = (options.dockerfile ?? 'Dockerfile').replace(/\\/g, '/').replace(/^\.\//, '');
  if (target === '' || path.isAbsolute(target) || target.split('/').includes('..')) throw usageError(`--dockerfile must be a path inside the folder, got "${options.dockerfile}"`);
  if (options.force === true && options.write !== true) throw usageError('--force only goes with --write');
  const file = path.join(dir, target);
  const exists = fs.lstatSync(file, { throwIfNoEntry: false }) !== undefined;

  let generated;
  try {
    generated = generateDockerfile(readSourceTree(dir, { asUploaded: true }), { images: io.env.baseImages ?? DEFAULT_BASE_IMAGES, dockerfilePath: target, preferred: options.stack });
  } catch (err) {
    if (err instanceof StackError) throw new CliError(err.message);
    throw err;
  }
  if (options.json === true) {
    printJson(io.stdout, { stack: generated.choice.facts.stack, reasons: generated.choice.reasons, notes: generated.choice.notes, dockerfile: generated.dockerfile });
  } else {
    io.stderr.write(generated.summary.map((l) => `${l}\n`).join(''));
    if (exists && options.write !== true) io.stderr.write(`note: ${target} exists in ${dirArg}: Slipway builds that file and generates nothing\n`);
    if (options.write !== true) io.stdout.write(generated.dockerfile);
  }
  if (options.write === true) {
    if (exists && options.force !== true) throw new CliError(`${path.join(dirArg, target)} already exists: not replaced (add --force to replace it)`);
    await writeFile(file, generated.dockerfile);
    if (options.json !== true) io.stderr.write(`wrote ${path.join(dirArg, target)}: edit it as you like; Slipway builds it from now on\n`);
  }
}
