// Commands: keys ls, keys create NAME, keys rm ID.
import type { Command } from 'commander';
import type { ApiKey } from '../api-types.js';
import { CliError } from '../cli-error.js';
import { confirmOrRefuse } from '../confirm.js';
import type { CliIo } from '../cli-io.js';
import { connect, limitOption, withInterrupt, withJson, type JsonOption, type ListOptions } from '../command-context.js';
import { ago, printJson, printTable } from '../output.js';

/** Registers `keys` and its subcommands on `program`. */
export function registerKeyCommands(program: Command, io: CliIo): void {
  const keys = program
    .command('keys')
    .description('manage API keys (for scripts, CI and `slipway tunnel`)')
    .addHelpText('after', '\nExamples:\n  slipway keys ls\n  slipway keys create ci\n  slipway keys rm 0b6f6f0e-…');

  withJson(keys.command('ls').alias('list').description('list your API keys, newest first (all of them unless --limit)'))
    .option('--limit <n>', 'only the N newest keys', limitOption)
    .addHelpText('after', '\nExamples:\n  slipway keys ls\n  slipway keys ls --limit 10\n  slipway keys ls --json')
    .action((options: ListOptions) =>
      withInterrupt(io, async (signal) => {
        const list = await (await connect(io, signal)).list<ApiKey>('/api/v1/api-keys', options.limit === undefined ? {} : { max: options.limit });
        if (options.json === true) return printJson(io.stdout, list);
        if (list.length === 0) return void io.stdout.write('No API keys: create one with `slipway keys create NAME`.\n');
        printTable(io.stdout, list, [
          { header: 'id', value: (k) => k.id },
          { header: 'name', value: (k) => k.name },
          { header: 'prefix', value: (k) => `${k.key_prefix}…` },
          { header: 'created', value: (k) => ago(k.created_at) },
          { header: 'last used', value: (k) => (k.last_used_at === null ? 'never' : ago(k.last_used_at)) },
        ]);
      }),
    );

  withJson(keys.command('create').argument('<name>', 'a label, e.g. "ci" or "laptop tunnel"').description('create an API key and print it (shown only once)'))
    .addHelpText('after', '\nThe key is printed once on stdout; store it now.\n\nExamples:\n  slipway keys create ci\n  slipway keys create ci --json | jq -r .key')
    .action((name: string, options: JsonOption) =>
      withInterrupt(io, async (signal) => {
        const created = await (await connect(io, signal)).request<{ api_key: ApiKey; key: string }>('POST', '/api/v1/api-keys', { body: { name } });
        if (options.json === true) return printJson(io.stdout, created);
        io.stdout.write(`${created.key}\n`);
        io.stderr.write(`Created API key "${created.api_key.name}" (${created.api_key.id}). It is shown only this once.\n`);
      }),
    );

  withJson(
    keys
      .command('rm')
      .alias('revoke')
      .argument('<id>', 'the key id (or its name, when unique)')
      .description('revoke an API key')
      .option('-y, --yes', 'do not ask for confirmation'),
  )
    .addHelpText(
      'after',
      '\nWithout --yes, asks for confirmation (reads a "y" line when stdin is not a terminal): whatever uses the key loses access at once.\n\nExamples:\n  slipway keys rm 0b6f6f0e-4a3c-4a57-9d47-2f6a1c2d9e11\n  slipway keys rm ci --yes',
    )
    .action((ref: string, options: JsonOption & { yes?: boolean }) =>
      withInterrupt(io, async (signal) => {
        const client = await connect(io, signal);
        const list = await client.list<ApiKey>('/api/v1/api-keys');
        const byId = list.find((k) => k.id === ref.toLowerCase());
        const byName = list.filter((k) => k.name === ref);
        const key = byId ?? (byName.length === 1 ? byName[0] : undefined);
        if (key === undefined) {
          throw new CliError(byName.length > 1 ? `several keys are named "${ref}": use the id (see \`slipway keys ls\`)` : `no API key "${ref}" (see \`slipway keys ls\`)`);
        }
        if (options.yes !== true) {
          await confirmOrRefuse(io, signal, `Revoke API key "${key.name}" (${key.id})? Whatever uses it loses access at once. [y/N] `, 'not revoked (answer "y" to confirm, or pass --yes)');
        }
        await client.request('DELETE', `/api/v1/api-keys/${key.id}`);
        if (options.json === true) return printJson(io.stdout, { deleted: key.id });
        io.stdout.write(`Revoked API key "${key.name}" (${key.id}).\n`);
      }),
    );
}
