"""Top-k selection of indexer logits, with the optional page-table transform."""

from . import _arrays, _fp8dsa

_SHAPES = """
    Arrays (T rows, N keys, B sequences of P pages):
      logits        [T, N] float32; row stride >= N (a view of a padded buffer is fine)
      ks, ke        [T]    int32: row t selects among keys ks[t] <= s < ke[t] (clamped to [0, N])
      page_table    [B, P] int32, optional: logical page -> physical page (B >= 1 when T > 0)
      row_seq       [T]    int32, optional: the sequence (page-table row) of each row; default t
      row_pos_base  [T]    int32, optional: the key of logical position 0; default ks[t]
      out           [T, k] int32 (the result); row stride >= k

    Each row gets the min(k, ke - ks) keys with the largest logits as absolute key rows, unused
    slots -1; NaN ranks lowest, -inf is a valid candidate, ties are broken either way. With
    sorted=True they come by descending score. With a page table each index becomes, with
    pos = index - row_pos_base[t], page_table[row_seq[t], pos // page_size] * page_size +
    pos % page_size, and -1 where the page entry is negative or past P. k is 1..2048.
"""


def topk_scalars(op, k, sorted, page_size):
    """(k, sorted, page_size) checked: k before `out` is allocated from it (k = 2**40 would
    otherwise ask for terabytes), in the library's words."""
    return (_arrays.integer("topk", "k", k, 1, 2048), _arrays.flag(op, "sorted", sorted),
            _arrays.integer(op, "page_size", page_size, -_arrays.INT32_MAX - 1, _arrays.INT32_MAX,
                            valid=f"[1, {_arrays.INT32_MAX}]"))  # the rest: the library's check, with a table


def topk_inputs(op, logits, ks, ke, page_table, row_seq, row_pos_base, gpu=False):
    """The inputs of one top-k call, checked for dtype and ndim (and, for a GPU call, logits'
    placement)."""
    _arrays.check(op, "logits", logits, (2,), "[T, N]", _arrays.F32)
    if gpu:
        _arrays.require_cuda(op, "logits", logits)
    _arrays.check(op, "ks", ks, (1,), "[T]", _arrays.I32)
    _arrays.check(op, "ke", ke, (1,), "[T]", _arrays.I32)
    _arrays.check_optional(op, "page_table", page_table, (2,), "[B, P]", _arrays.I32)
    _arrays.check_optional(op, "row_seq", row_seq, (1,), "[T]", _arrays.I32)
    _arrays.check_optional(op, "row_pos_base", row_pos_base, (1,), "[T]", _arrays.I32)


def topk_output(op, logits, k, out):
    """`out` after its dtype and ndim checks, or a new [T, k] one (k checked by topk_scalars)."""
    return _arrays.output(op, "out", out, logits, (logits.shape[0], k), (2,), "[T, k]", _arrays.I32)


def topk(logits, ks, ke, k=2048, sorted=False, page_table=None, *, page_size=0, row_seq=None,
         row_pos_base=None, out=None, stream=None):
    """Exact top-k of each row of `logits` on the GPU (radix select); returns indices [T, k].
    """
    op = "topk"
    stream = _arrays.stream_argument(op, stream)
    k, sorted, page_size = topk_scalars(op, k, sorted, page_size)
    topk_inputs(op, logits, ks, ke, page_table, row_seq, row_pos_base, gpu=True)
    view = _arrays.dlpack_view
    _fp8dsa.topk_check(view(logits), view(ks), view(ke), k, sorted, view(page_table), page_size,
                       view(row_seq), view(row_pos_base))
    out = topk_output(op, logits, k, out)
    workspace = _arrays.workspace(logits, _fp8dsa.topk_workspace_bytes(logits.shape[0],
                                                                       logits.shape[1], k))
    with _arrays.cuda_stream(logits, stream, (logits, ks, ke, page_table, row_seq,
                                              row_pos_base)) as handle:
        _fp8dsa.topk(view(logits), view(ks), view(ke), k, sorted, view(page_table), page_size,
                     view(row_seq), view(row_pos_base), view(out), view(workspace), handle)
    return out


topk.__doc__ += _SHAPES + """
    The workspace is allocated with logits' array library. stream: a CUDA stream handle (int,
    torch.cuda.Stream, cupy.cuda.Stream); by default the current stream of logits' library, so
    the call is CUDA-graph capturable. Arrays must be on one CUDA device (the CPU path is
    fp8dsa.reference.topk).

    Raises TypeError for a dtype, ValueError for a shape, stride, placement or value such as k
    (with the library's message), RuntimeError for a device or CUDA failure.
    """
