// Programmatic dependent launch (sm_90): a grid lets the next one on its stream start before it
// has finished, and that one waits for it where it must. The host side is
// launch_programmatic_dependent (core/launch.cuh).
#pragma once

namespace fp8dsa::hopper {

// Lets a grid launched after this one with the programmatic attribute be scheduled once every CTA
// of this grid has executed it (or exited). One thread of a CTA suffices; without it, a CTA counts
// at its exit. It changes nothing when no such grid follows.
__device__ __forceinline__ void launch_dependents() {
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
}

// Waits until the grids this one was launched after have completed and their memory is visible to
// it. A grid that calls it also completes after them, so the work after it on the stream sees both.
__device__ __forceinline__ void wait_prerequisite_grids() { asm volatile("griddepcontrol.wait;\n" ::: "memory"); }

}  // namespace fp8dsa::hopper
