"""fp8dsa.e4m3_from_float / float_from_e4m3 / bf16_to_float against a field-by-field decoder."""

import numpy as np
import pytest

import fp8dsa
import numpy_reference as ref


def test_every_e4m3_code_decodes():
    codes = np.arange(256, dtype=np.uint8).reshape(16, 16)
    values = fp8dsa.float_from_e4m3(codes)
    assert values.shape == (16, 16) and values.dtype == np.float32
    np.testing.assert_array_equal(values, ref.e4m3_values(codes).astype(np.float32))


def test_encode_rounds_saturates_and_round_trips():
    x = np.array([1.5, -0.0, 448.0, 1000.0, -np.inf, 1.0 + 1.0 / 16, 2.0**-9, 2.0**-11, np.nan],
                 np.float32)
    bits = fp8dsa.e4m3_from_float(x)
    assert bits.dtype == np.uint8
    # 1 + 1/16 is the tie between 1 and 1.125: even mantissa (1); 2^-11 rounds to zero; NaN -> 0x7F.
    assert bits.tolist() == [0x3C, 0x80, 0x7E, 0x7E, 0xFE, 0x38, 0x01, 0x00, 0x7F]
    codes = np.array([c for c in range(256) if c & 0x7F != 0x7F], np.uint8)
    assert np.array_equal(fp8dsa.e4m3_from_float(fp8dsa.float_from_e4m3(codes)), codes)


def test_encode_matches_ml_dtypes():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    x = np.random.default_rng(0).normal(0, 50, size=4096).astype(np.float32)
    expected = x.astype(ml_dtypes.float8_e4m3fn).view(np.uint8)
    assert np.array_equal(fp8dsa.e4m3_from_float(x), expected)
    assert np.array_equal(fp8dsa.float_from_e4m3(expected.view(ml_dtypes.float8_e4m3fn)),
                          expected.view(ml_dtypes.float8_e4m3fn).astype(np.float32))


def test_bf16_to_float():
    bits = np.array([0x3F80, 0xC000, 0x7F80, 0x0001, 0x7FC0], np.uint16)
    values = fp8dsa.bf16_to_float(bits)
    np.testing.assert_array_equal(values[:4], [1.0, -2.0, np.inf, ref.bf16_values(bits)[3]])
    assert np.isnan(values[4])


def test_dtype_errors():
    with pytest.raises(TypeError,
                       match=r"float_from_e4m3: x dtype must be float8_e4m3fn or uint8 \(given float32\)"):
        fp8dsa.float_from_e4m3(np.zeros(3, np.float32))
    with pytest.raises(TypeError, match="bf16_to_float: x dtype must be bfloat16 or uint16"):
        fp8dsa.bf16_to_float(np.zeros(3, np.int16))


def test_shapes_byte_order_and_types():
    # 0-d in, 0-d out; a big-endian array read by value; no silent conversion of None or complex.
    assert fp8dsa.e4m3_from_float(np.float32(1)).shape == ()
    assert fp8dsa.float_from_e4m3(np.uint8(0x38)) == np.float32(1.0)
    assert fp8dsa.float_from_e4m3(np.uint8(0x38)).shape == ()
    assert fp8dsa.bf16_to_float(np.array([0x3F80], ">u2")).tolist() == [1.0]
    for bad in (None, np.array([1 + 2j]), np.array(["1.5"])):
        with pytest.raises(TypeError, match="e4m3_from_float: x must hold real numbers"):
            fp8dsa.e4m3_from_float(bad)


def test_low_precision_inputs():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    assert fp8dsa.e4m3_from_float(np.array([1.5, 2.5], ml_dtypes.bfloat16)).tolist() == \
        fp8dsa.e4m3_from_float(np.array([1.5, 2.5], np.float32)).tolist()
    assert fp8dsa.e4m3_from_float(np.array([1.5], ml_dtypes.float8_e4m3fn)).tolist() == [0x3C]
