"""The package imports without torch, CuPy or JAX, and documents shapes and dtypes."""

import subprocess
import sys

import fp8dsa


def test_import_without_gpu_libraries():
    # Each GPU library made unimportable; the CPU path still runs end to end.
    code = (
        "import sys\n"
        "for name in ('torch', 'cupy', 'jax'): sys.modules[name] = None\n"
        "import numpy as np, fp8dsa\n"
        "ks, ke, n = fp8dsa.build_causal_bounds([2], [1])\n"
        "logits = np.arange(6, dtype=np.float32).reshape(2, 3)\n"
        "print(fp8dsa.reference.topk(logits, ks, ke, 2, True).tolist())\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[[1, 0], [2, 1]]"


def test_docstrings_give_shapes_and_dtypes():
    assert "[T, h, 576]" in fp8dsa.sparse_mla_prefill.__doc__
    assert "max_logits" in fp8dsa.sparse_mla_prefill.__doc__
    assert "natural log" in fp8dsa.sparse_mla_prefill.__doc__
    assert "(k [N, D] float8_e4m3fn" in fp8dsa.indexer_logits.__doc__
    assert "[T, k] int32" in fp8dsa.topk.__doc__
    assert "fused=True runs the fused score + top-k" in fp8dsa.prefill.__doc__
    assert "[T, h, 576]" in fp8dsa.reference.sparse_mla_prefill.__doc__
    assert "uint16" in fp8dsa.reference.__doc__
    assert fp8dsa.__version__ != "unknown"


def test_a_machine_without_a_usable_gpu_reports_no_device():
    # Where CUDA cannot run (no GPU, or a driver older than the runtime) a GPU call fails as the C++
    # library and the fp8dsa command say it, not with the CUDA runtime's own error.
    from fp8dsa import _fp8dsa
    try:
        _fp8dsa.synchronize(0, 0)
    except RuntimeError as error:
        assert str(error).startswith("NoDevice: no CUDA device is available"), str(error)


def test_out_of_memory_errors_are_recognised():
    # prefill falls back to the fused path's smaller workspace on these, and only on these.
    from fp8dsa import _arrays
    assert _arrays.is_out_of_memory(MemoryError())
    assert _arrays.is_out_of_memory(RuntimeError("CUDA out of memory. Tried to allocate 16.00 GiB"))
    assert _arrays.is_out_of_memory(RuntimeError("RESOURCE_EXHAUSTED: Out of memory allocating"))
    assert not _arrays.is_out_of_memory(ValueError("prefill: topk (100) must be a multiple of 64"))
