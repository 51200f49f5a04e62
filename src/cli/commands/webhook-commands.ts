// Commands on a git app's deploy-on-push webhook: webhook (show, create, rotate; auto_deploy on/off), webhook deliveries.
import { Option, type Command } from 'commander';
import type { ApiClient } from '../api-client.js';
import type { Deployment, WebhookAnswer, WebhookDelivery, WebhookSecretAnswer } from '../api-types.js';
import { CliError } from '../cli-error.js';
import type { CliIo } from '../cli-io.js';
import { connect, withInterrupt, withJson, type JsonOption } from '../command-context.js';
import { ago, printJson, printTable } from '../output.js';
import { LINK_FILE } from '../pack.js';
import { appFor } from '../resolve-app.js';

interface WebhookOptions extends JsonOption {
  app?: string;
  rotate?: boolean;
  autoDeploy?: 'on' | 'off';
}

const APP_OPTION = (): Option => new Option('-a, --app <app>', `the app (name, subdomain or id); default: the app of ./${LINK_FILE}`);

/** Registers `webhook` and `webhook deliveries` on `program`. */
export function registerWebhookCommands(program: Command, io: CliIo): void {
  const run = (body: (client: ApiClient) => Promise<void>): Promise<void> => withInterrupt(io, async (signal) => body(await connect(io, signal)));

  const webhook = withJson(
    program
      .command('webhook')
      .argument('[app]', 'the app (name, subdomain or id)')
      .addOption(APP_OPTION())
      .option('--rotate', 'replace the secret with a new one (the old one stops working at once)')
      .addOption(new Option('--auto-deploy <on|off>', 'turn deploy on push on or off').choices(['on', 'off']))
      .description("deploy a git app on push: print its webhook URL and secret, and how to add them to GitHub, Gitea/Forgejo or GitLab"),
  )
    .addHelpText(
      'after',
      `
The first call creates the webhook and prints its secret; the secret is shown only then (it is
stored encrypted). Later calls print the URL; --rotate prints a new secret. A push to the app's
branch deploys the pushed commit when auto_deploy is on (--auto-deploy on).

Examples:
  slipway webhook hello --auto-deploy on
  slipway webhook hello --rotate
  slipway webhook deliveries hello`,
    )
    .action((ref: string | undefined, options: WebhookOptions) =>
      run(async (client) => {
        let app = await appFor(client, io, ref ?? options.app);
        if (app.source_type !== 'git') throw new CliError(`${app.name} is an archive app: webhooks deploy git apps on push`);
        if (options.autoDeploy !== undefined) {
          app = await client.request<Deployment>('PATCH', `/api/v1/deployments/${app.id}`, { body: { auto_deploy: options.autoDeploy === 'on' } });
        }
        const current = await client.request<WebhookAnswer>('GET', `/api/v1/deployments/${app.id}/webhook`);
        let secret: string | undefined;
        if (options.rotate === true || !current.configured) {
          secret = (await client.request<WebhookSecretAnswer>('POST', `/api/v1/deployments/${app.id}/webhook`)).secret;
        }
        if (options.json === true) {
          return printJson(io.stdout, { url: current.url, ...(secret === undefined ? {} : { secret }), auto_deploy: app.auto_deploy === true });
        }
        printWebhook(io, app, current, secret, options.rotate === true && current.configured);
      }),
    );

  withJson(
    webhook
      .command('deliveries')
      .argument('[app]', 'the app (name, subdomain or id)')
      .addOption(APP_OPTION())
      .description("the last 100 deliveries of an app's webhook, newest first, and why each did or did not deploy"),
  )
    .addHelpText('after', '\nExample:\n  slipway webhook deliveries hello')
    .action((ref: string | undefined, _options: WebhookOptions, command: Command) =>
      run(async (client) => {
        const options = command.optsWithGlobals<WebhookOptions>();
        const app = await appFor(client, io, ref ?? options.app);
        const list = await client.request<WebhookDelivery[]>('GET', `/api/v1/deployments/${app.id}/webhook/deliveries`);
        if (options.json === true) return printJson(io.stdout, list);
        if (list.length === 0) return void io.stdout.write(`${app.name}'s webhook has received no deliveries.\n`);
        printTable(io.stdout, list, [
          { header: 'received', value: (d) => ago(d.received_at) },
          { header: 'from', value: (d) => d.provider },
          { header: 'event', value: (d) => d.event ?? '' },
          { header: 'ref', value: (d) => d.ref ?? '' },
          { header: 'commit', value: (d) => (d.commit_sha ?? '').slice(0, 12) },
          { header: 'outcome', value: (d) => d.outcome },
          { header: 'build', value: (d) => (d.build_id ?? '').slice(0, 8) },
          { header: 'reason', value: (d) => d.reason },
        ]);
      }),
    );
}

function printWebhook(io: CliIo, app: Deployment, hook: WebhookAnswer, secret: string | undefined, rotated: boolean): void {
  const out = (text: string): void => void io.stdout.write(text);
  const branch = app.branch ?? "the repository's default branch";
  out(`Webhook of ${app.name}: a push to ${branch} deploys the pushed commit${app.auto_deploy === true ? '.' : ' once auto_deploy is on.'}\n\n`);
  out(`  URL:     ${hook.url}\n`);
  if (secret !== undefined) {
    out(`  Secret:  ${secret}\n\n`);
    out(`The secret is shown only now${rotated ? '; the old one no longer works' : ''}. Give it to the git host and keep no other copy.\n`);
  } else {
    out(`  Secret:  set ${hook.created_at === null ? '' : ago(hook.created_at)} (shown only when created; \`slipway webhook ${app.subdomain} --rotate\` makes a new one)\n`);
  }
  const shown = secret ?? '<the secret>';
  out(`
GitHub (Settings → Webhooks → Add webhook):
  Payload URL: ${hook.url}
  Content type: application/json
  Secret: ${shown}
  Events: Just the push event (with previews on: "Let me select individual events", Pushes and Pull requests)

Gitea / Forgejo (Settings → Webhooks → Add webhook → Gitea or Forgejo):
  Target URL: ${hook.url}
  HTTP method: POST, POST content type: application/json
  Secret: ${shown}
  Trigger on: Push events (with previews on: Custom events, Push and Pull Request)

GitLab (Settings → Webhooks → Add new webhook):
  URL: ${hook.url}
  Secret token: ${shown}
  Trigger: Push events (with previews on: Merge request events too)
`);
  if (app.auto_deploy !== true) out(`\nauto_deploy is off: \`slipway webhook ${app.subdomain} --auto-deploy on\` turns deploy on push on.\n`);
}
