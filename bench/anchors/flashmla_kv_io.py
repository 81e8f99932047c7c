#!/usr/bin/env python3
"""FlashMLA's FP8-cache sparse *decode* kernel run as prefill on DeepSeek-V3.2's 656-byte rows: what
SGLang runs by default with an FP8 cache on Hopper (`flash_mla_with_kvcache(..., indices=...,
is_fp8_kvcache=True)`, FlashMLA's SM90 "legacy" kernels; bf16 MMA on rows dequantised in shared
memory). A measuring instrument for `fp8dsa_bench --ops=sparse_mla_v32 --flashmla-kv=PATH`.

    flashmla_kv_io.py io --dir D --T T --N N --h H --topk K --sm_scale S [--iters 5] [--no-check]

Reads raw little-endian files from D: q.bf16 [T, h, 576], kv.v32 [N, 656] (the rows as bytes) and
indices.i32 [T, K] (< 0 or >= N: no key). The rows go into a paged cache of 64-row blocks as engines
page it ([ceil(N / 64), 64, 1, 656], the pool padded with zero rows); invalid indices become -1, the
only value the kernel skips. The T tokens run as one sequence of T queries (batch 1). Prints
`kernel_ms_median <ms> ...` (median of CUDA-event timings, the GPU kept busy while the host enqueues)
and writes flashmla_kv_out.bf16 [T, h, 512], flashmla_kv_lse.f32 [T, h] (as the kernel returns it)
and flashmla_kv_maxlogits.f32 [T, h], all NaN: this kernel does not return max_logits.

Needs torch and the sgl-flash-mla wheel (PyPI sgl-flash-mla 1.0.0, MIT): `import flash_mla` when it
is installed, else wheels/sgl_flash_mla-*.whl found beside this file, in $FP8DSA_WHEELS or in
../../.anchors/wheels, installed on first use into $FP8DSA_ANCHOR_SITE (default
/tmp/fp8dsa_anchor_site) with pip, offline.
"""
import argparse
import glob
import importlib
import importlib.util
import os
import statistics
import subprocess
import sys

PAGE = 64  # FlashMLA's sparse decode takes page blocks of 64 rows only
ROW_BYTES = 656


def wheel_candidates():
    """The sgl_flash_mla wheels this script may install, in the order it tries them."""
    here = os.path.dirname(os.path.abspath(__file__))
    for folder in (os.environ.get("FP8DSA_WHEELS"), os.path.join(here, "wheels"),
                   os.path.join(here, os.pardir, os.pardir, ".anchors", "wheels")):
        if folder:
            yield from sorted(glob.glob(os.path.join(folder, "sgl_flash_mla-*.whl")))


def flash_mla_module():
    """flash_mla as installed, or from a private site folder filled from a wheel on first use."""
    if importlib.util.find_spec("flash_mla") is None:
        site = os.environ.get("FP8DSA_ANCHOR_SITE", "/tmp/fp8dsa_anchor_site")
        if not os.path.isdir(os.path.join(site, "flash_mla")):
            wheel = next(wheel_candidates(), None)
            if wheel is None:
                sys.exit("flashmla_kv_io.py: flash_mla is not installed and no sgl_flash_mla wheel was found")
            pip = [sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile"]
            subprocess.check_call(pip + ["--target", site, wheel])
        sys.path.insert(0, site)
    return importlib.import_module("flash_mla")


def median_ms(torch, call, iters):
    """(median, min, max) of `iters` timed calls after one untimed; each call is preceded by about
    0.5 ms of GPU sleep so that its events bracket GPU work, not the host's enqueue."""
    call()
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(iters)]
    for start, stop in events:
        torch.cuda._sleep(1_000_000)
        start.record()
        call()
        stop.record()
    torch.cuda.synchronize()
    times = sorted(start.elapsed_time(stop) for start, stop in events)
    return statistics.median(times), times[0], times[-1]


def load(np, path, dtype, count):
    a = np.fromfile(path, dtype=dtype)
    if a.size != count:
        sys.exit(f"flashmla_kv_io.py: {path} holds {a.size} elements, expected {count}")
    return a


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("mode", choices=["io"])
    ap.add_argument("--dir", required=True)
    ap.add_argument("--T", type=int, required=True)
    ap.add_argument("--N", type=int, required=True)
    ap.add_argument("--h", type=int, required=True)
    ap.add_argument("--topk", type=int, required=True)
    ap.add_argument("--sm_scale", type=float, required=True)
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--no-check", action="store_true", help="accepted for the benchmark's interface")
    a = ap.parse_args()
    if a.h not in (64, 128):
        sys.exit(f"flashmla_kv_io.py: h must be 64 or 128 (given {a.h})")
    import numpy as np
    T, N, h, K, d = a.T, a.N, a.h, a.topk, a.dir
    # The files first, so that a wrong one is reported before torch and the wheel are needed.
    q_bits = load(np, f"{d}/q.bf16", np.int16, T * h * 576)
    rows = load(np, f"{d}/kv.v32", np.uint8, N * ROW_BYTES).reshape(N, ROW_BYTES)
    idx = load(np, f"{d}/indices.i32", np.int32, T * K).reshape(T, K)
    idx = np.where((idx < 0) | (idx >= N), -1, idx).astype(np.int32)
    blocks = (N + PAGE - 1) // PAGE
    pool = np.zeros((blocks * PAGE, ROW_BYTES), np.uint8)
    pool[:N] = rows
    import torch
    fm = flash_mla_module()
    if not fm.has_legacy():
        sys.exit("flashmla_kv_io.py: this flash_mla build has no SM90 (legacy) kernels")
    q = torch.from_numpy(q_bits).view(torch.bfloat16).reshape(1, T, h, 576).cuda()
    cache = torch.from_numpy(pool).reshape(blocks, PAGE, 1, ROW_BYTES).cuda()
    indices = torch.from_numpy(idx).reshape(1, T, K).cuda()
    sched, _ = fm.get_mla_metadata()

    def call():
        return fm.flash_mla_with_kvcache(q, cache, None, None, 512, sched, softmax_scale=a.sm_scale,
                                         is_fp8_kvcache=True, indices=indices, use_legacy=True)

    med, lo, hi = median_ms(torch, call, a.iters)
    out, lse = call()
    torch.cuda.synchronize()
    out.reshape(T, h, 512).contiguous().view(torch.int16).cpu().numpy().tofile(f"{d}/flashmla_kv_out.bf16")
    lse.reshape(h, T).transpose(0, 1).float().contiguous().cpu().numpy().tofile(f"{d}/flashmla_kv_lse.f32")
    np.full(T * h, np.nan, np.float32).tofile(f"{d}/flashmla_kv_maxlogits.f32")
    print(f"kernel_ms_median {med:.4f}  (of {a.iters}; min {lo:.4f} max {hi:.4f})  flash_mla "
          f"{getattr(fm, '__version__', '?')} sparse decode, FP8 V3.2 cache, SM90 legacy")


if __name__ == "__main__":
    main()
