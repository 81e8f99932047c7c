"""fp8dsa: DeepSeek-V3.2-style sparse attention (DSA) prefill in FP8 on Hopper GPUs.

GPU calls (arrays on one CUDA device: torch, CuPy or JAX; they run on the caller's current CUDA
stream and are CUDA-graph capturable):
  sparse_mla_prefill  FlashMLA's flash_mla_sparse_fwd: (out, max_logits, lse)
  indexer_logits      DeepGEMM's fp8_mqa_logits: logits [T, N]
  topk                exact top-k of each logits row, optionally through a page table
  fused_topk        indexer_logits then topk in one pass, without the [T, N] logits
  prefill             indexer -> top-k -> sparse MLA in one call
  lse_merge           sparse MLA results over disjoint key sets into one (keys split across ranks)
CPU (NumPy): fp8dsa.reference.* (the same calls on the library's f64 references),
build_causal_bounds, and the conversions e4m3_from_float / float_from_e4m3 / bf16_to_float.

Arrays cross into the library as DLPack; outputs are allocated with the caller's array library
unless given with out= (logits=). Bad arguments raise TypeError (dtype) or ValueError (with the
library's message); see help() of each function for shapes and dtypes.
"""

from importlib import metadata as _metadata

from . import reference
from ._conversions import bf16_to_float, e4m3_from_float, float_from_e4m3
from ._fused_topk import fused_topk
from ._indexer import build_causal_bounds, indexer_logits
from ._lse_merge import lse_merge
from ._pipeline import prefill
from ._sparse_mla import sparse_mla_prefill
from ._topk import topk

try:
    __version__ = _metadata.version("fp8dsa")
except _metadata.PackageNotFoundError:
    __version__ = "unknown"

__all__ = [
    "bf16_to_float",
    "build_causal_bounds",
    "e4m3_from_float",
    "float_from_e4m3",
    "indexer_logits",
    "fused_topk",
    "lse_merge",
    "prefill",
    "reference",
    "sparse_mla_prefill",
    "topk",
]
