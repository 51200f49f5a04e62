// What a build's RUN steps can reach, said at the start of its log and in a failure that looks like the network's.
import { EngineBuildError } from '../runtime/engine.js';

export type BuildNetworkMode = 'confined' | 'none';

/** What to do about it, the same for both modes. */
const REMEDY = 'vendor the dependency or use a base image that has it';

/** The first line of every image build's log: what RUN steps can reach. */
export function buildNetworkNotice(mode: BuildNetworkMode): string {
  return mode === 'none'
    ? '==> builds have no network access (SLIPWAY_BUILD_NETWORK=none): RUN steps cannot download anything\n'
    : '==> builds have no network access beyond public internet addresses: RUN steps never reach this server, its private networks or other apps\n';
}

/** The sentence a network-related build failure ends with. */
export function buildNetworkHint(mode: BuildNetworkMode): string {
  return mode === 'none'
    ? `builds have no network access: ${REMEDY}`
    : `builds have no network access beyond public internet addresses (none when this server is offline; never this server, its private networks or other apps): ${REMEDY}`;
}

/**
 * Lines of build output that say a lookup or a connection failed, as busybox, curl, apt, npm, pip,
 * go and git word it.
 */
const NETWORK_FAILURE =
  /bad address|can't resolve|cannot resolve|could not resolve|couldn't resolve|unable to resolve|name resolution|name or service not known|server can't find|getaddrinfo|ENOTFOUND|EAI_AGAIN|ECONNREFUSED|ETIMEDOUT|ENETUNREACH|EHOSTUNREACH|network is unreachable|no route to host|connection refused|connection timed out|can't connect to remote host|failed to connect to|temporary failure resolving|dial tcp|i\/o timeout|no such host/i;

/** The last line of `output` that looks like a failed lookup or connection, if any. */
export function networkFailureLine(output: string): string | undefined {
  return output
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => NETWORK_FAILURE.test(line))
    .at(-1);
}

/**
 * `err` as the person should read it: a build whose output ends in a failed lookup or connection
 * names that line and says what builds can reach; any other error is returned as it is.
 */
export function explainNetworkFailure(err: unknown, mode: BuildNetworkMode): unknown {
  if (!(err instanceof EngineBuildError) || !err.message.startsWith('image build failed')) return err;
  const line = networkFailureLine(err.outputTail);
  if (line === undefined) return err;
  const said = err.message.includes(line) ? '' : ` (${line.slice(0, 300)})`;
  const message = `${err.message}${said}; ${buildNetworkHint(mode)}`;
  return new EngineBuildError(message, err.outputTail, { cause: err });
}
