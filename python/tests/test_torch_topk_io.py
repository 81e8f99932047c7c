"""bench/torch_topk_io.py (fp8dsa_bench's torch.topk peer) refuses bad arguments and files with a
clear message before it needs torch or a GPU."""

import pathlib
import subprocess
import sys

import numpy as np
import pytest

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "bench" / "torch_topk_io.py"


def run(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True)


@pytest.mark.parametrize("args", [
    ["--T", "0", "--N", "8", "--k", "4"],
    ["--T", "2", "--N", "8", "--k", "9"],
    ["--T", "2", "--N", "8", "--k", "4", "--iters", "0"],
    ["--T", "2", "--N", "8", "--k", "4", "--warmup", "-1"],
])
def test_bad_shape(tmp_path, args):
    r = run("io", "--dir", str(tmp_path), *args)
    assert r.returncode != 0
    assert "need T, N, k, iters > 0, k <= N, warmup >= 0" in r.stderr


def test_short_logits_file(tmp_path):
    np.zeros(15, np.float32).tofile(tmp_path / "logits.f32")
    np.zeros(2, np.int32).tofile(tmp_path / "ks.i32")
    np.full(2, 8, np.int32).tofile(tmp_path / "ke.i32")
    r = run("io", "--dir", str(tmp_path), "--T", "2", "--N", "8", "--k", "4")
    assert r.returncode != 0
    assert "logits.f32 holds 15 values, expected 16" in r.stderr
