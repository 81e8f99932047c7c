"""fp8dsa.reference.lse_merge: a sparse MLA problem's keys split into parts, each part through the
sparse MLA reference without the sink, merged with it, equals one call over all keys; the merge
against the formula in NumPy; argument errors."""

import numpy as np
import pytest

import fp8dsa
import numpy_reference as ref

SM_SCALE = 1.0 / np.sqrt(192.0)


def split_problem(seed, num_tokens=6, num_heads=8, num_kv=300, topk=128):
    rng = np.random.default_rng(seed)
    q = ref.random_e4m3(rng, (num_tokens, num_heads, 576), scale=0.5)
    kv = ref.random_e4m3(rng, (num_kv, 576), scale=0.5)
    indices = ref.random_indices(rng, num_tokens, topk, num_kv)
    indices[0] = -1  # token 0: no valid key
    sink = rng.normal(size=num_heads).astype(np.float32)
    sink[0] = np.inf
    return q, kv, indices, sink


def split_and_merge(q, kv, indices, sink, parts):
    outs, maxes, lses = [], [], []
    for r in range(parts):
        part = np.where((indices >= 0) & (indices % parts != r), -1, indices).astype(np.int32)
        out, max_logits, lse = fp8dsa.reference.sparse_mla_prefill(q, kv, part, SM_SCALE)
        outs.append(ref.bf16_bits(ref.bf16_values(out)))
        maxes.append(max_logits)
        lses.append(lse)
    return fp8dsa.reference.lse_merge(np.stack(outs), np.stack(lses), np.stack(maxes), sink)


@pytest.mark.parametrize("parts", [1, 2, 3])
def test_key_split_equals_one_call(parts):
    q, kv, indices, sink = split_problem(parts)
    out, max_logits, lse = split_and_merge(q, kv, indices, sink, parts)
    whole_out, whole_max, whole_lse = fp8dsa.reference.sparse_mla_prefill(q, kv, indices, SM_SCALE,
                                                                          512, sink)
    got, want = ref.bf16_values(out), ref.bf16_values(whole_out)
    assert np.linalg.norm(got - want) <= 1e-2 * np.linalg.norm(want)
    np.testing.assert_array_equal(max_logits, whole_max)
    finite = np.isfinite(whole_lse)
    np.testing.assert_array_equal(np.isinf(lse), ~finite)
    np.testing.assert_allclose(lse[finite], whole_lse[finite], rtol=1e-6, atol=1e-6)
    assert np.all(got[0] == 0.0) and np.all(np.isinf(lse[0]))  # token 0: no valid key


def test_matches_the_formula():
    rng = np.random.default_rng(7)
    parts, tokens, heads = 4, 3, 16
    out_parts = ref.random_bf16(rng, (parts, tokens, heads, 512))
    lse_parts = rng.uniform(-4, 8, size=(parts, tokens, heads)).astype(np.float32)
    lse_parts[1, 2] = np.inf  # part 1 had no valid key for token 2
    lse_parts[:, 0, 3] = np.inf  # no part had one for (token 0, head 3)
    out, max_logits, lse = fp8dsa.reference.lse_merge(out_parts, lse_parts)
    assert max_logits is None and out.shape == (tokens, heads, 512)
    counts = np.isfinite(lse_parts)
    safe = np.where(counts, lse_parts, -np.inf).astype(np.float64)
    m = safe.max(axis=0)
    with np.errstate(divide="ignore"):  # log(0) where no part counts: replaced by +inf
        sums = np.exp(safe - np.where(np.isfinite(m), m, 0)).sum(axis=0)
        expected_lse = np.where(np.isfinite(m), m + np.log(sums), np.inf)
    weights = np.where(counts, np.exp(safe - np.where(np.isfinite(expected_lse), expected_lse, 0)), 0.0)
    expected_out = (weights[..., None] * ref.bf16_values(out_parts)).sum(axis=0)
    np.testing.assert_allclose(lse, expected_lse, rtol=1e-6)
    np.testing.assert_allclose(ref.bf16_values(out), expected_out, rtol=1e-2, atol=1e-2)
    assert np.all(ref.bf16_values(out)[0, 3] == 0.0)


def test_argument_errors():
    out_parts = np.zeros((2, 3, 4, 512), np.uint16)
    lse_parts = np.zeros((2, 3, 4), np.float32)
    with pytest.raises(TypeError, match="out_parts dtype"):
        fp8dsa.reference.lse_merge(out_parts.astype(np.float32), lse_parts)
    with pytest.raises(ValueError, match=r"out_parts must be \[R, T, h, d_v\]"):
        fp8dsa.reference.lse_merge(out_parts[0], lse_parts)
    with pytest.raises(ValueError, match="lse_parts"):
        fp8dsa.reference.lse_merge(out_parts, lse_parts[:, :2])
    with pytest.raises(ValueError, match="d_v"):
        fp8dsa.reference.lse_merge(np.zeros((2, 3, 4, 256), np.uint16), lse_parts)
