"""The whole prefill of one layer: indexer scoring -> top-k -> sparse MLA in one library call."""

from . import _arrays, _fp8dsa
from ._indexer import indexer_arrays
from ._sparse_mla import attention_inputs, attention_outputs, value_dim

_SHAPES = """
    Indexer arrays (as fp8dsa.indexer_logits; T tokens, H heads, D = 128 or 64, N keys):
      index_q   [T, H, D] float8_e4m3fn (or uint8), heads packed
      index_kv  a tuple (index_k [N, D] float8_e4m3fn (or uint8), index_k_scale [N] float32)
      weights   [T, H] float32;  ks, ke [T] int32 (e.g. from fp8dsa.build_causal_bounds)
    Attention arrays (as fp8dsa.sparse_mla_prefill; the same T tokens and N rows):
      q [T, h, 576] and kv [N, 576] or [N, 1, 576] float8_e4m3fn (or uint8), attn_sink [h] float32
      out [T, h, d_v] bfloat16, max_logits and lse [T, h] float32 (the results)

    Each token keeps its `topk` (a multiple of 64, at most 2048) best keys in [ks, ke) by indexer
    logit, then attends over those rows of kv: the result is that of indexer_logits, topk and
    sparse_mla_prefill in sequence. Returns (out, max_logits, lse), allocated with q's array
    library unless given.
"""


def prefill_topk(topk):
    """topk as an int: its type here, a value past int32 in the library's words (the extension
    could not take it); the library checks the rest (in [64, 2048], a multiple of 64) before the
    workspace is sized from it."""
    return _arrays.integer("prefill", "topk", topk, -_arrays.INT32_MAX - 1, _arrays.INT32_MAX,
                           valid="[64, 2048]")


def prefill_inputs(op, index_q, index_kv, weights, ks, ke, q, kv, attn_sink, gpu=False):
    """(index_k, index_k_scale): the inputs checked for dtype and ndim (and, for a GPU call,
    index_q's placement)."""
    index_k, index_k_scale = indexer_arrays(op, index_q, index_kv, weights, ks, ke,
                                            q_name="index_q", kv_name="index_kv")
    if gpu:
        _arrays.require_cuda(op, "index_q", index_q)
    attention_inputs(op, q, kv, attn_sink, gpu=gpu)
    return index_k, index_k_scale


def prefill(index_q, index_kv, weights, ks, ke, q, kv, sm_scale, topk=2048, d_v=512,
            attn_sink=None, *, q_scale=1.0, kv_scale=1.0, fused=False, out=None, max_logits=None,
            lse=None, indexer_kernel="auto", attention_kernel="auto", split_epilogue=False,
            stream=None):
    """The prefill of one DSA layer on the GPU (fp8dsa::prefill): indexer scoring, top-k and sparse
    MLA on one stream, the logits and selected rows in a workspace allocated with q's library.
    """
    op = "prefill"
    stream = _arrays.stream_argument(op, stream)
    sm_scale, q_scale, kv_scale = _arrays.scales(op, sm_scale, q_scale, kv_scale)
    topk = prefill_topk(topk)
    d_v = value_dim(op, d_v)
    fused = _arrays.flag(op, "fused", fused)
    split_epilogue = _arrays.flag(op, "split_epilogue", split_epilogue)
    indexer_kernel = _arrays.text(op, "indexer_kernel", indexer_kernel)
    attention_kernel = _arrays.text(op, "attention_kernel", attention_kernel)
    index_k, index_k_scale = prefill_inputs(op, index_q, index_kv, weights, ks, ke, q, kv, attn_sink,
                                            gpu=True)
    view = _arrays.dlpack_view
    _fp8dsa.prefill_check(view(index_q), view(index_k), view(index_k_scale), view(weights), view(ks),
                          view(ke), view(q), view(kv), sm_scale, topk, d_v, view(attn_sink), q_scale,
                          kv_scale, fused, indexer_kernel, attention_kernel)
    out, max_logits, lse = attention_outputs(op, q, d_v, out, max_logits, lse)
    # The unfused path (faster at every shape measured) where its logits can be allocated; else the
    # same path in chunks of tokens, twice the smallest chunk, then the smallest (fp8dsa::prefill takes
    # the largest chunk the workspace holds); else the fused path's far smaller workspace, which
    # fp8dsa::prefill then selects by itself.
    num_tokens = index_q.shape[0]

    def workspace_for(fused_path, chunk=0):
        return _arrays.workspace(q, _fp8dsa.prefill_workspace_bytes(
            num_tokens, index_k.shape[0], topk, fused_path, chunk))

    smallest = _fp8dsa.MIN_SELECTION_CHUNK_TOKENS
    attempts = [] if fused else [0] + [c for c in (2 * smallest, smallest) if c < num_tokens]
    workspace = None
    for chunk in attempts:
        try:
            workspace = workspace_for(False, chunk)
            break
        except Exception as error:
            if not _arrays.is_out_of_memory(error):
                raise
    if workspace is None:
        workspace = workspace_for(True)
    inputs = (index_q, index_k, index_k_scale, weights, ks, ke, q, kv, attn_sink)
    with _arrays.cuda_stream(q, stream, inputs) as handle:
        _fp8dsa.prefill(view(index_q), view(index_k), view(index_k_scale), view(weights), view(ks),
                        view(ke), view(q), view(kv), sm_scale, topk, d_v, view(attn_sink), q_scale,
                        kv_scale, fused, view(out), view(max_logits), view(lse),
                        view(workspace), indexer_kernel, attention_kernel, handle,
                        split_epilogue=split_epilogue)
    return out, max_logits, lse


prefill.__doc__ += _SHAPES + """
    fused=True runs the fused score + top-k (no [T, N] logits in the workspace, the same selected
    rows, in ascending order; the indexer kernel must be "auto" or "q_resident"; see bench/RESULTS.md
    for its speed). With fused=False the unfused path runs, faster at every shape measured: over all
    T tokens where their [T, N] logits can be allocated, else in chunks of tokens whose logits can
    (1024 or 512 tokens a chunk), else the fused path does. indexer_kernel and
    attention_kernel take the kernel names of indexer_logits and sparse_mla_prefill;
    split_epilogue as for indexer_logits. stream: a CUDA stream handle (int, torch.cuda.Stream,
    cupy.cuda.Stream); by default the current stream of q's library, so the call is CUDA-graph
    capturable. Arrays must be on one CUDA device (the CPU path is fp8dsa.reference.prefill).

    Raises TypeError for a dtype, ValueError for a shape, stride, alignment, placement or value
    (with the library's message), MemoryError when host memory runs out, RuntimeError for a device
    or CUDA failure.
    """
