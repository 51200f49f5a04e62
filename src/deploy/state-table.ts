// The deployment state table of decisions §4, as one function: every status change goes through it.
import { DomainError } from '../core/errors.js';

export type DeploymentStatus = 'pending' | 'building' | 'running' | 'stopped' | 'failed';

/** What happens to a deployment: an operation a user asks for, or an outcome of the machinery. */
export type DeploymentEvent =
  | 'deploy'
  | 'build_succeeded'
  | 'build_failed'
  | 'stop'
  | 'restart'
  | 'rollback'
  /** A user cancels the build in flight (the CLI's and dashboard's cancel). */
  | 'cancel'
  /** Start-up recovery: the release that should serve could not be started again. */
  | 'release_lost';

/** Facts the table's conditional cells need. */
export interface TransitionFacts {
  /** A container serves the deployment's traffic now. */
  readonly serving: boolean;
  /** The live build has an image that can be started again (restart). */
  readonly restartable: boolean;
}

/** The outcome: the new status, and whether the operation changes nothing (stop on stopped). */
export interface Transition {
  readonly to: DeploymentStatus;
  readonly noop: boolean;
}

const refuse = (message: string): never => {
  throw new DomainError('invalid_state', message);
};

/**
 * The state table (decisions §4): the status a deployment moves to when `event` happens in `from`,
 * or `invalid_state` (409) where the event makes no sense. Pure: no I/O, so every cell is tested.
 */
export function transition(from: DeploymentStatus, event: DeploymentEvent, facts: TransitionFacts): Transition {
  const to = (status: DeploymentStatus): Transition => ({ to: status, noop: false });
  switch (event) {
    case 'deploy':
      return to('building');
    case 'build_succeeded':
    case 'build_failed':
      // Only a deployment that is building has a build to finish; anything else was decided meanwhile
      // (a stop or a rollback cancelled the build) and stays as it is.
      if (from !== 'building') return { to: from, noop: true };
      return to(event === 'build_succeeded' ? 'running' : 'failed');
    case 'stop':
      if (from === 'pending') return refuse('the deployment has never been deployed');
      if (from === 'stopped') return { to: 'stopped', noop: true };
      if (from === 'failed' && !facts.serving) return refuse('no container is serving this deployment');
      return to('stopped');
    case 'restart':
      if (from === 'pending') return refuse('the deployment has never been deployed');
      if (from === 'building') return refuse('a build is in progress; wait for it or stop it');
      if (!facts.restartable) return refuse('no succeeded build to restart; deploy first');
      return to('running');
    case 'rollback':
      if (from === 'pending') return refuse('the deployment has never been deployed; there is no build to roll back to');
      return to('running');
    case 'cancel':
      // What served before the build serves on; with nothing serving, the app is stopped.
      if (from !== 'building') return refuse('no build is in progress');
      return to(facts.serving ? 'running' : 'stopped');
    case 'release_lost':
      return to('failed');
  }
}
