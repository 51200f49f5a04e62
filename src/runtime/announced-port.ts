// The port an app's own output says it listens on ("listening on :3000"), to tell a wrong port early.

/** How the common servers say where they listen: "listening on :3000", "Listening on port 3000", "Running on http://0.0.0.0:5000", "started server on 0.0.0.0:3000", "bound to 0.0.0.0:3000". */
const ANNOUNCEMENTS = [
  /\blisten(?:ing|s)?\s+(?:on|at)\b[^\n]*?(?:(?:port\s*)|:)(\d{1,5})\b/gi,
  /\blisten(?:ing|s)?\s+(?:on|at)\s+(?:port\s+)?(\d{1,5})\b/gi,
  /\b(?:running|serving|started(?:\s+server)?|server\s+started|bound|binding)\s+(?:on|at|to)\s+(?:https?:\/\/)?(?:[\w.-]+|\[[0-9a-f:]+\])?(?:\s*port\s*|:)(\d{1,5})\b/gi,
];

/** Every port `text` announces, in order. */
export function announcedPorts(text: string): number[] {
  const found: Array<{ at: number; port: number }> = [];
  for (const pattern of ANNOUNCEMENTS) {
    for (const match of text.matchAll(pattern)) {
      const port = Number(match[1]);
      if (port >= 1 && port <= 65535) found.push({ at: match.index ?? 0, port });
    }
  }
  // Two patterns may read the same announcement: one port per place in the text.
  const byPlace = new Map(found.map((f) => [f.at, f.port]));
  return [...byPlace.entries()].sort((a, b) => a[0] - b[0]).map(([, port]) => port);
}

/**
 * The port the app says it listens on when that is not `port` (its PORT): the last one announced,
 * unless some line names `port` too (an app may also announce a metrics or admin port).
 */
export function wrongAnnouncedPort(text: string, port: number): number | undefined {
  const ports = announcedPorts(text);
  if (ports.includes(port)) return undefined;
  return ports.at(-1);
}

/** The failure of an app that listens on `announced` while its PORT is `port`. */
export function wrongPortReason(announced: number, port: number): string {
  return `the app says it listens on port ${announced}, but its PORT is ${port}: make it listen on the port in the PORT environment variable (or EXPOSE ${announced} alone in the Dockerfile, so PORT is ${announced})`;
}
