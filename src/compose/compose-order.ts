// Step four: the order services start in (every service after those it depends on), or the cycle that makes one impossible.

/**
 * The services in start order (dependencies first; otherwise in file order), or `{cycle}` naming
 * the services of one cycle in order (`a → b → a`).
 */
export function startOrder(services: ReadonlyArray<{ name: string; dependsOn: ReadonlyArray<{ service: string }> }>): { order: string[] } | { cycle: string[] } {
  const byName = new Map(services.map((s) => [s.name, s]));
  const state = new Map<string, 'visiting' | 'done'>();
  const order: string[] = [];
  const stack: string[] = [];
  const visit = (name: string): string[] | undefined => {
    const seen = state.get(name);
    if (seen === 'done') return undefined;
    if (seen === 'visiting') return [...stack.slice(stack.indexOf(name)), name];
    state.set(name, 'visiting');
    stack.push(name);
    for (const dep of byName.get(name)?.dependsOn ?? []) {
      if (!byName.has(dep.service)) continue;
      const cycle = visit(dep.service);
      if (cycle !== undefined) return cycle;
    }
    stack.pop();
    state.set(name, 'done');
    order.push(name);
    return undefined;
  };
  for (const s of services) {
    const cycle = visit(s.name);
    if (cycle !== undefined) return { cycle };
  }
  return { order };
}
