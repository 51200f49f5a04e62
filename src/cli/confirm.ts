// A yes/no question before a destructive command (skipped with --yes), asked as `slipway rm` asks it.
import { CliError } from './cli-error.js';
import type { CliIo } from './cli-io.js';
import { createPrompter } from './prompt.js';

/**
 * Asks `question` (on the terminal, or reads a line from stdin when it is not one); anything but
 * "y"/"yes" throws CliError(`refusal`). No answer (stdin closed) is a no.
 */
export async function confirmOrRefuse(io: CliIo, signal: AbortSignal, question: string, refusal: string): Promise<void> {
  const prompter = createPrompter(io, signal);
  let answer: string;
  try {
    answer = await prompter.ask(question);
  } catch (err) {
    if (err instanceof CliError && err.exitCode !== 1) throw err;
    answer = '';
  } finally {
    prompter.close();
  }
  if (!/^y(es)?$/i.test(answer.trim())) throw new CliError(refusal);
}
