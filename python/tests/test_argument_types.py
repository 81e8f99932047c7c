"""The README's rule for scalar and list arguments: the wrong type raises TypeError naming the
argument, a value out of range ValueError naming it, whatever the argument (never OverflowError,
an unhashable-type error or a ValueError for a type)."""

import numpy as np
import pytest

import fp8dsa

E4M3_ONE = 0x38
R = fp8dsa.reference


def e4m3(*shape):
    return np.full(shape, E4M3_ONE, np.uint8)


def attention(**changes):
    args = dict(q=e4m3(4, 16, 576), kv=e4m3(256, 576), indices=np.zeros((4, 64), np.int32),
                sm_scale=0.1)
    args.update(changes)
    return args


def prefill_args(**changes):
    args = dict(index_q=e4m3(4, 8, 128), index_kv=(e4m3(256, 128), np.ones(256, np.float32)),
                weights=np.ones((4, 8), np.float32), ks=np.zeros(4, np.int32),
                ke=np.full(4, 256, np.int32), q=e4m3(4, 16, 576), kv=e4m3(256, 576), sm_scale=0.1,
                topk=64)
    args.update(changes)
    return args


# The GPU calls check their scalars before the placement of their arrays: host arrays serve.
ATTENTION_CALLS = {
    "reference.sparse_mla_prefill": lambda **kw: R.sparse_mla_prefill(**attention(**kw)),
    "sparse_mla_prefill": lambda **kw: fp8dsa.sparse_mla_prefill(**attention(**kw)),
    "reference.prefill": lambda **kw: R.prefill(**prefill_args(**kw)),
    "prefill": lambda **kw: fp8dsa.prefill(**prefill_args(**kw)),
}


@pytest.mark.parametrize("op", list(ATTENTION_CALLS))
@pytest.mark.parametrize("name", ["sm_scale", "q_scale", "kv_scale"])
def test_a_float_past_its_range_is_a_value_error(op, name):
    with pytest.raises(ValueError, match=rf"^{op}: {name} \(an integer of 401 digits\) is past the "
                                         "range of a float"):
        ATTENTION_CALLS[op](**{name: 10**400})


@pytest.mark.parametrize("op", list(ATTENTION_CALLS))
@pytest.mark.parametrize("d_v", [None, 512.0, "512", np.float32(512)])
def test_d_v_of_another_type(op, d_v):
    with pytest.raises(TypeError, match=rf"^{op}: d_v must be an integer \(given "):
        ATTENTION_CALLS[op](d_v=d_v)


@pytest.mark.parametrize("op", ["reference.sparse_mla_prefill", "sparse_mla_prefill"])
@pytest.mark.parametrize("kv_format", [None, ["e4m3"], b"e4m3", 0])
def test_kv_format_of_another_type(op, kv_format):
    with pytest.raises(TypeError, match=rf"^{op}: kv_format must be a string \(given "):
        ATTENTION_CALLS[op](kv_format=kv_format)


@pytest.mark.parametrize("q_terms", [None, 2.0, "2", True])
def test_q_terms_of_another_type(q_terms):
    with pytest.raises(TypeError, match=r"^sparse_mla_prefill: q_terms must be an integer \(given "):
        ATTENTION_CALLS["sparse_mla_prefill"](q_terms=q_terms)


@pytest.mark.parametrize("q_terms", [0, 3, -1])
def test_q_terms_out_of_range(q_terms):
    with pytest.raises(ValueError, match=rf"^sparse_mla_prefill: q_terms \({q_terms}\) must be in \{{1, 2\}}"):
        ATTENTION_CALLS["sparse_mla_prefill"](q_terms=q_terms)


def test_values_stay_value_errors():
    with pytest.raises(ValueError, match=r"sparse_mla: d_v \(256\) must be one of \{512\}"):
        R.sparse_mla_prefill(**attention(d_v=256))
    with pytest.raises(ValueError, match="kv_format 'fp4' must be one of 'e4m3', 'deepseek_v32'"):
        R.sparse_mla_prefill(**attention(kv_format="fp4"))
    assert R.sparse_mla_prefill(**attention(d_v=np.int64(512), sm_scale=np.float32(0.1),
                                            q_scale=2))[0].shape == (4, 16, 512)


@pytest.mark.parametrize("new_tokens,cached_keys,name,given", [
    (None, None, "new_tokens", "NoneType"), (5, [3], "new_tokens", "int"),
    ("12", [3], "new_tokens", "str"), ([1], None, "cached_keys", "NoneType"),
    ({1: 2}, [3], "new_tokens", "dict")])
def test_causal_bounds_of_another_type(new_tokens, cached_keys, name, given):
    with pytest.raises(TypeError, match=rf"^build_causal_bounds: {name} must be one count per "
                                        rf"sequence \(a list or 1-D array of integers\), given {given}"):
        fp8dsa.build_causal_bounds(new_tokens, cached_keys)


def test_causal_bounds_shapes_stay_value_errors():
    with pytest.raises(ValueError, match=r"new_tokens must be one count per sequence .*given shape \(1, 1\)"):
        fp8dsa.build_causal_bounds([[1]], [[2]])
    with pytest.raises(ValueError, match="new_tokens must be one count per sequence .*a ragged nesting"):
        fp8dsa.build_causal_bounds([[1], [2, 3]], [1, 2])
    ks, ke, num_keys = fp8dsa.build_causal_bounds(np.array([2], np.int64), (3,))
    assert list(ks) == [0, 0] and list(ke) == [4, 5] and num_keys == 5


GPU_CALLS = {
    "sparse_mla_prefill": lambda stream: fp8dsa.sparse_mla_prefill(**attention(), stream=stream),
    "prefill": lambda stream: fp8dsa.prefill(**prefill_args(), stream=stream),
    "topk": lambda stream: fp8dsa.topk(np.zeros((2, 8), np.float32), np.zeros(2, np.int32),
                                       np.full(2, 8, np.int32), 4, stream=stream),
}


@pytest.mark.parametrize("op", list(GPU_CALLS))
def test_stream_checked_first(op):
    with pytest.raises(TypeError, match=rf"^{op}: stream must be a CUDA stream handle"):
        GPU_CALLS[op]("default")
    with pytest.raises(ValueError, match=rf"^{op}: stream \(-1\) must be a CUDA stream handle"):
        GPU_CALLS[op](-1)
