"""fp8dsa.reference.topk against NumPy's argsort, with and without the page table."""

import numpy as np

import fp8dsa
import numpy_reference as ref


def problem(seed, num_rows=6, num_keys=300):
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(num_rows, num_keys)).astype(np.float32)
    ks = np.array([0, 10, 50, 0, 299, 120], np.int32)[:num_rows]
    ke = np.array([300, 20, 290, 64, 300, 120], np.int32)[:num_rows]
    return logits, ks, ke


def test_sets_match_numpy_and_short_rows_pad_with_minus_one():
    logits, ks, ke = problem(0)
    indices = fp8dsa.reference.topk(logits, ks, ke, k=64)
    assert indices.shape == (6, 64) and indices.dtype == np.int32
    for t, expected in enumerate(ref.topk_sets(logits, ks, ke, 64)):
        selected = [int(i) for i in indices[t] if i >= 0]
        assert len(selected) == len(expected) and set(selected) == expected
        assert np.sum(indices[t] == -1) == 64 - len(expected)


def test_sorted_by_descending_score():
    logits, ks, ke = problem(1)
    indices = fp8dsa.reference.topk(logits, ks, ke, 16, True)
    for t in range(len(ks)):
        row = indices[t][indices[t] >= 0]
        assert np.all(np.diff(logits[t, row]) <= 0)


def test_page_table_transform():
    logits, ks, ke = problem(2, num_rows=4)
    page_size = 16
    page_table = np.array([[3, 0, -1, 7, 2, 9, 4, 6, 1, 5, 8, 10, 11, 12, 13, 14, 15, 16, 17, 18],
                           [19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36,
                            37, 38]], np.int32)
    row_seq = np.array([0, 1, 0, 1], np.int32)
    row_pos_base = np.array([0, 5, 0, 0], np.int32)
    out = np.full((4, 96), -7, np.int32)
    result = fp8dsa.reference.topk(logits, ks, ke, 32, False, page_table, page_size=page_size,
                                   row_seq=row_seq, row_pos_base=row_pos_base, out=out[:, :32])
    plain = fp8dsa.reference.topk(logits, ks, ke, 32, False)
    for t in range(4):
        expected = sorted(ref.through_page_table(int(i), page_table, page_size, row_seq[t],
                                                 row_pos_base[t]) if i >= 0 else -1
                          for i in plain[t])
        assert sorted(result[t].tolist()) == expected
    assert np.all(out[:, 32:] == -7)


def test_page_table_rows_past_the_table_map_to_minus_one():
    """A row whose sequence (row_seq, or its own index by default) is past the table's rows gets -1
    everywhere instead of reading past the table."""
    logits, ks, ke = problem(3, num_rows=3)
    page_table = np.array([[2, 0, 1, 3]], np.int32)  # one sequence of 4 pages of 16 keys
    ks[:] = 0
    ke[:] = 64
    for row_seq in (np.array([0, 5, 10**9], np.int32), None):
        result = fp8dsa.reference.topk(logits, ks, ke, 4, True, page_table, page_size=16,
                                       row_seq=row_seq)
        assert np.all(result[0] >= 0)
        assert np.all(result[1:] == -1)
