// float <-> e4m3 / bf16 on the host, by integer manipulation of the f32 bits so that the result
// does not depend on the floating-point rounding mode. The special cases follow the CUDA toolkit's
// host conversions (__nv_cvt_float_to_fp8 with __NV_SATFINITE, __float2bfloat16), which the tests
// check bit for bit.
#include "fp8dsa/fp8.h"

#include <bit>

namespace fp8dsa {
namespace {

constexpr uint32_t kF32AbsMask = 0x7FFFFFFFu;
constexpr uint32_t kF32InfBits = 0x7F800000u;
constexpr uint32_t kF32MantissaBits = 23;

constexpr uint8_t kE4M3NaN = 0x7F;     // the toolkit's canonical NaN (sign dropped)
constexpr uint8_t kE4M3MaxNorm = 0x7E;  // 448
constexpr int kE4M3ExpBias = 7;
constexpr int kE4M3MinNormExp = -6;     // 2^-6: smallest normal
// |x| <= 2^-10 (half the smallest subnormal 2^-9) rounds to zero; the tie goes to the even code 0.
constexpr uint32_t kE4M3HalfMinSubnormalBits = 0x3A800000u;  // 2^-10 as f32
// Every finite |x| >= 448 saturates: below 464 it rounds down to 448 anyway, at 464 the tie goes to
// the even mantissa of 448, and above 464 __NV_SATFINITE clamps (inf included).
constexpr uint32_t kE4M3MaxNormBits = 0x43E00000u;  // 448 as f32

// Round-to-nearest-even of `value >> shift` (shift in [1, 31]).
uint32_t shift_right_rne(uint32_t value, uint32_t shift) {
  const uint32_t kept = value >> shift;
  const uint32_t rest = value & ((1u << shift) - 1u);
  const uint32_t half = 1u << (shift - 1);
  return kept + ((rest > half || (rest == half && (kept & 1u))) ? 1u : 0u);
}

}  // namespace

uint8_t float_to_e4m3(float x) {
  const uint32_t bits = std::bit_cast<uint32_t>(x);
  const uint32_t abs_bits = bits & kF32AbsMask;
  if (abs_bits > kF32InfBits) return kE4M3NaN;
  const uint8_t sign = static_cast<uint8_t>((bits >> 24) & 0x80u);
  if (abs_bits <= kE4M3HalfMinSubnormalBits) return sign;  // f32 subnormals included
  if (abs_bits >= kE4M3MaxNormBits) return sign | kE4M3MaxNorm;

  const int exp = static_cast<int>(abs_bits >> kF32MantissaBits) - 127;
  const uint32_t significand = (abs_bits & 0x7FFFFFu) | (1u << kF32MantissaBits);
  uint32_t code;
  if (exp >= kE4M3MinNormExp) {
    // Keep 3 mantissa bits; a carry out of the mantissa correctly bumps the exponent field.
    const uint32_t biased = static_cast<uint32_t>(exp + kE4M3ExpBias);
    code = (biased << 3) + shift_right_rne(significand, kF32MantissaBits - 3) - 8u;
  } else {
    // Subnormal e4m3: code = |x| * 2^9, i.e. the 24-bit significand scaled by 2^(exp - 23 + 9).
    // Rounding up to 8 yields 0x08, the smallest normal, which is the right encoding.
    code = shift_right_rne(significand, static_cast<uint32_t>(14 - exp));
  }
  return sign | static_cast<uint8_t>(code);
}

float e4m3_to_float(uint8_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x80u) << 24;
  const uint32_t exp = (bits >> 3) & 0xFu;
  const uint32_t mantissa = bits & 0x7u;
  if ((bits & 0x7Fu) == kE4M3NaN) return std::bit_cast<float>(0x7FFFFFFFu);  // as the toolkit
  if (exp == 0) {
    // Subnormal: mantissa * 2^-9, exact in f32.
    const float magnitude = static_cast<float>(mantissa) * (1.0f / 512.0f);
    return std::bit_cast<float>(std::bit_cast<uint32_t>(magnitude) | sign);
  }
  const uint32_t f32_exp = exp - kE4M3ExpBias + 127;
  return std::bit_cast<float>(sign | (f32_exp << kF32MantissaBits) | (mantissa << 20));
}

uint16_t float_to_bf16(float x) {
  const uint32_t bits = std::bit_cast<uint32_t>(x);
  if ((bits & kF32AbsMask) > kF32InfBits) return 0x7FFF;  // the toolkit's canonical NaN
  // Overflow past the largest finite bf16 carries into the exponent and yields inf, as RNE must.
  return static_cast<uint16_t>(shift_right_rne(bits, 16));
}

float bf16_to_float(uint16_t bits) {
  return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16);
}

void floats_to_e4m3(const float* in, uint8_t* out, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = float_to_e4m3(in[i]);
}

void e4m3_to_floats(const uint8_t* in, float* out, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = e4m3_to_float(in[i]);
}

}  // namespace fp8dsa
