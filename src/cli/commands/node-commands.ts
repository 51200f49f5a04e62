// Commands on the runtime: nodes (list, drain, activate) for administrators, and scale for an app's replicas.
import { InvalidArgumentError, type Command } from 'commander';
import type { ApiClient } from '../api-client.js';
import type { Deployment, Node } from '../api-types.js';
import type { CliIo } from '../cli-io.js';
import { connect, withInterrupt, withJson, type JsonOption } from '../command-context.js';
import { printJson, printTable } from '../output.js';
import { resolveApp } from '../resolve-app.js';

/** Parses a replica count (1–20). */
function replicaCount(raw: string): number {
  if (!/^\d+$/.test(raw) || Number(raw) < 1 || Number(raw) > 20) throw new InvalidArgumentError('expected a whole number from 1 to 20');
  return Number(raw);
}

/** Registers `nodes` (with `drain` and `activate`) and `scale` on `program`. */
export function registerNodeCommands(program: Command, io: CliIo): void {
  const run = (body: (client: ApiClient) => Promise<void>): Promise<void> => withInterrupt(io, async (signal) => body(await connect(io, signal)));

  const nodes = withJson(program.command('nodes').description('list the nodes apps run on (administrators)'))
    .addHelpText(
      'after',
      `
Under SLIPWAY_RUNTIME=docker there is one node, this server's engine. Under swarm, every node of
the swarm: draining one moves its replicas to the others (and out of the edge) within seconds.

Examples:
  slipway nodes
  slipway nodes drain NODE_ID
  slipway nodes activate NODE_ID`,
    )
    .action((options: JsonOption) =>
      run(async (client) => {
        const list = await client.request<Node[]>('GET', '/api/v1/nodes');
        if (options.json === true) return printJson(io.stdout, list);
        printTable(io.stdout, list, [
          { header: 'id', value: (n) => n.id },
          { header: 'hostname', value: (n) => n.hostname },
          { header: 'address', value: (n) => n.address },
          { header: 'role', value: (n) => n.role },
          { header: 'availability', value: (n) => n.availability },
          { header: 'state', value: (n) => n.state },
          { header: 'replicas', value: (n) => String(n.replicas) },
        ]);
      }),
    );
  for (const [action, description] of [
    ['drain', 'move a node\'s replicas to the other nodes; it takes no new ones'],
    ['activate', 'let a drained node take replicas again'],
  ] as const) {
    withJson(nodes.command(action).argument('<node_id>').description(description)).action((id: string, _options: JsonOption, command: Command) =>
      run(async (client) => {
        const node = await client.request<Node>('POST', `/api/v1/nodes/${encodeURIComponent(id)}/${action}`);
        if (command.optsWithGlobals<JsonOption>().json === true) return printJson(io.stdout, node);
        io.stdout.write(`node ${node.hostname} (${node.id}) is now ${node.availability}\n`);
      }),
    );
  }

  withJson(program.command('scale').argument('<app>').argument('<replicas>', 'how many copies serve the app (1–20)', replicaCount).description("set how many replicas serve an app, and restart it so they do"))
    .option('--no-restart', 'only record the number: it applies at the next deploy, restart or rollback')
    .addHelpText('after', "\nAPP is the app's name, subdomain or id. An app with volumes runs one replica.\n\nExamples:\n  slipway scale hello 3\n  slipway scale hello 1 --no-restart")
    .action((ref: string, replicas: number, options: JsonOption & { restart: boolean }) =>
      run(async (client) => {
        const app = await resolveApp(client, ref);
        const updated = await client.request<Deployment>('PATCH', `/api/v1/deployments/${app.id}`, { body: { replicas } });
        const live = updated.live_build_id !== null && updated.live_build_id !== undefined && (updated.status === 'running' || updated.status === 'failed');
        if (options.restart && live) await client.request('POST', `/api/v1/deployments/${app.id}/restart`, { timeoutMs: 300_000 });
        if (options.json === true) return printJson(io.stdout, updated);
        io.stdout.write(
          options.restart && live
            ? `${app.name} now runs ${replicas} replica${replicas === 1 ? '' : 's'}\n`
            : `${app.name} will run ${replicas} replica${replicas === 1 ? '' : 's'} from its next deploy, restart or rollback\n`,
        );
      }),
    );
}
