"""e4m3 and bf16 conversions on NumPy arrays, with the library's own host conversions
(include/fp8dsa/fp8.h: round to nearest even, finite values saturate to +-448, NaN stays NaN)."""

import numpy as np

from . import _arrays, _fp8dsa


def _host_bits(op, x, dtypes, bits_dtype):
    """`x` as a contiguous NumPy array of its raw bits in the machine's byte order (the same shape,
    0-d included)."""
    x = np.asarray(x)
    _arrays.check_dtype(op, "x", x, dtypes)
    if not x.dtype.isnative:
        x = x.astype(x.dtype.newbyteorder("="))
    return np.ascontiguousarray(x).reshape(x.shape).view(bits_dtype)


def e4m3_from_float(x):
    """float32 values (any shape; other real dtypes are converted to float32 first) -> a uint8
    array of the same shape holding their e4m3 bits."""
    x = np.asarray(x)
    # Real dtypes: NumPy's bool, integers and floats, and ml_dtypes' bfloat16 / float8 (kind "V").
    low_precision = x.dtype.kind == "V" and x.dtype.name.startswith(("bfloat16", "float8"))
    if x.dtype.kind not in "biuf" and not low_precision:
        raise TypeError(f"e4m3_from_float: x must hold real numbers (given dtype {x.dtype})")
    values = np.ascontiguousarray(x, dtype=np.float32).reshape(x.shape)
    bits = np.empty(values.shape, dtype=np.uint8)
    _fp8dsa.floats_to_e4m3(values.reshape(-1), bits.reshape(-1))
    return bits


def float_from_e4m3(x):
    """e4m3 values (uint8 raw bits, or ml_dtypes.float8_e4m3fn) -> float32 of the same shape."""
    bits = _host_bits("float_from_e4m3", x, _arrays.E4M3, np.uint8)
    values = np.empty(bits.shape, dtype=np.float32)
    _fp8dsa.e4m3_to_floats(bits.reshape(-1), values.reshape(-1))
    return values


def bf16_to_float(x):
    """bf16 values (uint16 raw bits, or ml_dtypes.bfloat16) -> float32 of the same shape."""
    bits = _host_bits("bf16_to_float", x, _arrays.BF16, np.uint16)
    values = np.empty(bits.shape, dtype=np.float32)
    _fp8dsa.bf16_to_floats(bits.reshape(-1), values.reshape(-1))
    return values
