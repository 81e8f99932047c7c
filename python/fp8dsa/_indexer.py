"""Indexer scoring with the arguments of DeepGEMM's fp8_mqa_logits, and the causal bounds of a
ragged prefill batch."""

import numpy as np

from . import _arrays, _fp8dsa

# Logit rows are written with 16-byte stores: an allocated logits buffer gets rows of a multiple of
# 4 floats, and the [T, N] view of it is returned.
_LOGITS_ROW_ALIGN = _fp8dsa.LOGITS_ROW_ALIGN

_SHAPES = """
    Arrays (T query tokens, H heads, D = 128 or 64, N keys):
      q        [T, H, D]  float8_e4m3fn (or uint8 holding e4m3 bits), heads packed
      kv       a tuple (k [N, D] float8_e4m3fn (or uint8), k_scale [N] float32)
      weights  [T, H]     float32: the query scale and softmax scale folded in, may be negative
      ks, ke   [T]        int32: token t scores keys ks[t] <= s < ke[t]
      logits   [T, N]     float32 (the result); a given `logits` may be a [T, N] view of a wider
                          buffer (row stride a multiple of 4, at least N) or [T, M] with M >= N
    H is one of 4, 8, 16, 32, 64.

    logits[t, s] = k_scale[s] * sum_h weights[t, h] * relu(dot(q[t, h], k[s]))  for ks[t] <= s < ke[t];
    with fill_masked (the default, as DeepGEMM's clean_logits) the other cells are -inf, otherwise
    they are left as they were. logits is allocated with q's array library unless given.
"""


def indexer_arrays(op, q, kv, weights, ks, ke, q_name="q", kv_name="kv"):
    """Checks q, kv, weights, ks and ke for dtype and ndim; returns (k, k_scale)."""
    _arrays.check(op, q_name, q, (3,), "[T, H, D]", _arrays.E4M3)
    if not (isinstance(kv, (tuple, list)) and len(kv) == 2):
        given = (f"{type(kv).__name__} of {len(kv)}" if isinstance(kv, (tuple, list))
                 else type(kv).__name__)
        raise TypeError(f"{op}: {kv_name} must be a tuple (k [N, D], k_scale [N]), given {given}")
    k, k_scale = kv
    _arrays.check(op, f"{kv_name}[0] (k)", k, (2,), "[N, D]", _arrays.E4M3)
    _arrays.check(op, f"{kv_name}[1] (k_scale)", k_scale, (1,), "[N]", _arrays.F32)
    _arrays.check(op, "weights", weights, (2,), "[T, H]", _arrays.F32)
    _arrays.check(op, "ks", ks, (1,), "[T]", _arrays.I32)
    _arrays.check(op, "ke", ke, (1,), "[T]", _arrays.I32)
    return k, k_scale


def indexer_logits_buffer(op, q, k, logits):
    """The array the extension writes: `logits` after its checks, or a new [T, N padded] one whose
    [:, :N] view is the result (sliced after the call: a JAX slice is a copy)."""
    if logits is not None:
        return _arrays.writable(op, "logits", _arrays.check(op, "logits", logits, (2,), "[T, N]", _arrays.F32))
    padded = -(-k.shape[0] // _LOGITS_ROW_ALIGN) * _LOGITS_ROW_ALIGN
    return _arrays.empty(q, _arrays.extents(op, "logits", "[T, N]", (q.shape[0], padded)), "float32")


def indexer_logits_result(buffer, logits, k):
    """What the call returns: the given `logits`, or the [T, N] view of the buffer it allocated."""
    return buffer if logits is not None else buffer[:, :k.shape[0]]


def indexer_logits(q, kv, weights, ks, ke, *, logits=None, fill_masked=True, kernel="auto",
                   split_epilogue=False, stream=None):
    """FP8 indexer scoring on the GPU: every (token, key) pair in [ks, ke) scored on the e4m3 tensor
    cores. Same argument order as DeepGEMM's fp8_mqa_logits(q, (k, k_scale), weights,
    cu_seqlen_ks, cu_seqlen_ke); returns logits [T, N].
    """
    op = "indexer_logits"
    stream = _arrays.stream_argument(op, stream)
    k, k_scale = indexer_arrays(op, q, kv, weights, ks, ke)
    _arrays.require_cuda(op, "q", q)
    fill_masked = _arrays.flag(op, "fill_masked", fill_masked)
    split_epilogue = _arrays.flag(op, "split_epilogue", split_epilogue)
    kernel = _arrays.text(op, "kernel", kernel)
    view = _arrays.dlpack_view
    _fp8dsa.indexer_logits_check(view(q), view(k), view(k_scale), view(weights), view(ks), view(ke),
                                 kernel)
    buffer = indexer_logits_buffer(op, q, k, logits)
    with _arrays.cuda_stream(q, stream, (q, k, k_scale, weights, ks, ke)) as handle:
        _fp8dsa.indexer_logits(view(q), view(k), view(k_scale), view(weights), view(ks), view(ke),
                               view(buffer), fill_masked, kernel, handle,
                               split_epilogue=split_epilogue)
    return indexer_logits_result(buffer, logits, k)


indexer_logits.__doc__ += _SHAPES + """
    kernel: "auto" (the measured router), "q_resident", "k_resident" or "reference" (the plain
    CUDA-core kernel). split_epilogue: at H = 64 on the Q-resident scorer, relu x w as
    (w x + w |x|) / 2 with the linear half on the tensor cores: faster at N >= 32K, logits a few
    1e-4 of max |logit| from the exact form's (SPEC section 1); other H ignore it.
    stream: a CUDA stream handle (int, torch.cuda.Stream, cupy.cuda.Stream);
    by default the current stream of q's library, so the call is CUDA-graph capturable.
    Arrays must be on one CUDA device (the CPU path is fp8dsa.reference.indexer_logits).

    Raises TypeError for a dtype, ValueError for a shape, stride, alignment, placement or value
    (with the library's message), RuntimeError for a device or CUDA failure.
    """


def build_causal_bounds(new_tokens, cached_keys):
    """Causal ks / ke for a ragged prefill batch with cached prefixes.

    new_tokens, cached_keys: one int per sequence (lists or 1-D integer arrays of one length).
    Sequence b's key rows follow those of the sequences before it: [base, base + cached_keys[b] +
    new_tokens[b]); its new token i sees keys [base, base + cached_keys[b] + i + 1).

    Returns (ks, ke, num_keys): ks and ke NumPy int32 arrays of sum(new_tokens) entries, one per
    query token in sequence order, and num_keys = sum(cached_keys + new_tokens), an int. Raises
    ValueError for negative counts or totals past INT32_MAX (the library's message).
    """
    return _fp8dsa.build_causal_bounds(_sequence_counts("new_tokens", new_tokens),
                                       _sequence_counts("cached_keys", cached_keys))


def _sequence_counts(name, values):
    """`values` as a list of ints: TypeError for what is not a list or 1-D array of integers,
    ValueError for another shape."""
    try:
        counts = np.asarray(values)
    except ValueError:  # ragged nesting
        raise ValueError(f"build_causal_bounds: {name} must be one count per sequence (a list or "
                         "1-D array), given a ragged nesting") from None
    if counts.ndim == 0 and not isinstance(values, np.ndarray):  # None, an int, a string, a dict
        raise TypeError(f"build_causal_bounds: {name} must be one count per sequence (a list or 1-D "
                        f"array of integers), given {type(values).__name__}")
    if counts.ndim != 1:
        raise ValueError(f"build_causal_bounds: {name} must be one count per sequence "
                         f"(a list or 1-D array), given shape {counts.shape}")
    if counts.size and counts.dtype.kind not in "iu":
        raise TypeError(f"build_causal_bounds: {name} must hold integers (given {counts.dtype})")
    counts = [int(n) for n in counts]
    for b, n in enumerate(counts):  # past int64 the extension cannot take the value; the rest it checks
        if not -2**63 <= n < 2**63:
            raise ValueError(f"build_causal_bounds: sequences[{b}].{name} ({n}) must be in "
                             f"[0, {_arrays.INT32_MAX}]")
    return counts
