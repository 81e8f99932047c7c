"""Indexer scoring and top-k selection in one pass, without the [T, N] logits."""

from . import _arrays, _fp8dsa
from ._indexer import indexer_arrays
from ._topk import topk_scalars


def fused_topk(q, kv, weights, ks, ke, k=2048, sorted=False, page_table=None, *, page_size=0,
                 row_seq=None, row_pos_base=None, out=None, split_epilogue=False, stream=None):
    """fp8dsa::fused_topk on the GPU: the rows indexer_logits followed by topk would select, without
    writing the logits; returns indices [T, k] int32.

    Arrays: q, kv = (k, k_scale), weights, ks, ke as for indexer_logits (H in 4..64, D 128 or 64);
    page_table, row_seq, row_pos_base and out as for topk. Each row gets the min(k, ke - ks) keys
    with the largest scores as absolute key rows (or page-table rows), unused slots -1, NaN lowest,
    ties broken by the lower key row; in ascending key rows, or by descending score with
    sorted=True. The selection equals topk over indexer_logits' logits (ties aside), with the same
    split_epilogue.

    Memory: a workspace of about 8 * k * 2 bytes per token and key split (32 KB per token and
    split at k = 2048) instead of 4 * N bytes of logits per token, allocated with q's library.
    stream: as for indexer_logits (by default the current stream of q's library; graph capturable).

    Raises TypeError for a dtype, ValueError for a shape, stride, placement or value (with the
    library's message), RuntimeError for a device or CUDA failure.
    """
    op = "fused_topk"
    stream = _arrays.stream_argument(op, stream)
    k, sorted, page_size = topk_scalars(op, k, sorted, page_size)
    split_epilogue = _arrays.flag(op, "split_epilogue", split_epilogue)
    k_rows, k_scale = indexer_arrays(op, q, kv, weights, ks, ke)
    _arrays.require_cuda(op, "q", q)
    _arrays.check_optional(op, "page_table", page_table, (2,), "[B, P]", _arrays.I32)
    _arrays.check_optional(op, "row_seq", row_seq, (1,), "[T]", _arrays.I32)
    _arrays.check_optional(op, "row_pos_base", row_pos_base, (1,), "[T]", _arrays.I32)
    view = _arrays.dlpack_view
    _fp8dsa.fused_topk_check(view(q), view(k_rows), view(k_scale), view(weights), view(ks), view(ke),
                             k, sorted, view(page_table), page_size, view(row_seq),
                             view(row_pos_base))
    out = _arrays.output(op, "out", out, q, (q.shape[0], k), (2,), "[T, k]", _arrays.I32)
    workspace = _arrays.workspace(q, _fp8dsa.fused_topk_workspace_bytes(
        q.shape[0], k_rows.shape[0], q.shape[1], k))
    with _arrays.cuda_stream(q, stream, (q, k_rows, k_scale, weights, ks, ke, page_table, row_seq,
                                         row_pos_base)) as handle:
        _fp8dsa.fused_topk(view(q), view(k_rows), view(k_scale), view(weights), view(ks), view(ke),
                             k, sorted, view(page_table), page_size, view(row_seq),
                             view(row_pos_base), view(out), view(workspace), handle,
                             split_epilogue=split_epilogue)
    return out
