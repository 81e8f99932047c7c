"""Every argument is checked before an output is allocated from the shapes: a wrong argument
raises its own error, never a MemoryError for an output sized from it (a q broadcast to 2**30
rows once asked for 8 TiB of logits before its stride-0 error)."""

import numpy as np
import pytest

import fp8dsa
from fp8dsa import _arrays

R = fp8dsa.reference
E4M3_ONE = 0x38


def e4m3(*shape):
    return np.full(shape, E4M3_ONE, np.uint8)


def indexer_args(T=4, N=8, H=8, D=128):
    return dict(q=e4m3(T, H, D), kv=(e4m3(N, D), np.ones(N, np.float32)),
                weights=np.ones((T, H), np.float32), ks=np.zeros(T, np.int32),
                ke=np.full(T, N, np.int32))


def attention_args(T=4, h=16, N=256, topk=64):
    return dict(q=e4m3(T, h, 576), kv=e4m3(N, 576),
                indices=np.zeros((T, topk), np.int32), sm_scale=0.1)


def broadcast_rows(x, rows):
    return np.broadcast_to(x[:1], (rows,) + x.shape[1:])


@pytest.fixture
def no_allocation(monkeypatch):
    """Fails the test at the first output or workspace the Python layer allocates."""
    def empty(like, shape, dtype):
        raise AssertionError(f"allocated {dtype} {shape} before the arguments were checked")
    monkeypatch.setattr(_arrays, "empty", empty)


def lse_merge_args(d_v=512):
    return dict(out_parts=np.zeros((2, 3, 16, d_v), np.uint16),
                lse_parts=np.zeros((2, 3, 16), np.float32))


# A call whose only fault the library finds, and the words of that fault.
LIBRARY_REFUSALS = {
    "indexer_logits H = 3": (lambda: R.indexer_logits(**indexer_args(H=3)),
                             r"\(3\) must be one of \{4, 8, 16, 32, 64\}"),
    "sparse_mla_prefill h = 12": (lambda: R.sparse_mla_prefill(**attention_args(h=12)),
                                  r"\(12\) must be one of \{8, 16, 32, 64, 128\}"),
    "sparse_mla_prefill topk = 100": (lambda: R.sparse_mla_prefill(**attention_args(topk=100)),
                                      r"topk \(100\) must be a multiple of 64"),
    "topk page_size = 0": (lambda: R.topk(np.zeros((2, 8), np.float32), np.zeros(2, np.int32),
                                          np.full(2, 8, np.int32), 4,
                                          page_table=np.zeros((2, 4), np.int32), page_size=0),
                           r"page_size \(0\) must be in"),
    "prefill topk = 100": (lambda: R.prefill(*indexer_args(N=256).values(), e4m3(4, 16, 576),
                                             e4m3(256, 576), 0.1, topk=100),
                           r"topk \(100\) must be a multiple of 64"),
    "lse_merge d_v = 256": (lambda: R.lse_merge(**lse_merge_args(d_v=256)),
                            r"d_v \(256\) must be one of \{512\}"),
}


@pytest.mark.parametrize("case", list(LIBRARY_REFUSALS))
def test_library_checks_come_before_any_allocation(case, no_allocation):
    call, words = LIBRARY_REFUSALS[case]
    with pytest.raises(ValueError, match=words):
        call()


def test_valid_calls_still_allocate():
    """The checks are no dry run of their own: valid arguments reach the allocation and the call."""
    assert R.indexer_logits(**indexer_args()).shape == (4, 8)
    assert R.sparse_mla_prefill(**attention_args())[0].shape == (4, 16, 512)
    assert R.topk(np.zeros((2, 8), np.float32), np.zeros(2, np.int32), np.full(2, 8, np.int32),
                  4).shape == (2, 4)


def test_indexer_heads_before_32_gib_of_logits():
    """H = 3 at T = N = 92682: the num_heads error, not MemoryError for the [T, N] logits."""
    with pytest.raises(ValueError, match=r"\(3\) must be one of \{4, 8, 16, 32, 64\}"):
        R.indexer_logits(**indexer_args(T=92682, N=92682, H=3))


# Inputs broadcast to 2**30 rows (stride 0, no memory): the outputs sized from them would be
# terabytes.
def test_broadcast_q_before_8_tib_of_logits():
    args = indexer_args(N=2048)
    args.update(q=broadcast_rows(args["q"], 2**30), weights=broadcast_rows(args["weights"], 2**30),
                ks=broadcast_rows(args["ks"], 2**30), ke=broadcast_rows(args["ke"], 2**30))
    with pytest.raises(ValueError, match="q has stride 0 in dimension 0"):
        R.indexer_logits(**args)


def test_broadcast_q_before_16_tib_of_attention_output():
    args = attention_args()
    args.update(q=broadcast_rows(args["q"], 2**30), indices=broadcast_rows(args["indices"], 2**30))
    with pytest.raises(ValueError, match="q has stride 0 in dimension 0"):
        R.sparse_mla_prefill(**args)


def test_broadcast_logits_before_8_tib_of_indices():
    rows = 2**30
    logits = broadcast_rows(np.zeros((1, 4096), np.float32), rows)
    bounds = broadcast_rows(np.zeros(1, np.int32), rows)
    with pytest.raises(ValueError, match="logits has stride 0 in dimension 0"):
        R.topk(logits, bounds, bounds, 2048)
