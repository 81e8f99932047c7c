"""Sparse MLA prefill in native FP8, with the arguments and conventions of FlashMLA's
flash_mla_sparse_fwd."""

from . import _arrays, _fp8dsa

_SHAPES = """
    Arrays (T query tokens, h heads, N latent KV rows, d_qk = 576 = 512 nope + 64 rope):
      q            [T, h, 576]               float8_e4m3fn (or uint8 holding e4m3 bits)
      kv           [N, 576] or [N, 1, 576]   float8_e4m3fn (or uint8); V = the first d_v columns
      indices      [T, topk] or [T, 1, topk] int32 rows of kv; < 0, >= N or at a position
                                             >= topk_length[t] = no key; topk a multiple of 64
      attn_sink    [h] float32, optional     per-head sink logit (may be +-inf)
      topk_length  [T] int32, optional       token t uses indices[t, :topk_length[t]]
      out          [T, h, d_v]               bfloat16 (uint16 bits where the library has no bf16)
      max_logits   [T, h]                    float32, contiguous
      lse          [T, h]                    float32, contiguous, natural log
    h is one of 8, 16, 32, 64, 128 and d_v is 512. q, kv, indices and out may be strided (rows
    16-byte aligned, innermost dimension contiguous); the other arrays must be contiguous.

    Result, with s_j = q_scale * kv_scale * sm_scale * dot(q[t, h], kv[idx_j]) over the valid j:
      out = kv_scale * sum_j softmax(s)_j * kv[idx_j, :d_v],  lse = log(sum_j exp(s_j)),
      max_logits = max_j s_j.
    A token with no valid key gives out = 0, lse = +inf, max_logits = -inf. With attn_sink,
    out *= exp(lse) / (exp(lse) + exp(attn_sink[h])); lse and max_logits are unchanged.

    q_scale and kv_scale are per-tensor dequantisation scales of the 576-byte e4m3 rows (1 in
    production). The outputs are allocated with q's array library unless given; all three are
    returned as (out, max_logits, lse).

    kv_format="deepseek_v32" takes DeepSeek-V3.2's FP8 cache instead (FlashMLA's 656-byte rows):
      q            [T, h, 576]               bfloat16 (or uint16 holding bf16 bits)
      kv           [N, 656] or [N, 1, 656]   uint8 (or float8_e4m3fn) rows: bytes [0, 512) e4m3
                                             nope values, [512, 528) 4 float32 scales (scale b for
                                             nope columns [128 b, 128 b + 128)), [528, 656) 64
                                             bfloat16 rope values; may be a view of a wider pool
                                             (row stride a multiple of 16 bytes)
    and the formulas above read kv[idx_j] as its dequantised 576 values (e4m3 * scale of its
    block, then the rope).
"""

# kv_format -> the dtypes q and kv may have, and kv's layout.
_FORMATS = {
    "e4m3": (_arrays.E4M3_OR_BF16, _arrays.E4M3_OR_BF16, "[N, d_qk] or [N, 1, d_qk]"),
    "deepseek_v32": (_arrays.BF16, _arrays.E4M3, "[N, 656] or [N, 1, 656]"),
}


def kv_format_dtypes(op, kv_format):
    """(q dtypes, kv dtypes, kv layout) of a kv_format; TypeError for a non-string, ValueError for
    an unknown one."""
    if _arrays.text(op, "kv_format", kv_format) not in _FORMATS:
        known = ", ".join(f"'{name}'" for name in _FORMATS)
        raise ValueError(f"{op}: kv_format '{kv_format}' must be one of {known}")
    return _FORMATS[kv_format]


def value_dim(op, d_v):
    """d_v as an int: TypeError for another type, ValueError (in the library's words) for another
    value, checked with the other scalars, before any output is allocated from it."""
    if not _arrays.is_integer(d_v):
        raise TypeError(f"{op}: d_v must be an integer (given {d_v!r})")
    if d_v != 512:
        raise ValueError(f"sparse_mla: d_v ({d_v}) must be one of {{512}}")
    return int(d_v)


def attention_inputs(op, q, kv, attn_sink, kv_format="e4m3", gpu=False):
    """Checks q, kv and attn_sink for dtype and ndim (and, for a GPU call, q's placement)."""
    q_dtypes, kv_dtypes, kv_layout = kv_format_dtypes(op, kv_format)
    _arrays.check(op, "q", q, (3,), "[T, h, d_qk]", q_dtypes)
    if gpu:
        _arrays.require_cuda(op, "q", q)
    # q's own d_qk first: a wrong q would otherwise be reported as a kv that does not match it.
    if q.shape[2] != 576:
        raise ValueError(f"{op}: q has {q.shape[2]} elements in dimension 2, d_qk must be 576")
    _arrays.check(op, "kv", kv, (2, 3), kv_layout, kv_dtypes)
    _arrays.check_optional(op, "attn_sink", attn_sink, (1,), "[h]", _arrays.F32)


def attention_outputs(op, q, d_v, out, max_logits, lse):
    """(out, max_logits, lse): those given after their dtype and ndim checks, the others allocated
    with q's library. Called once the extension has checked every input."""
    num_tokens, num_heads = q.shape[0], q.shape[1]
    out = _arrays.output(op, "out", out, q, (num_tokens, num_heads, d_v), (3,), "[T, h, d_v]",
                         _arrays.BF16)
    if out.shape[2] != d_v:  # the library would see a head stride below d_v
        raise ValueError(f"{op}: out has {out.shape[2]} elements in dimension 2, d_v needs {d_v}")
    max_logits = _arrays.output(op, "max_logits", max_logits, q, (num_tokens, num_heads), (2,),
                                "[T, h]", _arrays.F32)
    lse = _arrays.output(op, "lse", lse, q, (num_tokens, num_heads), (2,), "[T, h]", _arrays.F32)
    return out, max_logits, lse


def sparse_mla_inputs(op, q, kv, indices, attn_sink, topk_length, kv_format, gpu=False):
    """attention_inputs, and indices and topk_length checked too."""
    _arrays.check(op, "indices", indices, (2, 3), "[T, topk] or [T, 1, topk]", _arrays.I32)
    _arrays.check_optional(op, "topk_length", topk_length, (1,), "[T]", _arrays.I32)
    attention_inputs(op, q, kv, attn_sink, kv_format, gpu)


def sparse_mla_prefill(q, kv, indices, sm_scale, d_v=512, attn_sink=None, topk_length=None, *,
                       q_scale=1.0, kv_scale=1.0, out=None, max_logits=None, lse=None,
                       kv_format="e4m3", q_terms=2, kernel="auto", stream=None):
    """Sparse MLA prefill on the GPU: each token attends over its selected rows of the latent cache,
    QK^T and P.V on the e4m3 tensor cores. Same argument order and conventions as FlashMLA's
    flash_mla_sparse_fwd; returns (out, max_logits, lse).
    """
    op = "sparse_mla_prefill"
    stream = _arrays.stream_argument(op, stream)
    sm_scale, q_scale, kv_scale = _arrays.scales(op, sm_scale, q_scale, kv_scale)
    d_v = value_dim(op, d_v)
    q_terms = _arrays.integer(op, "q_terms", q_terms, 1, 2, "{1, 2}")
    kernel = _arrays.text(op, "kernel", kernel)
    sparse_mla_inputs(op, q, kv, indices, attn_sink, topk_length, kv_format, gpu=True)
    view = _arrays.dlpack_view
    _fp8dsa.sparse_mla_check(view(q), view(kv), view(indices), sm_scale, d_v, view(attn_sink),
                             view(topk_length), q_scale, kv_scale, kv_format, q_terms, kernel)
    out, max_logits, lse = attention_outputs(op, q, d_v, out, max_logits, lse)
    with _arrays.cuda_stream(q, stream, (q, kv, indices, attn_sink, topk_length)) as handle:
        _fp8dsa.sparse_mla_prefill(view(q), view(kv), view(indices), sm_scale, d_v, view(attn_sink),
                                   view(topk_length), q_scale, kv_scale, view(out),
                                   view(max_logits), view(lse), kv_format, q_terms, kernel, handle)
    return out, max_logits, lse


sparse_mla_prefill.__doc__ += _SHAPES + """
    q_terms (kv_format="deepseek_v32", FP8 kernel): bf16 q as 2 e4m3 terms (hi and the residual,
    the default: scores within ~2^-8 of bf16 q's) or 1 (a third fewer tensor-core steps a tile,
    scores within ~2^-4), at a scale per (token, head). The references and e4m3 q ignore it.
    kernel: "auto" (the native FP8 kernel where it applies), "fp8", or "reference" (the plain
    CUDA-core kernel). stream: a CUDA stream handle (int, torch.cuda.Stream, cupy.cuda.Stream);
    by default the current stream of q's library, so the call is CUDA-graph capturable.
    Arrays must be on one CUDA device (the CPU path is fp8dsa.reference.sparse_mla_prefill).

    Raises TypeError for a dtype, ValueError for a shape, stride, alignment, placement or value
    (with the library's message), NotImplementedError for a valid request this build does not
    support (e.g. bf16 q with kv_format="e4m3"), RuntimeError for a device or CUDA failure.
    """
