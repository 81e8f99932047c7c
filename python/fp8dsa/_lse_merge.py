"""Merging partial sparse MLA results over disjoint key sets: context parallel with the keys split
across ranks."""

from . import _arrays, _fp8dsa

_SHAPES = """
    Arrays (R parts, T tokens, h heads, d_v = 512):
      out_parts         [R, T, h, d_v]  bfloat16 (uint16 bits where the library has no bf16): part
                                        r is sparse_mla_prefill over its share of every token's keys
                                        (the others invalid), without attn_sink; may be strided
                                        (rows 16-byte aligned, innermost dimension contiguous)
      lse_parts         [R, T, h]       float32, contiguous; +inf where the part had no valid key
      max_logits_parts  [R, T, h]       float32, contiguous, optional
      attn_sink         [h]             float32, optional: applied once, to the merged result
      out               [T, h, d_v]     bfloat16;  max_logits, lse [T, h] float32

    lse = log(sum_r exp(lse_r)) over the parts with a finite lse_r, out = sum_r exp(lse_r - lse)
    out_r (then out *= exp(lse) / (exp(lse) + exp(attn_sink[h]))), max_logits = max_r
    max_logits_r: what one sparse_mla_prefill over all the keys gives. A row no part has a valid
    key for gives out = 0, lse = +inf, max_logits = -inf. Returns (out, max_logits, lse), as
    sparse_mla_prefill; max_logits is None without max_logits_parts.
"""


def lse_merge_inputs(op, out_parts, lse_parts, max_logits_parts, attn_sink, gpu=False):
    """Checks the inputs for dtype and ndim (and, for a GPU call, out_parts' placement)."""
    _arrays.check(op, "out_parts", out_parts, (4,), "[R, T, h, d_v]", _arrays.BF16)
    if gpu:
        _arrays.require_cuda(op, "out_parts", out_parts)
    _arrays.check(op, "lse_parts", lse_parts, (3,), "[R, T, h]", _arrays.F32)
    _arrays.check_optional(op, "max_logits_parts", max_logits_parts, (3,), "[R, T, h]", _arrays.F32)
    _arrays.check_optional(op, "attn_sink", attn_sink, (1,), "[h]", _arrays.F32)


def lse_merge_outputs(op, out_parts, max_logits_parts, out, max_logits, lse):
    """(out, max_logits, lse): those given after their dtype and ndim checks, the others allocated
    (max_logits only with max_logits_parts). Called once the extension has checked every input."""
    _, num_tokens, num_heads, d_v = out_parts.shape
    out = _arrays.output(op, "out", out, out_parts, (num_tokens, num_heads, d_v), (3,),
                         "[T, h, d_v]", _arrays.BF16)
    if max_logits_parts is not None:
        max_logits = _arrays.output(op, "max_logits", max_logits, out_parts,
                                    (num_tokens, num_heads), (2,), "[T, h]", _arrays.F32)
    else:
        _arrays.check_optional(op, "max_logits", max_logits, (2,), "[T, h]", _arrays.F32)
    lse = _arrays.output(op, "lse", lse, out_parts, (num_tokens, num_heads), (2,), "[T, h]",
                         _arrays.F32)
    return out, max_logits, lse


def lse_merge(out_parts, lse_parts, max_logits_parts=None, attn_sink=None, *, out=None,
              max_logits=None, lse=None, stream=None):
    """Merges R partial sparse MLA results over disjoint key sets on the GPU; returns
    (out, max_logits, lse).
    """
    op = "lse_merge"
    stream = _arrays.stream_argument(op, stream)
    lse_merge_inputs(op, out_parts, lse_parts, max_logits_parts, attn_sink, gpu=True)
    view = _arrays.dlpack_view
    _fp8dsa.lse_merge_check(view(out_parts), view(lse_parts), view(max_logits_parts),
                            view(attn_sink))
    out, max_logits, lse = lse_merge_outputs(op, out_parts, max_logits_parts, out, max_logits, lse)
    with _arrays.cuda_stream(out_parts, stream,
                             (out_parts, lse_parts, max_logits_parts, attn_sink)) as handle:
        _fp8dsa.lse_merge(view(out_parts), view(lse_parts), view(max_logits_parts),
                          view(attn_sink), view(out), view(lse), view(max_logits), handle)
    return out, max_logits, lse


lse_merge.__doc__ += _SHAPES + """
    stream: a CUDA stream handle (int, torch.cuda.Stream, cupy.cuda.Stream); by default the
    current stream of out_parts' library. Arrays must be on one CUDA device (the CPU path is
    fp8dsa.reference.lse_merge).

    Raises TypeError for a dtype, ValueError for a shape, stride, alignment, placement or value
    (with the library's message), RuntimeError for a device or CUDA failure.
    """
