#!/usr/bin/env python3
"""torch.topk as a top-k peer of fp8dsa_bench (--torch-topk=bench/torch_topk_io.py), the way an engine's
torch fallback selects DeepSeek-V3.2's keys: one torch.topk over the [T, N] logits, whose cells outside
each row's window [ks, ke) hold -inf (fp8dsa's logits layout), then the slots past a row's length set
to -1.

    python3 bench/torch_topk_io.py io --dir D --T T --N N --k K [--iters 20] [--warmup 5]

Reads D/logits.f32 [T, N], D/ks.i32 [T] and D/ke.i32 [T]; writes D/torch_topk_indices.i32 [T, K]
(absolute columns, -1 past a row's length) and prints `kernel_ms_median <ms> min <ms> max <ms>`: CUDA
events around each torch.topk call, all calls enqueued before one synchronisation. The -1 fill is not
timed (torch.topk is the whole of the peer's work on such logits). Needs torch with CUDA.
"""

import argparse
import os
import sys

import numpy as np


def read(path, dtype, count):
    data = np.fromfile(path, dtype=dtype)
    if data.size != count:
        sys.exit(f"torch_topk_io: {path} holds {data.size} values, expected {count}")
    return data


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="mode", required=True)
    io = sub.add_parser("io")
    io.add_argument("--dir", required=True)
    io.add_argument("--T", type=int, required=True)
    io.add_argument("--N", type=int, required=True)
    io.add_argument("--k", type=int, required=True)
    io.add_argument("--iters", type=int, default=20)
    io.add_argument("--warmup", type=int, default=5)
    args = parser.parse_args()
    if args.T <= 0 or args.N <= 0 or args.k <= 0 or args.k > args.N or args.iters <= 0 or args.warmup < 0:
        sys.exit("torch_topk_io: need T, N, k, iters > 0, k <= N, warmup >= 0")

    host = read(os.path.join(args.dir, "logits.f32"), np.float32, args.T * args.N)
    ks = read(os.path.join(args.dir, "ks.i32"), np.int32, args.T).astype(np.int64)
    ke = read(os.path.join(args.dir, "ke.i32"), np.int32, args.T).astype(np.int64)

    import torch

    if not torch.cuda.is_available():
        sys.exit("torch_topk_io: no CUDA device")
    logits = torch.from_numpy(host).view(args.T, args.N).cuda()
    torch.cuda.synchronize()

    for _ in range(args.warmup):
        torch.topk(logits, args.k, dim=-1)
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(args.iters)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(args.iters)]
    for i in range(args.iters):
        starts[i].record()
        _, indices = torch.topk(logits, args.k, dim=-1)
        ends[i].record()
    torch.cuda.synchronize()
    times = sorted(s.elapsed_time(e) for s, e in zip(starts, ends))

    out = indices.to(torch.int32).cpu().numpy()
    length = np.clip(ke - ks, 0, None)
    slot = np.arange(args.k)[None, :]
    out[slot >= length[:, None]] = -1
    out.tofile(os.path.join(args.dir, "torch_topk_indices.i32"))
    print(f"kernel_ms_median {times[len(times) // 2]:.5f} min {times[0]:.5f} max {times[-1]:.5f} "
          f"T={args.T} N={args.N} k={args.k}")


if __name__ == "__main__":
    main()
