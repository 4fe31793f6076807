// grid: where a workgroup sits in a 1-D dispatch laid out as (x, y) by dispatch_grid.ts.
// An entry point takes `at: Groups` (uniform across the workgroup, so barriers may follow a test
// on it) beside its `@builtin(local_invocation_index) lid`, and asks for its flat workgroup index
// (`grid_group(at)`, one workgroup per row) or its flat thread index (`grid_thread(at, lid)`, one
// thread per element; needs the including kernel's `override WG`, its workgroup size).

struct Groups {
  @builtin(workgroup_id) wid: vec3<u32>,
  @builtin(num_workgroups) nwg: vec3<u32>,
}

fn grid_group(at: Groups) -> u32 {
  return at.wid.x + at.wid.y * at.nwg.x;
}

fn grid_thread(at: Groups, lid: u32) -> u32 {
  return grid_group(at) * WG + lid;
}
