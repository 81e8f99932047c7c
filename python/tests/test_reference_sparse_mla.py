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


def v32_problem(seed, num_tokens=5, num_heads=8, num_kv=150, topk=128):
    """bf16 q bits and DeepSeek-V3.2 rows (ref.random_v32_rows: row 3 has a zero block)."""
    rng = np.random.default_rng(seed)
    q = ref.random_bf16(rng, (num_tokens, num_heads, 576), scale=0.5)
    kv = ref.random_v32_rows(rng, num_kv, scale=0.5)
    indices = ref.random_indices(rng, num_tokens, topk, num_kv)
    return rng, q, kv, indices


V32 = dict(kv_format="deepseek_v32")


def test_v32_matches_numpy_attention():
    _, q, kv, indices = v32_problem(10)
    assert np.all(kv[3, 516:520] == 0)  # the zero block's scale
    result = fp8dsa.reference.sparse_mla_prefill(q, kv, indices, SM_SCALE, **V32)
    assert result[0].shape == (5, 8, 512) and result[2].shape == (5, 8)
    assert_attention_close(result, ref.sparse_mla(q, kv, indices, SM_SCALE, **V32))


def test_v32_sink_topk_length_scales_and_flashmla_layouts():
    rng, q, kv, indices = v32_problem(11, num_heads=16)
    sink = rng.normal(size=16).astype(np.float32)
    topk_length = np.array([0, 1, 64, 100, 128], np.int32)
    kwargs = dict(attn_sink=sink, topk_length=topk_length, q_scale=0.5, kv_scale=2.0)
    result = fp8dsa.reference.sparse_mla_prefill(q, kv[:, None, :], indices[:, None, :], SM_SCALE,
                                                 **kwargs, **V32)
    assert_attention_close(result, ref.sparse_mla(q, kv, indices, SM_SCALE, **kwargs, **V32))
    assert np.all(result[2][0] == np.inf) and np.all(result[1][0] == -np.inf)


def test_v32_strided_pool_and_q():
    """kv as the first 656 bytes of each 1024-byte row of a wider pool, q with 584-element heads
    (16-byte rows of bf16)."""
    _, q, kv, indices = v32_problem(12)
    pool = np.full((150, 1024), 0xFF, np.uint8)
    pool[:, :656] = kv
    q_wide = np.full((5, 8, 584), 0xFFFF, np.uint16)
    q_wide[:, :, :576] = q
    result = fp8dsa.reference.sparse_mla_prefill(q_wide[:, :, :576], pool[:, :656], indices, SM_SCALE,
                                                 **V32)
    assert_attention_close(result, ref.sparse_mla(q, kv, indices, SM_SCALE, **V32))


def test_v32_ml_dtypes_arrays():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    _, q, kv, indices = v32_problem(13)
    result = fp8dsa.reference.sparse_mla_prefill(q.view(ml_dtypes.bfloat16), kv.view(ml_dtypes.float8_e4m3fn),
                                                 indices, SM_SCALE, **V32)
    assert_attention_close(result, ref.sparse_mla(q, kv, indices, SM_SCALE, **V32))


def test_v32_rejections():
    _, q, kv, indices = v32_problem(14)
    run = fp8dsa.reference.sparse_mla_prefill
    with pytest.raises(ValueError, match="kv_format 'fp4' must be one of 'e4m3', 'deepseek_v32'"):
        run(q, kv, indices, SM_SCALE, kv_format="fp4")
    with pytest.raises(TypeError, match=r"q dtype must be bfloat16 or uint16 \(given uint8\)"):
        run(q.view(np.uint8)[:, :, :576], kv, indices, SM_SCALE, **V32)
    with pytest.raises(TypeError, match=r"kv dtype must be float8_e4m3fn or uint8 \(given uint16\)"):
        run(q, kv.view(np.uint16), indices, SM_SCALE, **V32)
    with pytest.raises(ValueError, match="kv has 576 elements in dimension 1, the deepseek_v32 row needs 656"):
        run(q, kv[:, :576], indices, SM_SCALE, **V32)
    with pytest.raises(ValueError, match=r"sparse_mla: kv's stride in dimension 0 \(664\) must be a multiple of 16"):
        run(q, np.zeros((150, 664), np.uint8)[:, :656], indices, SM_SCALE, **V32)
    with pytest.raises(ValueError, match=r"sparse_mla: q's stride in dimension 1 \(580\) must be a multiple of 8"):
        run(np.zeros((5, 8, 580), np.uint16)[:, :, :576], kv, indices, SM_SCALE, **V32)
