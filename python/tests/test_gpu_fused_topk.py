"""fp8dsa.fused_topk (the fused score + top-k) on torch CUDA tensors: the same rows as
indexer_logits then topk, without the logits; sorted order, the page table, a given out and errors."""

import numpy as np
import pytest

from gpu_support import cuda, indexer_args, indexer_problem, torch

import fp8dsa


def row_sets(indices):
    return [sorted(int(i) for i in row if i >= 0) for row in indices.cpu().numpy()]


@pytest.mark.parametrize("num_heads,k", [(64, 64), (32, 300), (8, 2048)])
def test_same_rows_as_indexer_then_topk(num_heads, k):
    problem = indexer_problem(7, [120, 40], [900, 3000], num_heads)
    args = indexer_args(problem)
    got = fp8dsa.fused_topk(*args, k)
    assert got.shape == (160, k) and got.dtype == torch.int32
    logits = fp8dsa.indexer_logits(*args, fill_masked=False)
    want = fp8dsa.topk(logits, args[3], args[4], k)
    assert row_sets(got) == row_sets(want)
    rows = got.cpu().numpy()
    for row in rows:  # ascending rows, -1 after them
        valid = row[row >= 0]
        assert np.all(np.diff(valid) > 0) and np.all(row[len(valid):] == -1)

    by_score = fp8dsa.fused_topk(*args, k, sorted=True)
    assert row_sets(by_score) == row_sets(got)
    scores = logits.cpu().numpy()
    for t, row in enumerate(by_score.cpu().numpy()):
        s = scores[t, row[row >= 0]]
        assert np.all(np.diff(s) <= 0)


def test_page_table_and_given_out():
    problem = indexer_problem(8, [64], [2000], 64)
    args = indexer_args(problem)
    pages = (int(problem["ke"].max()) + 63) // 64
    table = torch.arange(pages, dtype=torch.int32, device=args[0].device).flip(0).reshape(1, -1).repeat(64, 1)
    row_seq = torch.zeros(64, dtype=torch.int32, device=args[0].device)
    out = torch.full((64, 128), -7, dtype=torch.int32, device=args[0].device)
    got = fp8dsa.fused_topk(*args, 128, False, table, page_size=64, row_seq=row_seq, out=out)
    assert got is out
    plain = fp8dsa.fused_topk(*args, 128).cpu().numpy()
    ks = problem["ks"]
    flipped = table[0].cpu().numpy()
    for t in range(64):
        pos = plain[t] - ks[t]
        want = np.where(plain[t] >= 0, flipped[pos // 64] * 64 + pos % 64, -1)
        assert np.array_equal(np.sort(got[t].cpu().numpy()), np.sort(want))


def test_argument_errors():
    problem = indexer_problem(9, [16], [100], 64)
    args = indexer_args(problem)
    with pytest.raises(ValueError, match=r"k \(0\) must be in \[1, 2048\]"):
        fp8dsa.fused_topk(*args, 0)
    with pytest.raises(TypeError, match="weights dtype must be float32"):
        fp8dsa.fused_topk(*args[:2], args[2].double(), *args[3:], 64)
    with pytest.raises(ValueError, match="out has 8 elements in dimension 0, q's T needs 16"):
        fp8dsa.fused_topk(*args, 64, out=torch.zeros(8, 64, dtype=torch.int32, device=args[0].device))
