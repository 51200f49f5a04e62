// A database's login (what its commands authenticate with) and a command run in one of its containers.

/** What a database's clients log in with; generated at creation, stored encrypted. */
export interface DatabaseCredentials {
  readonly username: string;
  readonly password: string;
  /** The database (schema) inside the server; Redis: the logical database number. */
  readonly database: string;
}

/** A command run inside the database's container, and how to read its outcome. */
export interface ContainerCommand {
  readonly argv: readonly string[];
  /** Added to the command's environment (passwords go here, never into argv). */
  readonly env: Record<string, string>;
}
