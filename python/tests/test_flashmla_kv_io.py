"""bench/anchors/flashmla_kv_io.py (fp8dsa_bench's FlashMLA FP8-cache decode peer) refuses a head
count the kernel does not take and a file of the wrong size with a clear message, before it needs
torch, the wheel or a GPU."""

import pathlib
import subprocess
import sys

import numpy as np

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "bench" / "anchors" / "flashmla_kv_io.py"


def run(directory, h=64, T=2, N=3, K=4):
    args = ["io", "--dir", str(directory), "--T", str(T), "--N", str(N), "--h", str(h), "--topk", str(K),
            "--sm_scale", "0.07"]
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True)


def write_inputs(directory, T=2, N=3, K=4, h=64, rows=None):
    np.zeros(T * h * 576, np.int16).tofile(directory / "q.bf16")
    np.zeros((N if rows is None else rows) * 656, np.uint8).tofile(directory / "kv.v32")
    np.zeros(T * K, np.int32).tofile(directory / "indices.i32")


def test_head_count(tmp_path):
    r = run(tmp_path, h=32)
    assert r.returncode != 0
    assert "h must be 64 or 128 (given 32)" in r.stderr


def test_short_rows_file(tmp_path):
    write_inputs(tmp_path, rows=2)
    r = run(tmp_path)
    assert r.returncode != 0
    assert "kv.v32 holds 1312 elements, expected 1968" in r.stderr
