// Step five: which service is served at the subdomain, and on which port (contract §21's rule).

/** The rule, as the failure says it. */
export const WEB_RULE =
  'name it with "x-slipway: {web: <service>, port: <n>}" at the top level of the file; otherwise the web service is the only one with "expose" or "ports", else the one named "web"';

/**
 * The web service and its port: `x-slipway.web`; else the only service with `expose`/`ports`;
 * else the service named `web`. Its port: `x-slipway.port`, else its only declared port, else
 * null (the app's PORT). Returns a problem message instead when the rule finds none.
 */
export function chooseWeb(
  services: ReadonlyArray<{ name: string; ports: readonly number[] }>,
  hint: { web?: unknown; port?: unknown } | undefined,
): { web: string; port: number | null } | { problem: string } {
  let web: { name: string; ports: readonly number[] } | undefined;
  if (hint?.web !== undefined) {
    web = services.find((s) => s.name === hint.web);
    if (web === undefined) return { problem: `x-slipway.web names "${String(hint.web)}", which is not a started service of the file` };
  } else {
    const withPorts = services.filter((s) => s.ports.length > 0);
    web = withPorts.length === 1 ? withPorts[0] : services.find((s) => s.name === 'web');
    if (web === undefined) {
      const why = withPorts.length > 1 ? `${withPorts.length} services declare ports (${withPorts.map((s) => s.name).join(', ')})` : 'no service declares ports and none is named "web"';
      return { problem: `cannot tell which service is the web service: ${why}; ${WEB_RULE}` };
    }
  }
  if (hint?.port !== undefined) {
    const port = Number(hint.port);
    if (!Number.isInteger(port) || port < 1 || port > 65535) return { problem: `x-slipway.port must be a port number, got ${JSON.stringify(hint.port)}` };
    return { web: web.name, port };
  }
  return { web: web.name, port: web.ports.length === 1 ? (web.ports[0] ?? null) : null };
}
