// Build images on the engine: their names, the retention of the last N, and removal with a deployment.
import type { ContainerEngine } from '../runtime/engine.js';
import { LABEL_DEPLOYMENT, LABEL_INSTANCE, LABEL_MANAGED } from '../runtime/engine.js';
import type { DeploymentStore } from './deployment-store.js';
import { removeDeploymentVolumes } from '../runtime/volumes.js';

/** Every image of an installation is named `slipway-<instance>/…`. */
export const imageRepositoryPrefix = (instanceId: string): string => `slipway-${instanceId.slice(0, 8)}/`;

/**
 * Image reference of a build: a repository of this installation's own, one tag per build. Images
 * are found by this name rather than by labels, because build labels cost the classic builder an
 * extra committed step on every deploy.
 */
export const imageTag = (instanceId: string, deploymentId: string, buildId: string): string =>
  `${imageRepositoryPrefix(instanceId)}${deploymentId}:${buildId}`;

/** Keeps the images of the last `keep` succeeded builds (and the live one); removes older ones. */
export async function pruneImages(store: DeploymentStore, engine: ContainerEngine, deploymentId: string, keep: number): Promise<void> {
  const dep = await store.deployment(deploymentId);
  const succeeded = await store.buildsWithImages(deploymentId);
  for (const old of succeeded.slice(keep)) {
    if (old.id === dep?.live_build_id) continue;
    await engine.removeImage(old.image_id);
    // A compose build's other services' images share its tag with their names added (`<tag>-<service>`).
    if (old.image_id.includes(`:${old.id}-`)) {
      const prefix = old.image_id.slice(0, old.image_id.indexOf(`:${old.id}-`) + old.id.length + 2);
      for (const image of await engine.listImages({})) for (const tag of image.tags) if (tag.startsWith(prefix)) await engine.removeImage(tag);
    }
    await store.setImage(old.id, null);
  }
}

/**
 * Removes every container, image and volume (with its data) this installation holds on the engine
 * for a deployment. Each image is tried even when another could not be removed; the first failure
 * is thrown at the end.
 */
export async function removeDeploymentObjects(engine: ContainerEngine, instanceId: string, deploymentId: string): Promise<void> {
  const labels = { [LABEL_MANAGED]: 'true', [LABEL_INSTANCE]: instanceId, [LABEL_DEPLOYMENT]: deploymentId };
  for (const container of await engine.listContainers(labels)) await engine.removeContainer(container.id);
  await removeDeploymentVolumes(engine, instanceId, deploymentId);
  const prefix = `${imageRepositoryPrefix(instanceId)}${deploymentId}:`;
  const failures: unknown[] = [];
  for (const image of await engine.listImages({})) {
    for (const tag of image.tags) if (tag.startsWith(prefix)) await engine.removeImage(tag).catch((err: unknown) => failures.push(err));
  }
  if (failures.length > 0) throw failures[0];
}
