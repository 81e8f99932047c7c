"""fp8dsa.reference.sparse_mla_prefill (the library's CPU reference, through the bindings) against
an independent f64 NumPy attention on the dequantised e4m3 values."""

import numpy as np
import pytest

import fp8dsa
import numpy_reference as ref

SM_SCALE = 1.0 / np.sqrt(192.0)


def problem(seed, num_tokens=5, num_heads=8, num_kv=150, topk=128):
    rng = np.random.default_rng(seed)
    q = ref.random_e4m3(rng, (num_tokens, num_heads, 576), scale=0.5)
    kv = ref.random_e4m3(rng, (num_kv, 576), scale=0.5)
    indices = ref.random_indices(rng, num_tokens, topk, num_kv)
    return rng, q, kv, indices


def assert_attention_close(result, expected):
    out, max_logits, lse = result
    expected_out, expected_max, expected_lse = expected
    # bf16 keeps 8 significant bits.
    np.testing.assert_allclose(ref.bf16_values(out), expected_out, rtol=1e-2,
                               atol=1e-2 * np.abs(expected_out).max())
    np.testing.assert_allclose(max_logits, expected_max, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(lse, expected_lse, rtol=1e-6, atol=1e-6)


def test_matches_numpy_attention():
    _, q, kv, indices = problem(0)
    result = fp8dsa.reference.sparse_mla_prefill(q, kv, indices, SM_SCALE)
    assert result[0].shape == (5, 8, 512)
    assert result[1].dtype == np.float32 and result[2].shape == (5, 8)
    assert_attention_close(result, ref.sparse_mla(q, kv, indices, SM_SCALE))


def test_sink_topk_length_and_scales():
    rng, q, kv, indices = problem(1, num_heads=16)
    sink = rng.normal(size=16).astype(np.float32)
    sink[0] = np.inf
    topk_length = np.array([0, 1, 64, 100, 128], np.int32)
    result = fp8dsa.reference.sparse_mla_prefill(q, kv, indices, SM_SCALE, 512, sink, topk_length,
                                                 q_scale=0.5, kv_scale=2.0)
    expected = ref.sparse_mla(q, kv, indices, SM_SCALE, attn_sink=sink, topk_length=topk_length,
                              q_scale=0.5, kv_scale=2.0)
    assert_attention_close(result, expected)
    # topk_length 0: no valid key.
    assert np.all(ref.bf16_values(result[0][0]) == 0.0)
    assert np.all(result[2][0] == np.inf) and np.all(result[1][0] == -np.inf)


def test_all_invalid_rows():
    _, q, kv, indices = problem(2)
    indices[2] = -1
    out, max_logits, lse = fp8dsa.reference.sparse_mla_prefill(q, kv, indices, SM_SCALE)
    assert np.all(ref.bf16_values(out[2]) == 0.0)
    assert np.all(lse[2] == np.inf) and np.all(max_logits[2] == -np.inf)


def test_flashmla_layouts_and_given_outputs():
    """kv [N, 1, 576] and indices [T, 1, topk] as FlashMLA passes them; outputs given with out=."""
    _, q, kv, indices = problem(3)
    out = np.full((5, 8, 512), 0xFFFF, np.uint16)
    max_logits = np.full((5, 8), np.nan, np.float32)
    lse = np.full((5, 8), np.nan, np.float32)
    result = fp8dsa.reference.sparse_mla_prefill(q, kv[:, None, :], indices[:, None, :], SM_SCALE,
                                                 out=out, max_logits=max_logits, lse=lse)
    assert result[0] is out and result[1] is max_logits and result[2] is lse
    assert_attention_close(result, ref.sparse_mla(q, kv, indices, SM_SCALE))


def test_strided_inputs_and_output():
    """q with a padded head stride, kv with a padded row stride, indices and out as views of wider
    buffers: the strides reach the params."""
    _, q, kv, indices = problem(4)
    q_wide = np.zeros((5, 8, 640), np.uint8)
    q_wide[:, :, :576] = q
    kv_wide = np.zeros((150, 608), np.uint8)
    kv_wide[:, :576] = kv
    indices_wide = np.full((5, 192), -1, np.int32)
    indices_wide[:, :128] = indices
    out_wide = np.zeros((5, 8, 520), np.uint16)
    result = fp8dsa.reference.sparse_mla_prefill(q_wide[:, :, :576], kv_wide[:, :576],
                                                 indices_wide[:, :128], SM_SCALE,
                                                 out=out_wide[:, :, :512])
    assert_attention_close(result, ref.sparse_mla(q, kv, indices, SM_SCALE))
    assert np.all(out_wide[:, :, 512:] == 0)


def test_ml_dtypes_arrays():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    _, q, kv, indices = problem(5)
    out, max_logits, lse = fp8dsa.reference.sparse_mla_prefill(
        q.view(ml_dtypes.float8_e4m3fn), kv.view(ml_dtypes.float8_e4m3fn), indices, SM_SCALE)
    assert out.dtype == ml_dtypes.bfloat16
    assert_attention_close((out, max_logits, lse), ref.sparse_mla(q, kv, indices, SM_SCALE))


def test_bf16_output_as_uint16_without_ml_dtypes(monkeypatch):
    from fp8dsa import _arrays

    monkeypatch.setattr(_arrays, "ml_dtypes", None)
    _, q, kv, indices = problem(6)
    out, _, _ = fp8dsa.reference.sparse_mla_prefill(q, kv, indices, SM_SCALE)
    assert out.dtype == np.uint16
