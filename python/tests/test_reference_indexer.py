"""fp8dsa.reference.indexer_logits and build_causal_bounds against independent NumPy forms."""

import numpy as np
import pytest

import fp8dsa
import numpy_reference as ref


def problem(seed, num_tokens, num_heads, head_dim, num_keys):
    rng = np.random.default_rng(seed)
    q = ref.random_e4m3(rng, (num_tokens, num_heads, head_dim))
    k = ref.random_e4m3(rng, (num_keys, head_dim))
    k_scale = rng.uniform(0.5, 2.0, size=num_keys).astype(np.float32)
    weights = rng.normal(size=(num_tokens, num_heads)).astype(np.float32)
    return q, k, k_scale, weights


@pytest.mark.parametrize("num_heads,head_dim", [(4, 64), (16, 128)])
def test_matches_numpy_logits_with_causal_bounds(num_heads, head_dim):
    ks, ke, num_keys = fp8dsa.build_causal_bounds([3, 4], [5, 2])
    q, k, k_scale, weights = problem(0, len(ks), num_heads, head_dim, num_keys)
    logits = fp8dsa.reference.indexer_logits(q, (k, k_scale), weights, ks, ke)
    assert logits.shape == (7, num_keys) and logits.dtype == np.float32
    expected = ref.indexer_logits(q, k, k_scale, weights, ks, ke)
    assert np.array_equal(np.isinf(logits), np.isinf(expected))
    finite = np.isfinite(expected)
    np.testing.assert_allclose(logits[finite], expected[finite], rtol=1e-5,
                               atol=1e-6 * np.abs(expected[finite]).max())


def test_given_logits_with_padded_rows_and_no_fill():
    """A [T, N] view of a wider buffer; without fill_masked the cells outside [ks, ke) keep what
    was there."""
    q, k, k_scale, weights = problem(1, 3, 8, 128, 10)
    ks = np.array([0, 2, 5], np.int32)
    ke = np.array([4, 9, 5], np.int32)
    buffer = np.full((3, 16), 7.0, np.float32)
    logits = fp8dsa.reference.indexer_logits(q, (k, k_scale), weights, ks, ke,
                                             logits=buffer[:, :10], fill_masked=False)
    expected = ref.indexer_logits(q, k, k_scale, weights, ks, ke)
    inside = np.isfinite(expected)
    np.testing.assert_allclose(logits[inside], expected[inside], rtol=1e-5, atol=1e-5)
    assert np.all(logits[~inside] == 7.0)
    assert np.all(buffer[:, 10:] == 7.0)


def test_single_token_with_an_unaligned_key_count():
    q, k, k_scale, weights = problem(2, 1, 4, 64, 6)
    ks = np.zeros(1, np.int32)
    ke = np.full(1, 6, np.int32)
    logits = fp8dsa.reference.indexer_logits(q, (k, k_scale), weights, ks, ke)
    np.testing.assert_allclose(logits, ref.indexer_logits(q, k, k_scale, weights, ks, ke), rtol=1e-5)


def test_causal_bounds():
    ks, ke, num_keys = fp8dsa.build_causal_bounds(np.array([2, 0, 3]), [4, 7, 0])
    assert ks.dtype == np.int32 and ke.dtype == np.int32
    # Sequence 0: rows [0, 6), sequence 1: [6, 13) with no new token, sequence 2: [13, 16).
    assert ks.tolist() == [0, 0, 13, 13, 13]
    assert ke.tolist() == [5, 6, 14, 15, 16]
    assert num_keys == 16


def test_causal_bounds_errors():
    with pytest.raises(ValueError, match=r"sequences\[1\]\.new_tokens \(-1\) must be in"):
        fp8dsa.build_causal_bounds([1, -1], [0, 0])
    with pytest.raises(ValueError, match="total keys"):
        fp8dsa.build_causal_bounds([1, 1], [2**31 - 2, 5])
    with pytest.raises(ValueError, match="new_tokens has 2 sequences, cached_keys 1"):
        fp8dsa.build_causal_bounds([1, 2], [0])
    with pytest.raises(TypeError, match="integers"):
        fp8dsa.build_causal_bounds([1.5], [0])
    assert fp8dsa.build_causal_bounds([], [])[2] == 0
