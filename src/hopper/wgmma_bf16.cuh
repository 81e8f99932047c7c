// wgmma.mma_async m64n64k16, bf16 x bf16 -> f32, both operands K-major in shared memory (SS). Used
// where a part of a score stays in bf16 beside e4m3 parts (the V3.2 cache's rope): a bf16 k-step
// spans 32 bytes of K like an e4m3 one, so the same descriptors and k-step offsets serve both.
// Unlike e4m3, the bf16 wgmma accumulates in full f32. `accumulate` false overwrites d.
#pragma once

#include <cstdint>

namespace fp8dsa::hopper {

struct WgmmaBf16N64 {
  static constexpr int kAccRegs = 32;
  __device__ __forceinline__ static void ss(float (&d)[32], uint64_t desc_a, uint64_t desc_b, bool accumulate) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
        "%32, %33, p, 1, 1, 0, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
        : "l"(desc_a), "l"(desc_b), "r"(static_cast<int>(accumulate)));
  }
};

}  // namespace fp8dsa::hopper
