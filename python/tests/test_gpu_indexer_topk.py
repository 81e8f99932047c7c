"""fp8dsa.indexer_logits and fp8dsa.topk on torch CUDA tensors against the CPU references."""

import numpy as np
import pytest

from gpu_support import (DEVICE, assert_logits_match, cuda, host, index_sets, indexer_args,
                         indexer_problem, indexer_reference, torch)

import fp8dsa


@pytest.mark.parametrize("kernel", ["auto", "q_resident", "k_resident", "reference"])
@pytest.mark.parametrize("num_heads", [16, 64])
def test_indexer_matches_reference(kernel, num_heads):
    problem = indexer_problem(num_heads, [37, 90], [179, 0], num_heads)
    logits = fp8dsa.indexer_logits(*indexer_args(problem), kernel=kernel)
    assert logits.shape == (127, 306) and logits.dtype == torch.float32
    assert logits.stride(0) % 4 == 0 and logits.stride(0) >= 306
    assert_logits_match(logits, indexer_reference(problem))


@pytest.mark.parametrize("split_epilogue", [False, True])
def test_indexer_split_epilogue(split_epilogue):
    # H = 64: the split epilogue (an option) and the exact default, both within SPEC 6 on random
    # inputs; fused_topk and prefill take the same switch.
    problem = indexer_problem(7, [37, 90], [179, 0], 64)
    logits = fp8dsa.indexer_logits(*indexer_args(problem), split_epilogue=split_epilogue)
    assert_logits_match(logits, indexer_reference(problem))
    indices = fp8dsa.fused_topk(*indexer_args(problem), k=64, split_epilogue=split_epilogue)
    assert indices.shape == (127, 64)
    with pytest.raises(TypeError, match="split_epilogue"):
        fp8dsa.indexer_logits(*indexer_args(problem), split_epilogue="yes")


def test_indexer_given_padded_logits_without_fill():
    problem = indexer_problem(1, [20], [45], 32)
    buffer = torch.full((20, 128), 3.0, device=DEVICE)
    logits = fp8dsa.indexer_logits(*indexer_args(problem), logits=buffer[:, :65], fill_masked=False)
    expected = indexer_reference(problem)
    inside = np.isfinite(expected)
    assert_logits_match(torch.where(torch.from_numpy(inside).to(DEVICE), logits, float("-inf")),
                        expected)
    assert torch.all(logits[torch.from_numpy(~inside).to(DEVICE)] == 3.0)
    assert torch.all(buffer[:, 65:] == 3.0)


def test_indexer_rejections():
    problem = indexer_problem(2, [8], [8], 16)
    q, kv, weights, ks, ke = indexer_args(problem)
    with pytest.raises(ValueError, match="weights must be on a CUDA device"):
        fp8dsa.indexer_logits(q, kv, weights.cpu(), ks, ke)
    with pytest.raises(ValueError, match="kernel 'fastest' must be one of 'auto', 'q_resident'"):
        fp8dsa.indexer_logits(q, kv, weights, ks, ke, kernel="fastest")
    with pytest.raises(ValueError, match=r"logits rows must start 16 bytes apart .*given 17\): pass a \[T, N\] view of rows of 20"):
        fp8dsa.indexer_logits(q, kv, weights, ks, ke, logits=torch.empty(8, 17, device=DEVICE))
    with pytest.raises(TypeError, match=r"ks dtype must be int32 \(given int64\)"):
        fp8dsa.indexer_logits(q, kv, weights, ks.long(), ke)


def test_indexer_arguments_checked_before_the_logits_are_allocated(monkeypatch):
    """H = 3, and a q broadcast to 2**30 rows (8 TiB of logits), raise their own errors before
    any allocation."""
    problem = indexer_problem(3, [8], [120], 3)
    monkeypatch.setattr(fp8dsa._arrays, "empty", lambda *args: pytest.fail(f"allocated {args[1:]}"))
    with pytest.raises(ValueError, match=r"\(3\) must be one of \{4, 8, 16, 32, 64\}"):
        fp8dsa.indexer_logits(*indexer_args(problem))
    q, kv, weights, ks, ke = indexer_args(indexer_problem(4, [8], [2040], 8))
    rows = 2**30
    with pytest.raises(ValueError, match="q has stride 0 in dimension 0"):
        fp8dsa.indexer_logits(q[:1].expand(rows, -1, -1), kv, weights[:1].expand(rows, -1),
                              ks[:1].expand(rows), ke[:1].expand(rows))


def logits_problem(seed, num_rows, num_keys):
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(num_rows, num_keys)).astype(np.float32)
    ks = rng.integers(0, num_keys // 4, size=num_rows).astype(np.int32)
    ke = rng.integers(num_keys // 2, num_keys + 1, size=num_rows).astype(np.int32)
    ke[0] = ks[0] + 5  # a row shorter than k
    return logits, ks, ke


@pytest.mark.parametrize("num_rows,num_keys,k", [(64, 4096, 512), (300, 1000, 2048),
                                                 (4, 131072, 2048)])
def test_topk_matches_reference(num_rows, num_keys, k):
    logits, ks, ke = logits_problem(num_keys, num_rows, num_keys)
    indices = fp8dsa.topk(cuda(logits), cuda(ks), cuda(ke), k)
    assert indices.shape == (num_rows, k) and indices.dtype == torch.int32
    expected = fp8dsa.reference.topk(logits, ks, ke, k)
    assert index_sets(host(indices)) == index_sets(expected)
    assert np.array_equal(np.sum(host(indices) < 0, axis=1), np.sum(expected < 0, axis=1))


def test_topk_sorted_page_table_and_given_out():
    logits, ks, ke = logits_problem(7, 6, 2000)
    page_table = np.random.default_rng(0).permutation(6 * 40).reshape(6, 40).astype(np.int32)
    page_table[2, 5] = -1
    row_seq = np.arange(6)[::-1].astype(np.int32)
    out = torch.full((6, 300), -7, dtype=torch.int32, device=DEVICE)
    indices = fp8dsa.topk(cuda(logits), cuda(ks), cuda(ke), 256, False, cuda(page_table),
                          page_size=64, row_seq=cuda(row_seq), out=out[:, :256])
    assert indices.data_ptr() == out.data_ptr()
    expected = fp8dsa.reference.topk(logits, ks, ke, 256, False, page_table, page_size=64,
                                     row_seq=row_seq)
    assert index_sets(host(indices)) == index_sets(expected)
    assert np.array_equal(np.sum(host(indices) < 0, axis=1), np.sum(expected < 0, axis=1))
    assert torch.all(out[:, 256:] == -7)

    ordered = host(fp8dsa.topk(cuda(logits), cuda(ks), cuda(ke), 256, True))
    for t, row in enumerate(ordered):
        row = row[row >= 0]
        assert np.all(np.diff(logits[t, row]) <= 0)


def test_topk_rejections():
    logits, ks, ke = logits_problem(8, 4, 100)
    with pytest.raises(ValueError, match=r"topk: k \(0\) must be in \[1, 2048\]"):
        fp8dsa.topk(cuda(logits), cuda(ks), cuda(ke), 0)
    with pytest.raises(ValueError, match="ks must be on a CUDA device"):
        fp8dsa.topk(cuda(logits), torch.from_numpy(ks), cuda(ke), 16)
