// Where an app's HTTP is reached: the address a runtime gives for a release, and a data plane sends to.

/** A TCP address that serves an app's HTTP (the runtime decides which; the data plane dials it). */
export interface Upstream {
  readonly host: string;
  readonly port: number;
}
