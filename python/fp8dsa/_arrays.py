"""The caller's array library (torch, CuPy, JAX or NumPy): dtype names, the checks the extension
needs before it can allocate, views whose dtype DLPack can carry, outputs allocated with the same
library, and the CUDA stream to run on."""

import contextlib
import math

import numpy as np

from . import _fp8dsa

try:
    import ml_dtypes
except ImportError:
    ml_dtypes = None

# Accepted dtypes per argument kind, by canonical name (torch's without the "torch." prefix, NumPy's
# dtype.name otherwise). NumPy and CuPy have no float8: e4m3 travels as uint8 raw bits (and bf16 as
# uint16 bits) there; ml_dtypes' float8_e4m3fn / bfloat16 NumPy arrays are accepted as such.
E4M3 = ("float8_e4m3fn", "uint8")
E4M3_OR_BF16 = ("float8_e4m3fn", "uint8", "bfloat16")
BF16 = ("bfloat16", "uint16")
F32 = ("float32",)
I32 = ("int32",)


def library(x):
    """'torch', 'cupy', 'jax' or 'numpy': the library whose arrays an output of `x` is made with."""
    module = type(x).__module__.split(".")[0]
    if module == "torch":
        return "torch"
    if module == "cupy":
        return "cupy"
    if module in ("jax", "jaxlib"):
        return "jax"
    return "numpy"


def dtype_name(x):
    if library(x) == "torch":
        return str(x.dtype).removeprefix("torch.")
    return np.dtype(x.dtype).name


def check_dtype(op, name, x, dtypes):
    """TypeError unless the array `x` has one of `dtypes` (canonical names)."""
    given = dtype_name(x)
    if given not in dtypes:
        raise TypeError(f"{op}: {name} dtype must be {' or '.join(dtypes)} (given {given})")


def check(op, name, x, ndims, layout, dtypes):
    """TypeError for something that is not an array or has the wrong dtype, ValueError for the wrong
    number of dimensions. Everything else (shapes, strides, placement, alignment) is checked by the
    extension and the library."""
    if not (hasattr(x, "dtype") and hasattr(x, "shape")):
        raise TypeError(f"{op}: {name} must be an array (torch, CuPy, JAX or NumPy), "
                        f"given {type(x).__name__}")
    check_dtype(op, name, x, dtypes)
    if library(x) == "numpy" and not np.dtype(x.dtype).isnative:
        raise TypeError(f"{op}: {name} must be in the machine's byte order (given {np.dtype(x.dtype).str}; "
                        f"x.astype(x.dtype.newbyteorder('=')) converts it)")
    if len(x.shape) not in ndims:
        raise ValueError(f"{op}: {name} must be {layout} (given shape {tuple(x.shape)})")
    return x


def check_optional(op, name, x, ndims, layout, dtypes):
    return None if x is None else check(op, name, x, ndims, layout, dtypes)


def dlpack_view(x):
    """`x`, or a same-memory view of it with a dtype that DLPack carries (raw bits for float8 and
    for ml_dtypes' bfloat16); torch tensors detached (DLPack refuses tensors that require grad)."""
    if x is None:
        return None
    lib = library(x)
    name = dtype_name(x)
    if lib == "torch":
        import torch

        x = x.detach()
        return x.view(torch.uint8) if name == "float8_e4m3fn" else x
    if lib == "numpy" and name in ("float8_e4m3fn", "bfloat16"):
        return x.view(np.uint8 if name == "float8_e4m3fn" else np.uint16)
    if lib == "jax" and name == "float8_e4m3fn":
        import jax

        return jax.lax.bitcast_convert_type(x, np.uint8)
    return x


def real(op, name, value):
    """A scalar argument as a float; TypeError naming it for another type (nanobind would print its
    whole signature instead), ValueError for an integer past the float range (10**400)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{op}: {name} must be a real number (given {value!r})")
    try:
        return float(value)
    except OverflowError:
        raise ValueError(f"{op}: {name} (an integer of {len(str(abs(int(value))))} digits) is past "
                         "the range of a float") from None


INT32_MAX = 2**31 - 1


def is_integer(value):
    """Whether `value` is a Python or NumPy integer (bools are not)."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def integer(op, name, value, lo, hi, valid=None):
    """An integer argument (int or NumPy integer, not bool) as an int; TypeError naming it for
    another type, ValueError for a value outside [lo, hi] (checked before anything is sized from
    it). `valid`: the range the message states, where the library's own check is narrower."""
    if not is_integer(value):
        raise TypeError(f"{op}: {name} must be an integer (given {value!r})")
    if not lo <= value <= hi:
        raise ValueError(f"{op}: {name} ({int(value)}) must be in {valid or f'[{lo}, {hi}]'}")
    return int(value)


def time_limit(op, max_seconds):
    """A CPU reference's max_seconds as a float, None as no limit (inf); TypeError for another
    type, ValueError for a value that is not > 0."""
    if max_seconds is None:
        return math.inf
    seconds = real(op, "max_seconds", max_seconds)
    if not seconds > 0:
        raise ValueError(f"{op}: max_seconds ({max_seconds!r}) must be > 0, or None for no limit")
    return seconds


def text(op, name, value):
    """A string argument (a kernel or format name); TypeError naming it otherwise."""
    if not isinstance(value, str):
        raise TypeError(f"{op}: {name} must be a string (given {value!r})")
    return value


def flag(op, name, value):
    """A boolean argument (bool, NumPy bool, or the integers 0 and 1) as a bool; TypeError naming it
    otherwise (bool("no") would be True)."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if is_integer(value) and value in (0, 1):
        return bool(value)
    raise TypeError(f"{op}: {name} must be a bool (given {value!r})")


def scales(op, sm_scale, q_scale, kv_scale):
    """The attention calls' three scalar scales through `real`."""
    return real(op, "sm_scale", sm_scale), real(op, "q_scale", q_scale), real(op, "kv_scale", kv_scale)


def _numpy_dtype(name):
    if name == "bfloat16":
        return ml_dtypes.bfloat16 if ml_dtypes is not None else np.uint16
    return np.dtype(name)


def empty(like, shape, dtype):
    """An uninitialised array of `shape` and canonical `dtype` ('bfloat16', 'float32', 'int32',
    'uint8') made with `like`'s library on `like`'s device. bf16 is uint16 raw bits for CuPy, and
    for NumPy without ml_dtypes."""
    lib = library(like)
    if lib == "torch":
        import torch

        return torch.empty(shape, dtype=getattr(torch, dtype), device=like.device)
    if lib == "cupy":
        import cupy

        with cupy.cuda.Device(like.device.id):
            return cupy.empty(shape, dtype=np.uint16 if dtype == "bfloat16" else np.dtype(dtype))
    if lib == "jax":
        import jax.numpy as jnp

        return jnp.empty(shape, dtype=getattr(jnp, dtype), device=next(iter(like.devices())))
    return np.empty(shape, dtype=_numpy_dtype(dtype))


def output(op, name, given, like, shape, ndims, layout, dtypes):
    """The output array: `given` after its dtype and ndim checks, or a new one of `shape`."""
    if given is not None:
        return writable(op, name, check(op, name, given, ndims, layout, dtypes))
    return empty(like, extents(op, name, layout, shape), dtypes[0])


def writable(op, name, x):
    """`x`, a given output; ValueError for a read-only NumPy array (a broadcast one included)."""
    if library(x) == "numpy" and not x.flags.writeable:
        raise ValueError(f"{op}: {name} must be writable (given a read-only or broadcast array)")
    return x


def extents(op, name, layout, shape):
    """An output's shape, refused where an extent passes int32 (the library's extents are: T, N, k,
    h, ...), before the allocation: an input broadcast to 2**31 rows would otherwise ask for
    gigabytes first."""
    shape = tuple(max(int(n), 0) for n in shape)
    if any(n > INT32_MAX for n in shape):
        raise ValueError(f"{op}: {name} would be {layout} = {list(shape)}: an extent past {INT32_MAX} "
                         "(the library's extents are int32)")
    return shape


def require_cuda(op, name, x):
    """ValueError unless `x` lives on a CUDA device, before a GPU call allocates anything from its
    shapes (the extension checks the placement of every array again, in the same words)."""
    lib = library(x)
    given = None
    if lib == "numpy":
        given = "host memory"
    elif lib == "torch" and x.device.type != "cuda":
        given = "host memory" if x.device.type == "cpu" else f"a torch '{x.device.type}' device"
    elif lib == "jax" and any(d.platform == "cpu" for d in x.devices()):
        given = "host memory"
    if given is not None:
        raise ValueError(f"{op}: {name} must be on a CUDA device (given {given}; the CPU path is "
                         "fp8dsa.reference)")


def is_out_of_memory(error):
    """Whether an allocation failed for want of memory (MemoryError, torch's OutOfMemoryError, CuPy's
    OutOfMemoryError, JAX's RESOURCE_EXHAUSTED)."""
    text = str(error).lower()
    return isinstance(error, MemoryError) or "out of memory" in text or "resource_exhausted" in text


def workspace(like, nbytes):
    """A uint8 array of `nbytes` plus the alignment slack the extension starts the workspace after;
    None when nothing is needed."""
    if nbytes == 0:
        return None
    return empty(like, (nbytes + _fp8dsa.WORKSPACE_ALIGNMENT,), "uint8")


def stream_argument(op, stream):
    """A GPU call's `stream` as an int handle (None: the current stream of the inputs' library),
    checked before anything is allocated: TypeError for another type, ValueError out of range."""
    if stream is None:
        return None
    try:
        return _stream_handle(stream)
    except (TypeError, ValueError) as error:
        raise type(error)(f"{op}: {error}") from None


def _stream_handle(stream):
    for attribute in ("cuda_stream", "ptr"):  # torch.cuda.Stream, cupy.cuda.Stream
        if hasattr(stream, attribute):
            return int(getattr(stream, attribute))
    if not is_integer(stream):
        raise TypeError(f"stream must be a CUDA stream handle (an int, torch.cuda.Stream or "
                        f"cupy.cuda.Stream; given {stream!r})")
    if not 0 <= stream < 2**64:
        raise ValueError(f"stream ({int(stream)}) must be a CUDA stream handle in [0, 2**64)")
    return int(stream)


@contextlib.contextmanager
def cuda_stream(like, stream, inputs):
    """Yields the stream handle for a GPU call on `like`'s arrays: `stream` (an int handle,
    torch.cuda.Stream or cupy.cuda.Stream) or else the library's current stream (torch, CuPy), so
    that the call orders with the caller's work and is captured into the caller's CUDA graph.
    JAX has no current stream to join: its arrays are waited for first, the call runs on `stream`
    (default: the legacy default stream) and is waited for before control returns."""
    lib = library(like)
    if lib == "jax":
        for x in inputs:
            if x is not None:
                x.block_until_ready()
        handle = 0 if stream is None else _stream_handle(stream)
        yield handle
        _fp8dsa.synchronize(next(iter(like.devices())).id, handle)
        return
    if stream is not None:
        yield _stream_handle(stream)
    elif lib == "torch" and like.is_cuda:
        import torch

        yield torch.cuda.current_stream(like.device).cuda_stream
    elif lib == "cupy":
        import cupy

        with cupy.cuda.Device(like.device.id):
            yield cupy.cuda.get_current_stream().ptr
    else:
        yield 0
