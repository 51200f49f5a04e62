// The nodes watcher: the leader looks at the runtime's nodes every few seconds and tells `node.down` when one's state goes down.
import type { BackgroundTask } from '../core/background.js';
import type { AppEvents } from '../domain/app-events.js';
import type { NodeDirectory } from '../domain/nodes.js';

/** Seconds between two looks at the nodes. */
export const NODE_LOOK_MS = 5_000;

/**
 * A leader-only task. A node is announced when it was seen up and is now `down`; the first look
 * after (re)gaining leadership only learns the states, so a node already down is not told again.
 */
export function nodeWatchTask(nodes: Pick<NodeDirectory, 'list'>, events: Pick<AppEvents, 'emit'>, everyMs = NODE_LOOK_MS): BackgroundTask {
  let last: Map<string, string> | undefined;
  return {
    name: 'watching the nodes',
    scope: 'leaderOnly',
    everyMs,
    immediately: true,
    run: async (signal) => {
      const seen = await nodes.list(AbortSignal.any([signal, AbortSignal.timeout(everyMs * 2)]));
      const previous = last;
      last = new Map(seen.map((n) => [n.id, n.state]));
      if (previous === undefined) return;
      for (const node of seen) {
        const before = previous.get(node.id);
        if (node.state === 'down' && before !== undefined && before !== 'down') events.emit({ type: 'node.down', nodeId: node.id, hostname: node.hostname });
      }
    },
  };
}
