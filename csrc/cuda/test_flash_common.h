// What the two standalone checks (test_flash_fwd.cu, test_flash_bwd.cu) share: a case, bf16 and
// fp16 as bits on the host, the strides of either layout, and the keys poisoned past a point.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "flash_fwd.h"

namespace flash_test {

struct Case {
  int batch, heads, seq_q, seq_k, head_dim;
  bool is_causal;
  FlashDtype dtype;
  bool bshd = false;      // tensors stored as [batch, seq, heads, head_dim] (strided views)
  int poison_from = -1;   // >= 0: keys/values from this index on are NaN on the GPU (never read)
  float amplitude = 1.f;  // the forward's q, k ~ amplitude * N(0, 1): large scores move the max
};

inline uint16_t to_bits(float x, FlashDtype dtype) {
  if (dtype == FlashDtype::kBFloat16) return __nv_bfloat16_raw(__float2bfloat16_rn(x)).x;
  return __half_raw(__float2half_rn(x)).x;
}

inline float from_bits(uint16_t bits, FlashDtype dtype) {
  if (dtype == FlashDtype::kBFloat16) {
    __nv_bfloat16_raw raw;
    raw.x = bits;
    return __bfloat162float(__nv_bfloat16(raw));
  }
  __half_raw raw;
  raw.x = bits;
  return __half2float(__half(raw));
}

inline uint16_t nan_bits(FlashDtype dtype) {
  return dtype == FlashDtype::kBFloat16 ? 0x7fc0 : 0x7e00;
}

// Element strides of one tensor in the chosen layout: {batch, head, seq}.
struct Strides {
  int64_t batch, head, seq;
};

inline Strides strides_for(const Case& c, int seq, bool bshd) {
  const int64_t d = c.head_dim;
  if (bshd) return {int64_t(seq) * c.heads * d, d, int64_t(c.heads) * d};
  return {int64_t(c.heads) * seq * d, int64_t(seq) * d, d};
}

// The GPU's copies of k and v NaN from key c.poison_from on (the reference keeps the real values).
inline void poison_keys(const Case& c, Strides ks, std::vector<uint16_t>& k_bits,
                        std::vector<uint16_t>& v_bits) {
  if (c.poison_from < 0) return;
  for (int b = 0; b < c.batch; ++b)
    for (int h = 0; h < c.heads; ++h)
      for (int j = c.poison_from; j < c.seq_k; ++j)
        for (int e = 0; e < c.head_dim; ++e) {
          const int64_t i = b * ks.batch + h * ks.head + j * ks.seq + e;
          k_bits[i] = v_bits[i] = nan_bits(c.dtype);
        }
}

inline std::string describe(const Case& c) {
  char buf[160];
  snprintf(buf, sizeof(buf), "%s b=%d h=%d sq=%d sk=%d d=%d %s%s%s%s",
           c.dtype == FlashDtype::kBFloat16 ? "bf16" : "fp16", c.batch, c.heads, c.seq_q, c.seq_k,
           c.head_dim, c.is_causal ? "causal" : "full", c.bshd ? " bshd" : "",
           c.amplitude != 1.f ? " amplitude" : "", c.poison_from >= 0 ? " poisoned" : "");
  return buf;
}

}  // namespace flash_test
