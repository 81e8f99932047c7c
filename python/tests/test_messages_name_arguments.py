"""The library's checks reach Python in the words of the Python arguments: a stride as the
array's stride in a dimension, an extent as the array's T, N, H or h, never a C++ params field
(q_token_stride, logits_stride, indices_stride, attention.num_tokens)."""

import re

import numpy as np
import pytest

import fp8dsa
from numpy.lib.stride_tricks import as_strided

R = fp8dsa.reference
E4M3_ONE = 0x38

# Every params field a message could name: none may reach Python.
CPP_FIELDS = ("num_tokens", "num_keys", "num_heads", "head_dim", "num_kv", "num_rows", "num_parts",
              "d_qk", "q_token_stride", "q_head_stride", "w_token_stride", "k_row_stride",
              "kv_row_stride", "indices_stride", "out_token_stride", "out_head_stride", "logits_stride",
              "token_stride", "head_stride", "part_stride", "pages_per_seq",
              "num_seqs", "page_table_stride", "w", "indexer.num_tokens",
              "indexer.num_keys", "attention.num_tokens", "attention.num_kv")


def e4m3(*shape):
    return np.full(shape, E4M3_ONE, np.uint8)


def strided(shape, strides, dtype, fill=0):
    """An array of `shape` with `strides` (in elements) over a buffer large enough for them."""
    itemsize = np.dtype(dtype).itemsize
    size = 1 + sum((n - 1) * s for n, s in zip(shape, strides))
    buffer = np.full(size, fill, dtype)
    return as_strided(buffer, shape, tuple(s * itemsize for s in strides))


def indexer(**changes):
    args = dict(q=e4m3(4, 8, 128), kv=(e4m3(8, 128), np.ones(8, np.float32)),
                weights=np.ones((4, 8), np.float32), ks=np.zeros(4, np.int32),
                ke=np.full(4, 8, np.int32))
    args.update(changes)
    return args


def attention(**changes):
    args = dict(q=e4m3(4, 16, 576), kv=e4m3(256, 576), indices=np.zeros((4, 64), np.int32),
                sm_scale=0.1)
    args.update(changes)
    return args


def prefill(**changes):
    args = dict(index_q=e4m3(4, 8, 128), index_kv=(e4m3(256, 128), np.ones(256, np.float32)),
                weights=np.ones((4, 8), np.float32), ks=np.zeros(4, np.int32),
                ke=np.full(4, 256, np.int32), q=e4m3(4, 16, 576), kv=e4m3(256, 576), sm_scale=0.1,
                topk=64)
    args.update(changes)
    return args


LOGITS = np.zeros((4, 8), np.float32)
BOUNDS = dict(ks=np.zeros(4, np.int32), ke=np.full(4, 8, np.int32))

CASES = {
    "indexer q row stride": (
        lambda: R.indexer_logits(**indexer(q=strided((4, 8, 128), (1032, 128, 1), np.uint8, E4M3_ONE))),
        r"^indexer: q's stride in dimension 0 \(1032\) must be a multiple of 16"),
    "indexer weights row stride": (
        lambda: R.indexer_logits(**indexer(weights=strided((4, 8), (2, 1), np.float32, 1.0))),
        r"^indexer: weights' stride in dimension 0 \(2\) must be >= q's H \(8\)"),
    "indexer k row stride": (
        lambda: R.indexer_logits(**indexer(kv=(strided((8, 128), (136, 1), np.uint8, E4M3_ONE),
                                              np.ones(8, np.float32)))),
        r"^indexer: k's stride in dimension 0 \(136\) must be a multiple of 16"),
    "indexer heads": (lambda: R.indexer_logits(**indexer(q=e4m3(4, 3, 128), weights=np.ones((4, 3), np.float32))),
                      r"^indexer: q's H \(3\) must be one of \{4, 8, 16, 32, 64\}"),
    "indexer logits row stride": (
        lambda: R.indexer_logits(**indexer(), logits=np.zeros((4, 10), np.float32)[:, :9]),
        r"logits rows must start 16 bytes apart \(.*given 10\): pass a \[T, N\] view of rows of 12 floats"),
    "topk logits row stride": (lambda: R.topk(strided((4, 8), (1, 1), np.float32), **BOUNDS, k=4),
                               r"^topk: logits' stride in dimension 0 \(1\) must be >= logits' N \(8\)"),
    "topk out row stride": (lambda: R.topk(LOGITS, **BOUNDS, k=4, out=strided((4, 4), (2, 1), np.int32)),
                            r"^topk: out's stride in dimension 0 \(2\) must be >= k \(4\)"),
    "topk out width": (lambda: R.topk(LOGITS, **BOUNDS, k=4, out=np.zeros((4, 2), np.int32)),
                       r"^reference.topk: out has 2 elements in dimension 1, k needs 4"),
    "sparse_mla q head stride": (
        lambda: R.sparse_mla_prefill(**attention(q=e4m3(4, 16, 580)[:, :, :576])),
        r"^sparse_mla: q's stride in dimension 1 \(580\) must be a multiple of 16"),
    "sparse_mla kv row stride": (
        lambda: R.sparse_mla_prefill(**attention(kv=e4m3(256, 580)[:, :576])),
        r"^sparse_mla: kv's stride in dimension 0 \(580\) must be a multiple of 16"),
    "sparse_mla indices row stride": (
        lambda: R.sparse_mla_prefill(**attention(indices=strided((4, 64), (1, 1), np.int32))),
        r"^sparse_mla: indices' stride in dimension 0 \(1\) must be >= topk \(64\)"),
    "sparse_mla out head stride": (
        lambda: R.sparse_mla_prefill(**attention(),
                                     out=np.zeros((4, 16, 516), np.uint16)[:, :, :512]),
        r"^sparse_mla: out's stride in dimension 1 \(516\) must be a multiple of 8"),
    "sparse_mla heads": (lambda: R.sparse_mla_prefill(**attention(q=e4m3(4, 12, 576))),
                         r"^sparse_mla: q's h \(12\) must be one of \{8, 16, 32, 64, 128\}"),
    "prefill tokens": (lambda: R.prefill(**prefill(q=e4m3(2, 16, 576))),
                       r"^reference.prefill: q has 2 elements in dimension 0, index_q's T needs 4"),
    "prefill keys": (lambda: R.prefill(**prefill(kv=e4m3(200, 576))),
                     r"^reference.prefill: kv has 200 elements in dimension 0, index_k's N needs 256"),
    "prefill indexer heads": (
        lambda: R.prefill(**prefill(index_q=e4m3(4, 3, 128), weights=np.ones((4, 3), np.float32))),
        r"^prefill: indexer: index_q's H \(3\) must be one of \{4, 8, 16, 32, 64\}"),
    "prefill index_k row stride": (
        lambda: R.prefill(**prefill(index_kv=(e4m3(256, 136)[:, :128], np.ones(256, np.float32)))),
        r"^prefill: indexer: index_k's stride in dimension 0 \(136\) must be a multiple of 16"),
    "lse_merge head stride": (
        lambda: R.lse_merge(np.zeros((2, 3, 16, 516), np.uint16)[..., :512], np.zeros((2, 3, 16), np.float32)),
        r"^lse_merge: out_parts' stride in dimension 2 \(516\) must be a multiple of 8"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_messages_name_the_python_arguments(case):
    call, words = CASES[case]
    with pytest.raises(ValueError) as error:
        call()
    message = str(error.value)
    assert re.search(words, message), message
    for field in CPP_FIELDS:
        assert not re.search(rf"(?<![\w.']){re.escape(field)}(?![\w.])", message), (field, message)
