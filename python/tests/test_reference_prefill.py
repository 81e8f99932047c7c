"""fp8dsa.reference.prefill: the three references in one call equal the three calls chained."""

import numpy as np
import pytest

import fp8dsa
import numpy_reference as ref

SM_SCALE = 1.0 / np.sqrt(192.0)


def problem(seed):
    rng = np.random.default_rng(seed)
    ks, ke, num_keys = fp8dsa.build_causal_bounds([3, 2], [90, 40])
    num_tokens = len(ks)
    index_q = ref.random_e4m3(rng, (num_tokens, 8, 64))
    index_k = ref.random_e4m3(rng, (num_keys, 64))
    index_k_scale = rng.uniform(0.5, 1.5, size=num_keys).astype(np.float32)
    weights = rng.normal(size=(num_tokens, 8)).astype(np.float32)
    q = ref.random_e4m3(rng, (num_tokens, 16, 576), scale=0.5)
    kv = ref.random_e4m3(rng, (num_keys, 576), scale=0.5)
    return index_q, (index_k, index_k_scale), weights, ks, ke, q, kv


def test_prefill_equals_the_chained_stages():
    index_q, index_kv, weights, ks, ke, q, kv = problem(0)
    sink = np.linspace(-1, 1, 16).astype(np.float32)
    out, max_logits, lse = fp8dsa.reference.prefill(index_q, index_kv, weights, ks, ke, q, kv,
                                                    SM_SCALE, 64, 512, sink)

    logits = fp8dsa.reference.indexer_logits(index_q, index_kv, weights, ks, ke)
    indices = fp8dsa.reference.topk(logits, ks, ke, 64)
    chained = fp8dsa.reference.sparse_mla_prefill(q, kv, indices, SM_SCALE, 512, sink)
    assert np.array_equal(np.asarray(out).view(np.uint16), np.asarray(chained[0]).view(np.uint16))
    assert np.array_equal(max_logits, chained[1]) and np.array_equal(lse, chained[2])

    # And the chain is the NumPy attention over the keys NumPy's own top-k picks (the first token
    # has more than 64 keys, so the selection matters).
    expected_sets = ref.topk_sets(ref.indexer_logits(index_q, *index_kv, weights, ks, ke), ks, ke, 64)
    expected_indices = np.full((len(ks), 64), -1, np.int32)
    for t, keys in enumerate(expected_sets):
        expected_indices[t, :len(keys)] = sorted(keys)
    expected = ref.sparse_mla(q, kv, expected_indices, SM_SCALE, attn_sink=sink)
    np.testing.assert_allclose(ref.bf16_values(out), expected[0], rtol=1e-2,
                               atol=1e-2 * np.abs(expected[0]).max())
    np.testing.assert_allclose(lse, expected[2], rtol=1e-6)


def test_prefill_checks_the_shared_key_space():
    index_q, index_kv, weights, ks, ke, q, kv = problem(1)
    with pytest.raises(ValueError, match=r"kv has \d+ elements in dimension 0, index_k's N needs \d+"):
        fp8dsa.reference.prefill(index_q, index_kv, weights, ks, ke, q, kv[:-1], SM_SCALE, 64)
