"""The CPU references that take hours at real shapes (indexer_logits, sparse_mla_prefill,
prefill) estimate their time first, as the fp8dsa command does, and past max_seconds (an hour
by default) raise ValueError with the estimate instead of running."""

import inspect
import time

import numpy as np
import pytest

import fp8dsa
from fp8dsa import _arrays

R = fp8dsa.reference
E4M3_ONE = 0x38


def e4m3(*shape):
    return np.full(shape, E4M3_ONE, np.uint8)


def indexer_args(T, N, H=64):
    return (e4m3(T, H, 128), (e4m3(N, 128), np.ones(N, np.float32)), np.ones((T, H), np.float32),
            np.zeros(T, np.int32), np.full(T, N, np.int32))


def attention_args(T, N, h=64, topk=2048):
    indices = np.random.default_rng(0).integers(0, N, (T, topk)).astype(np.int32)
    return e4m3(T, h, 576), e4m3(N, 576), indices, 0.05


# Shapes of a few seconds' work on one thread (FP8DSA_CPU_THREADS=1, so that the estimate is the
# same on any machine: 6 to 13 s): refused at max_seconds = 0.5.
SECONDS_OF_WORK = {
    "indexer_logits": lambda **kw: R.indexer_logits(*indexer_args(512, 4096), **kw),
    "sparse_mla_prefill": lambda **kw: R.sparse_mla_prefill(*attention_args(128, 8192), **kw),
    "prefill": lambda **kw: R.prefill(*indexer_args(128, 8192), *attention_args(128, 8192)[:2],
                                      0.05, **kw),
}


@pytest.fixture
def one_thread(monkeypatch):
    monkeypatch.setenv("FP8DSA_CPU_THREADS", "1")


@pytest.mark.parametrize("call", list(SECONDS_OF_WORK))
def test_refused_past_max_seconds_before_anything_runs(call, monkeypatch, one_thread):
    monkeypatch.setattr(_arrays, "empty", lambda *args: pytest.fail(f"allocated {args[1:]}"))
    start = time.monotonic()
    with pytest.raises(ValueError) as refusal:
        SECONDS_OF_WORK[call](max_seconds=0.5)
    assert time.monotonic() - start < 0.5  # refused, not run
    words = str(refusal.value)
    assert words.startswith(f"reference.{call}: the CPU reference would take about ")
    assert " seconds on 1 thread, past max_seconds (0.5)" in words
    assert "max_seconds=None to run it however long it takes" in words
    assert f"run fp8dsa.{call} on a GPU" in words


def test_the_estimate_counts_the_work_the_reference_does(one_thread):
    """Keys outside [ks, ke) and indices outside [0, N) cost nothing: the same shapes with almost
    no valid work pass the limit that refuses them above."""
    q, kv, weights, ks, ke = indexer_args(512, 4096)
    logits = R.indexer_logits(q, kv, weights, ks, ks + 1, max_seconds=0.5)
    assert logits.shape == (512, 4096)
    q, kv, indices, sm_scale = attention_args(128, 8192)
    indices[:, 1:] = -1
    assert R.sparse_mla_prefill(q, kv, indices, sm_scale, max_seconds=0.5)[0].shape == (128, 64, 512)


def test_no_limit_and_the_default():
    tiny = indexer_args(4, 8, H=4)
    assert R.indexer_logits(*tiny, max_seconds=None).shape == (4, 8)
    for call in (R.indexer_logits, R.sparse_mla_prefill, R.prefill):
        assert inspect.signature(call).parameters["max_seconds"].default == 3600.0
    with pytest.raises(TypeError, match=r"reference.indexer_logits: max_seconds must be a real number"):
        R.indexer_logits(*tiny, max_seconds="1h")
    for bad in (0, -1.0, float("nan")):
        with pytest.raises(ValueError, match=r"max_seconds \(.*\) must be > 0, or None for no limit"):
            R.indexer_logits(*tiny, max_seconds=bad)
