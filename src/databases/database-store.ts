// The port where managed databases, their encrypted credentials and their links to deployments are kept (src/db/managed-database-store.ts).
import type { AuditRecord } from '../domain/audit.js';
import type { DatabaseCredentials, DatabaseEngineName } from './engine-adapter.js';

export const DATABASE_STATUSES = ['creating', 'running', 'stopped', 'failed'] as const;
export type DatabaseStatus = (typeof DATABASE_STATUSES)[number];

/** A managed database as stored (its credentials apart, encrypted). */
export interface DatabaseRow {
  readonly id: string;
  readonly seq: number;
  readonly name: string;
  readonly engine: DatabaseEngineName;
  readonly image: string;
  readonly status: DatabaseStatus;
  readonly error: string | null;
  readonly user_id: string;
  readonly team_id: string | null;
  /** Memory and CPU limits (null: the installation's defaults for apps). */
  readonly memory_bytes: number | null;
  readonly nano_cpus: number | null;
  /** The engine's container while one exists. */
  readonly container_id: string | null;
  /** Bytes of its data directory, as last measured. */
  readonly size_bytes: number;
  /** The instance (runner id) bringing it up; when that instance is gone, the leader finishes the work. */
  readonly worker_instance: string | null;
  readonly created_at: string;
  readonly updated_at: string;
}

export type NewDatabase = Omit<DatabaseRow, 'seq'>;
export type DatabaseChanges = Partial<Pick<DatabaseRow, 'name' | 'status' | 'error' | 'memory_bytes' | 'nano_cpus' | 'container_id' | 'size_bytes' | 'image' | 'worker_instance'>>;

/** A database linked to a deployment: the variable its URL reaches the app as. */
export interface DatabaseLink {
  readonly database_id: string;
  readonly deployment_id: string;
  readonly env: string;
  readonly created_at: string;
}

export interface DatabaseStore {
  /** Records a new database with its credentials (encrypted); `name_taken` when its owner has one of that name. */
  create(row: NewDatabase, credentials: DatabaseCredentials, audit: AuditRecord): Promise<'created' | 'name_taken'>;
  get(id: string): Promise<DatabaseRow | undefined>;
  /** Up to `limit` databases of the user or of the teams, with `seq` below `before` (all when undefined), newest first. */
  list(userId: string, teamIds: readonly string[], before: number | undefined, limit: number): Promise<DatabaseRow[]>;
  /** Every database of the installation (reconciliation). */
  all(): Promise<DatabaseRow[]>;
  /** `name_taken` when a rename collides; `gone` when the row no longer exists. */
  update(id: string, changes: DatabaseChanges, audit?: AuditRecord): Promise<'updated' | 'name_taken' | 'gone'>;
  /** Removes the database with its links and credentials. */
  remove(id: string, audit: AuditRecord): Promise<void>;
  /** Its credentials, decrypted; `audit` (the read itself) is appended first. */
  credentials(id: string, audit?: AuditRecord): Promise<DatabaseCredentials | undefined>;
  /** Adds a link; `env_taken` when the deployment already gets a database under that variable, `linked` when this one is linked already. */
  link(link: DatabaseLink, audit: AuditRecord): Promise<'linked' | 'env_taken' | 'already_linked'>;
  /** Removes a link; false when there was none. */
  unlink(databaseId: string, deploymentId: string, audit: AuditRecord): Promise<boolean>;
  /** The links of a deployment, oldest first. */
  linksOfDeployment(deploymentId: string): Promise<DatabaseLink[]>;
  /** The links of a database with each deployment's name, oldest first. */
  linksOfDatabase(databaseId: string): Promise<Array<DatabaseLink & { deployment_name: string }>>;
}
