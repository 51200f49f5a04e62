// An in-memory CustomDomainStore for unit tests above the port (the contract suite holds it to the database store).
import type { CustomDomainRow, CustomDomainStore } from '../../src/domain/custom-domains.js';

export class MemoryDomainStore implements CustomDomainStore {
  /** The deployments that exist (a domain of any other is refused as `gone`). */
  readonly deployments = new Set<string>();
  #rows: CustomDomainRow[] = [];

  async add(row: CustomDomainRow, max: number): Promise<'added' | 'taken' | 'full' | 'gone'> {
    if (!this.deployments.has(row.deployment_id)) return 'gone';
    if (this.#rows.some((r) => r.hostname === row.hostname)) return 'taken';
    if (this.#rows.filter((r) => r.deployment_id === row.deployment_id).length >= max) return 'full';
    this.#rows.push({ ...row });
    return 'added';
  }

  async list(deploymentId: string): Promise<CustomDomainRow[]> {
    const order = (a: CustomDomainRow, b: CustomDomainRow): number =>
      a.created_at < b.created_at ? -1 : a.created_at > b.created_at ? 1 : a.hostname < b.hostname ? -1 : a.hostname > b.hostname ? 1 : 0;
    return this.#rows.filter((r) => r.deployment_id === deploymentId).sort(order).map((r) => ({ ...r }));
  }

  async remove(deploymentId: string, id: string): Promise<CustomDomainRow | undefined> {
    const row = this.#rows.find((r) => r.id === id && r.deployment_id === deploymentId);
    if (row !== undefined) this.#rows = this.#rows.filter((r) => r !== row);
    return row;
  }
}
