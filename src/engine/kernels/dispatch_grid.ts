/**
 * Dispatch grids for kernels that index a flat range of workgroups: WebGPU caps each grid
 * dimension at 65535 (maxComputeWorkgroupsPerDimension's default), so a long 1-D range is laid
 * out as (x, y) and the shader recovers the flat index as `wid.x + wid.y * nwg.x`
 * (`@builtin(num_workgroups) nwg`). Excess workgroups (x * y > groups) must exit early.
 * Kernels whose grid dimensions each index something (heads × tokens, tiles × batch) use
 * `gridChecked`, which refuses a dimension over the cap with the kernel's name.
 * Every kernel takes its grid from here; none re-declares the cap.
 */
export const MAX_GROUPS_PER_DIM = 65535;

/** A 2-D grid holding at least `groups` workgroups (at least one). */
export function grid1d(groups: number): [number, number] {
  const g = Math.max(1, Math.ceil(groups));
  if (g <= MAX_GROUPS_PER_DIM) return [g, 1];
  const y = Math.ceil(g / MAX_GROUPS_PER_DIM);
  if (y > MAX_GROUPS_PER_DIM) throw new RangeError(`dispatch of ${g} workgroups is too large`);
  return [Math.ceil(g / y), y];
}

/** A grid used as given (each dimension indexes something), checked against the per-dimension cap. */
export function gridChecked(what: string, x: number, y = 1, z = 1): [number, number, number] {
  for (const d of [x, y, z])
    if (d > MAX_GROUPS_PER_DIM)
      throw new RangeError(
        `${what}: a dispatch of ${x}×${y}×${z} workgroups exceeds ${MAX_GROUPS_PER_DIM} per dimension`,
      );
  return [x, y, z];
}
