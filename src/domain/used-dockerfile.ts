// What a build was built from (decisions §24): the Dockerfile's path and text, and whether Slipway generated it.

/** What a build was built from. */
export interface UsedDockerfile {
  /** Its path in the build context (the deployment's dockerfile_path). */
  readonly path: string;
  readonly dockerfile: string;
  /** True when the source had none and Slipway generated it. */
  readonly generated: boolean;
  /** What was detected and why (the lines the build log shows); null for the source's own Dockerfile. */
  readonly detection: readonly string[] | null;
}
