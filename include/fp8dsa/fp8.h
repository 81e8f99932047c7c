// Host-side scalar conversions: float <-> e4m3 (bit-exact with the toolkit's __nv_fp8_e4m3 host
// conversion: round to nearest even, saturate finite values to +-448, NaN stays NaN) and
// float <-> bf16 (round to nearest even). Used by the references, tests, benchmark and CLI.
#pragma once

#include <cstddef>
#include <cstdint>

namespace fp8dsa {

uint8_t float_to_e4m3(float x);
float e4m3_to_float(uint8_t bits);

uint16_t float_to_bf16(float x);
float bf16_to_float(uint16_t bits);

// Bulk forms of the same conversions.
void floats_to_e4m3(const float* in, uint8_t* out, size_t n);
void e4m3_to_floats(const uint8_t* in, float* out, size_t n);

}  // namespace fp8dsa
