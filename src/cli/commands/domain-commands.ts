// Commands on an app's custom domains: domains (list), domains add, domains rm.
import { domainToASCII } from 'node:url';
import { Option, type Command } from 'commander';
import type { ApiClient } from '../api-client.js';
import type { CustomDomain } from '../api-types.js';
import { CliError } from '../cli-error.js';
import type { CliIo } from '../cli-io.js';
import { connect, withInterrupt, withJson, type JsonOption } from '../command-context.js';
import { ago, printJson, printTable } from '../output.js';
import { LINK_FILE } from '../pack.js';
import { appFor } from '../resolve-app.js';

interface AppOption extends JsonOption {
  app?: string;
}

const APP_OPTION = (): Option => new Option('-a, --app <app>', `the app (name, subdomain or id); default: the app of ./${LINK_FILE}`);

/** Registers `domains` and its subcommands on `program`. */
export function registerDomainCommands(program: Command, io: CliIo): void {
  const run = (body: (client: ApiClient) => Promise<void>): Promise<void> => withInterrupt(io, async (signal) => body(await connect(io, signal)));

  const domains = withJson(
    program
      .command('domains')
      .argument('[app]', 'the app (name, subdomain or id)')
      .addOption(APP_OPTION())
      .description("list an app's custom domains and their certificates"),
  )
    .addHelpText(
      'after',
      `
A custom domain reaches the app exactly as its subdomain does. Point the name's DNS (an A/AAAA
record, or a CNAME to the app's own host) at this server. With HTTPS on, the server obtains a
certificate for it (TLS column: pending, active, failed; failed ones are retried).

Examples:
  slipway domains hello
  slipway domains add --app hello www.example.com
  slipway domains rm --app hello www.example.com`,
    )
    .action((ref: string | undefined, options: AppOption) => run((client) => listDomains(client, ref ?? options.app, options.json === true)));

  withJson(domains.command('ls').alias('list').description("list an app's custom domains (as `slipway domains APP`)").argument('[app]', 'the app (name, subdomain or id)').addOption(APP_OPTION()))
    .action((ref: string | undefined, _options: AppOption, command: Command) => {
      const options = command.optsWithGlobals<AppOption>();
      return run((client) => listDomains(client, ref ?? options.app, options.json === true));
    });

  /** Prints the app's domains as a table (or the API's JSON). */
  async function listDomains(client: ApiClient, ref: string | undefined, json: boolean): Promise<void> {
    const app = await appFor(client, io, ref);
    const list = await client.request<CustomDomain[]>('GET', `/api/v1/deployments/${app.id}/domains`);
    if (json) return printJson(io.stdout, list);
    if (list.length === 0) return void io.stdout.write(`${app.name} has no custom domains (add one with \`slipway domains add --app ${app.subdomain} HOST\`).\n`);
    printTable(io.stdout, list, [
      { header: 'hostname', value: (d) => d.hostname },
      { header: 'tls', value: (d) => tlsText(d) },
      { header: 'expires', value: (d) => (d.certificate_expires_at === null ? '' : d.certificate_expires_at.slice(0, 10)) },
      { header: 'added', value: (d) => ago(d.created_at) },
    ]);
  }

  withJson(domains.command('add').description('serve the app at a hostname of yours too').argument('<host>', 'e.g. www.example.com').addOption(APP_OPTION()))
    .addHelpText('after', '\nExample:\n  slipway domains add --app hello www.example.com')
    .action((host: string, _options: AppOption, command: Command) =>
      run(async (client) => {
        const options = command.optsWithGlobals<AppOption>();
        const app = await appFor(client, io, options.app);
        const domain = await client.request<CustomDomain>('POST', `/api/v1/deployments/${app.id}/domains`, { body: { hostname: host } });
        if (options.json === true) return printJson(io.stdout, domain);
        io.stdout.write(`${domain.hostname} now reaches ${app.name} (point its DNS at this server).\n`);
        if (domain.tls_status !== 'none') io.stdout.write(`Certificate: ${tlsText(domain)} (see \`slipway domains ${app.subdomain}\`).\n`);
      }),
    );

  withJson(domains.command('rm').alias('remove').description('stop serving the app at a hostname').argument('<host>', 'the hostname to remove').addOption(APP_OPTION()))
    .addHelpText('after', '\nExample:\n  slipway domains rm --app hello www.example.com')
    .action((host: string, _options: AppOption, command: Command) =>
      run(async (client) => {
        const options = command.optsWithGlobals<AppOption>();
        const app = await appFor(client, io, options.app);
        const list = await client.request<CustomDomain[]>('GET', `/api/v1/deployments/${app.id}/domains`);
        const wanted = storedForm(host);
        const domain = list.find((d) => d.hostname === wanted);
        if (domain === undefined) throw new CliError(`${app.name} has no custom domain ${wanted}`);
        await client.request<void>('DELETE', `/api/v1/deployments/${app.id}/domains/${domain.id}`);
        if (options.json === true) return printJson(io.stdout, { removed: domain.hostname });
        io.stdout.write(`${domain.hostname} no longer reaches ${app.name}.\n`);
      }),
    );
}

/** A hostname as the server stores it (lower-case A-label), to find it in the list. */
function storedForm(host: string): string {
  const trimmed = host.trim().replace(/\.$/, '');
  return domainToASCII(trimmed) || trimmed.toLowerCase();
}

function tlsText(d: CustomDomain): string {
  if (d.tls_status === 'failed' && d.tls_error !== null) return `failed: ${d.tls_error}`;
  return d.tls_status === 'none' ? 'off' : d.tls_status;
}
