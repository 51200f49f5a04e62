// Commands on a git app's preview deployments (decisions §17): previews (list), previews enable|disable, previews delete <number>.
import { InvalidArgumentError, Option, type Command } from 'commander';
import type { ApiClient } from '../api-client.js';
import type { Deployment, Preview } from '../api-types.js';
import { CliError } from '../cli-error.js';
import type { CliIo } from '../cli-io.js';
import { connect, withInterrupt, withJson, type JsonOption } from '../command-context.js';
import { ago, printJson, printTable } from '../output.js';
import { LINK_FILE } from '../pack.js';
import { appFor } from './env-commands.js';

interface PreviewOptions extends JsonOption {
  app?: string;
}

const APP_OPTION = (): Option => new Option('-a, --app <app>', `the app (name, subdomain or id); default: the app of ./${LINK_FILE}`);

/** A pull request number: a whole number from 1. */
function prNumber(raw: string): string {
  if (!/^[1-9][0-9]{0,8}$/.test(raw)) throw new InvalidArgumentError('expected a pull request number');
  return raw;
}

/** Registers `previews`, `previews enable|disable` and `previews delete` on `program`. */
export function registerPreviewCommands(program: Command, io: CliIo): void {
  const run = (body: (client: ApiClient) => Promise<void>): Promise<void> => withInterrupt(io, async (signal) => body(await connect(io, signal)));
  const gitApp = async (client: ApiClient, ref: string | undefined): Promise<Deployment> => {
    const app = await appFor(client, io, ref);
    if (app.source_type !== 'git') throw new CliError(`${app.name} is an archive app: previews are built from a git repository's pull requests`);
    return app;
  };

  const previews = withJson(
    program
      .command('previews')
      .argument('[app]', 'the app (name, subdomain or id)')
      .addOption(APP_OPTION())
      .description("list a git app's previews: one per open pull request against its branch, at <subdomain>-pr-<number>"),
  )
    .addHelpText(
      'after',
      `
With previews on, each pull request against the app's branch gets a preview built from its head
(the webhook must be set: \`slipway webhook APP\`, with pull request events too); closing or merging
removes it. A preview gets the app's variables, its secrets only when the pull request comes from the
app's own repository (never from a fork). At most 10 at once.

Examples:
  slipway previews enable hello
  slipway previews hello
  slipway previews delete 12 hello
  slipway previews disable hello`,
    )
    .action((ref: string | undefined, options: PreviewOptions) =>
      run(async (client) => {
        const app = await gitApp(client, ref ?? options.app);
        const list = await client.request<Preview[]>('GET', `/api/v1/deployments/${app.id}/previews`);
        if (options.json === true) return printJson(io.stdout, list);
        if (list.length === 0) {
          const hint = app.previews === true ? 'none yet: a pull request event builds one' : `previews are off (\`slipway previews enable ${app.subdomain}\`)`;
          return void io.stdout.write(`${app.name} has no previews: ${hint}.\n`);
        }
        printTable(io.stdout, list, [
          { header: 'pr', value: (p) => `#${p.number}` },
          { header: 'status', value: (p) => p.status },
          { header: 'branch', value: (p) => p.branch ?? '' },
          { header: 'commit', value: (p) => (p.commit_sha ?? '').slice(0, 12) },
          { header: 'url', value: (p) => p.url },
          { header: 'updated', value: (p) => ago(p.updated_at) },
        ]);
        if (app.previews !== true) io.stdout.write(`\nPreviews are off: these stay until their pull requests close; no new ones are built.\n`);
      }),
    );

  for (const [name, on] of [
    ['enable', true],
    ['disable', false],
  ] as const) {
    withJson(
      previews
        .command(name)
        .argument('[app]', 'the app (name, subdomain or id)')
        .addOption(APP_OPTION())
        .description(on ? 'build previews of pull requests against the app\'s branch' : 'build no more previews (those there stay until their pull requests close)'),
    ).action((ref: string | undefined, _options: PreviewOptions, command: Command) =>
      run(async (client) => {
        const options = command.optsWithGlobals<PreviewOptions>();
        const app = await gitApp(client, ref ?? options.app);
        const changed = await client.request<Deployment>('PATCH', `/api/v1/deployments/${app.id}`, { body: { previews: on } });
        if (options.json === true) return printJson(io.stdout, changed);
        io.stdout.write(`Previews of ${changed.name} are ${on ? 'on' : 'off'}.\n`);
        if (on) io.stdout.write(`Pull request events reach Slipway through the app's webhook: \`slipway webhook ${changed.subdomain}\` shows how to set it up.\n`);
      }),
    );
  }

  previews
    .command('delete')
    .alias('rm')
    .argument('<number>', 'the pull request number', prNumber)
    .argument('[app]', 'the app (name, subdomain or id)')
    .addOption(APP_OPTION())
    .description("remove a preview now (its next pull request event builds it again)")
    .action((number: string, ref: string | undefined, _options: PreviewOptions, command: Command) =>
      run(async (client) => {
        const options = command.optsWithGlobals<PreviewOptions>();
        const app = await gitApp(client, ref ?? options.app);
        await client.request<undefined>('DELETE', `/api/v1/deployments/${app.id}/previews/${number}`);
        io.stdout.write(`Preview #${number} of ${app.name} removed.\n`);
      }),
    );
}
