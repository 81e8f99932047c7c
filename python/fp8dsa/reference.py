"""The CPU references (the library's reference::*_cpu, f64 accumulation): NumPy arrays in, NumPy
arrays out, the same arguments as the GPU calls minus kernel and stream.

NumPy has no float8 or bfloat16 dtype: e4m3 inputs are uint8 arrays of raw bits (see
fp8dsa.e4m3_from_float), or ml_dtypes.float8_e4m3fn arrays where ml_dtypes is installed; bf16
outputs are ml_dtypes.bfloat16 arrays where ml_dtypes is installed and uint16 raw bits otherwise
(see fp8dsa.bf16_to_float).

The time of indexer_logits, sparse_mla_prefill and prefill is estimated before they start (from
their f64 work, on the FP8DSA_CPU_THREADS threads the references use, else every core): past
max_seconds (default 3600, as the fp8dsa command) they raise ValueError with the estimate instead
of running; max_seconds=None runs whatever the estimate. topk and lse_merge take time linear in
their inputs. Ctrl-C stops a reference within a tenth of a second (KeyboardInterrupt; arrays given for its
outputs are then partly written).

Errors are those of the GPU calls, plus MemoryError where the host has not the working memory a
reference needs.
"""

from . import _arrays, _fp8dsa
from . import _indexer, _lse_merge, _pipeline, _sparse_mla, _topk

_view = _arrays.dlpack_view


def sparse_mla_prefill(q, kv, indices, sm_scale, d_v=512, attn_sink=None, topk_length=None, *,
                       q_scale=1.0, kv_scale=1.0, out=None, max_logits=None, lse=None,
                       kv_format="e4m3", max_seconds=_fp8dsa.MAX_CPU_SECONDS):
    """CPU reference of fp8dsa.sparse_mla_prefill: f64 on the dequantised values (e4m3, or the
    V3.2 rows' e4m3 * scale and bf16 rope), exact softmax; returns (out, max_logits, lse).
    max_seconds: the call is refused (ValueError) before anything runs where its estimated time is
    past it (None: no limit). Ctrl-C stops the call.
    """
    op = "reference.sparse_mla_prefill"
    sm_scale, q_scale, kv_scale = _arrays.scales(op, sm_scale, q_scale, kv_scale)
    d_v = _sparse_mla.value_dim(op, d_v)
    max_seconds = _arrays.time_limit(op, max_seconds)
    _sparse_mla.sparse_mla_inputs(op, q, kv, indices, attn_sink, topk_length, kv_format)
    _fp8dsa.sparse_mla_cpu_check(_view(q), _view(kv), _view(indices), sm_scale, d_v,
                                 _view(attn_sink), _view(topk_length), q_scale, kv_scale, kv_format,
                                 max_seconds)
    out, max_logits, lse = _sparse_mla.attention_outputs(op, q, d_v, out, max_logits, lse)
    _fp8dsa.sparse_mla_cpu(_view(q), _view(kv), _view(indices), sm_scale, d_v, _view(attn_sink),
                           _view(topk_length), q_scale, kv_scale, _view(out), _view(max_logits),
                           _view(lse), kv_format)
    return out, max_logits, lse


def indexer_logits(q, kv, weights, ks, ke, *, logits=None, fill_masked=True,
                   max_seconds=_fp8dsa.MAX_CPU_SECONDS):
    """CPU reference of fp8dsa.indexer_logits: f64 over the exact e4m3 values; returns logits [T, N].
    max_seconds: the call is refused (ValueError) before anything runs where its estimated time is
    past it (None: no limit). Ctrl-C stops the call.
    """
    op = "reference.indexer_logits"
    k, k_scale = _indexer.indexer_arrays(op, q, kv, weights, ks, ke)
    fill_masked = _arrays.flag(op, "fill_masked", fill_masked)
    max_seconds = _arrays.time_limit(op, max_seconds)
    _fp8dsa.indexer_logits_cpu_check(_view(q), _view(k), _view(k_scale), _view(weights), _view(ks),
                                     _view(ke), max_seconds)
    buffer = _indexer.indexer_logits_buffer(op, q, k, logits)
    _fp8dsa.indexer_logits_cpu(_view(q), _view(k), _view(k_scale), _view(weights), _view(ks),
                               _view(ke), _view(buffer), fill_masked)
    return _indexer.indexer_logits_result(buffer, logits, k)


def topk(logits, ks, ke, k=2048, sorted=False, page_table=None, *, page_size=0, row_seq=None,
         row_pos_base=None, out=None):
    """CPU reference of fp8dsa.topk: exact top-k, f32 logits compared as given; returns indices
    [T, k].
    """
    op = "reference.topk"
    k, sorted, page_size = _topk.topk_scalars(op, k, sorted, page_size)
    _topk.topk_inputs(op, logits, ks, ke, page_table, row_seq, row_pos_base)
    _fp8dsa.topk_cpu_check(_view(logits), _view(ks), _view(ke), k, sorted, _view(page_table),
                           page_size, _view(row_seq), _view(row_pos_base))
    out = _topk.topk_output(op, logits, k, out)
    _fp8dsa.topk_cpu(_view(logits), _view(ks), _view(ke), k, sorted, _view(page_table),
                     page_size, _view(row_seq), _view(row_pos_base), _view(out))
    return out


def prefill(index_q, index_kv, weights, ks, ke, q, kv, sm_scale, topk=2048, d_v=512,
            attn_sink=None, *, q_scale=1.0, kv_scale=1.0, out=None, max_logits=None, lse=None,
            max_seconds=_fp8dsa.MAX_CPU_SECONDS):
    """CPU reference of fp8dsa.prefill: the three CPU references in sequence; returns (out,
    max_logits, lse).
    max_seconds: the call is refused (ValueError) before anything runs where its estimated time is
    past it (None: no limit). Ctrl-C stops the call.
    """
    op = "reference.prefill"
    sm_scale, q_scale, kv_scale = _arrays.scales(op, sm_scale, q_scale, kv_scale)
    topk = _pipeline.prefill_topk(topk)
    d_v = _sparse_mla.value_dim(op, d_v)
    max_seconds = _arrays.time_limit(op, max_seconds)
    index_k, index_k_scale = _pipeline.prefill_inputs(op, index_q, index_kv, weights, ks, ke, q, kv,
                                                      attn_sink)
    _fp8dsa.prefill_cpu_check(_view(index_q), _view(index_k), _view(index_k_scale), _view(weights),
                              _view(ks), _view(ke), _view(q), _view(kv), sm_scale, topk, d_v,
                              _view(attn_sink), q_scale, kv_scale, max_seconds)
    out, max_logits, lse = _sparse_mla.attention_outputs(op, q, d_v, out, max_logits, lse)
    _fp8dsa.prefill_cpu(_view(index_q), _view(index_k), _view(index_k_scale), _view(weights),
                        _view(ks), _view(ke), _view(q), _view(kv), sm_scale, topk, d_v,
                        _view(attn_sink), q_scale, kv_scale, _view(out), _view(max_logits),
                        _view(lse))
    return out, max_logits, lse


def lse_merge(out_parts, lse_parts, max_logits_parts=None, attn_sink=None, *, out=None,
              max_logits=None, lse=None):
    """CPU reference of fp8dsa.lse_merge: f64 on the bf16 parts; returns (out, max_logits, lse).
    """
    op = "reference.lse_merge"
    _lse_merge.lse_merge_inputs(op, out_parts, lse_parts, max_logits_parts, attn_sink)
    _fp8dsa.lse_merge_cpu_check(_view(out_parts), _view(lse_parts), _view(max_logits_parts),
                                _view(attn_sink))
    out, max_logits, lse = _lse_merge.lse_merge_outputs(op, out_parts, max_logits_parts, out,
                                                        max_logits, lse)
    _fp8dsa.lse_merge_cpu(_view(out_parts), _view(lse_parts), _view(max_logits_parts),
                          _view(attn_sink), _view(out), _view(lse), _view(max_logits))
    return out, max_logits, lse


sparse_mla_prefill.__doc__ += _sparse_mla._SHAPES
lse_merge.__doc__ += _lse_merge._SHAPES
indexer_logits.__doc__ += _indexer._SHAPES
topk.__doc__ += _topk._SHAPES
prefill.__doc__ += _pipeline._SHAPES
