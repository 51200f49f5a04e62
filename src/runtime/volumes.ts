// A deployment's volumes on the engine: their names, creation before a release, removal with the deployment.
import type { VolumeSpec } from '../domain/volumes.js';
import type { ContainerEngine, VolumeMount } from './engine.js';
import { LABEL_DEPLOYMENT, LABEL_INSTANCE, LABEL_MANAGED } from './engine.js';

/** The engine volume behind a deployment's volume `name`: unique per installation and deployment. */
export const engineVolumeName = (instanceId: string, deploymentId: string, name: string): string =>
  `slipway-${instanceId.slice(0, 8)}-${deploymentId}-${name}`;

/**
 * Creates the deployment's volumes that do not exist yet (labelled as the installation's and the
 * deployment's) and returns the mounts a release gets. Existing volumes keep their data.
 */
export async function prepareVolumes(
  engine: ContainerEngine,
  instanceId: string,
  deploymentId: string,
  specs: readonly VolumeSpec[],
): Promise<VolumeMount[]> {
  const labels = { [LABEL_MANAGED]: 'true', [LABEL_INSTANCE]: instanceId, [LABEL_DEPLOYMENT]: deploymentId };
  const mounts: VolumeMount[] = [];
  for (const spec of specs) {
    const source = engineVolumeName(instanceId, deploymentId, spec.name);
    await engine.ensureVolume({ name: source, labels });
    mounts.push({ source, target: spec.mount_path });
  }
  return mounts;
}

/** Removes every volume (and its data) this installation holds for a deployment; its containers must be gone. */
export async function removeDeploymentVolumes(engine: ContainerEngine, instanceId: string, deploymentId: string): Promise<void> {
  const labels = { [LABEL_MANAGED]: 'true', [LABEL_INSTANCE]: instanceId, [LABEL_DEPLOYMENT]: deploymentId };
  for (const volume of await engine.listVolumes(labels)) await engine.removeVolume(volume.name);
}
