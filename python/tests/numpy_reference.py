"""Independent NumPy forms of each stage (f64, written from SPEC.md, sharing no code with the
library) and the random inputs the tests draw."""

import numpy as np

import fp8dsa


def e4m3_values(bits):
    """e4m3fn bits -> f64 values, decoded field by field (bias 7, subnormals, NaN = S.1111.111)."""
    bits = np.asarray(bits).astype(np.int64)
    sign = np.where(bits & 0x80, -1.0, 1.0)
    exponent = (bits >> 3) & 0xF
    mantissa = (bits & 0x7).astype(np.float64)
    magnitude = np.where(exponent == 0, mantissa / 8.0 * 2.0**-6,
                         (1.0 + mantissa / 8.0) * 2.0**(exponent - 7))
    return np.where((bits & 0x7F) == 0x7F, np.nan, sign * magnitude)


def bf16_values(bits):
    """bf16 bits (uint16, or ml_dtypes.bfloat16) -> f64: the high half of an f32."""
    bits = np.asarray(bits).view(np.uint16).astype(np.uint32)
    return (bits << 16).view(np.float32).astype(np.float64)


def bf16_bits(values):
    """float values -> bf16 bits (uint16), rounded to nearest even (no NaN handling: test values)."""
    bits = np.asarray(values, np.float32).view(np.uint32).astype(np.uint64)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)


def v32_values(rows):
    """DeepSeek-V3.2 cache rows (uint8 [N, 656] or [N, 1, 656]) -> f64 [N, 576]: bytes [0, 512) e4m3
    nope values times the float32 scale of their 128-column block (bytes [512, 528)), then the 64
    bf16 rope values (bytes [528, 656))."""
    rows = np.ascontiguousarray(np.asarray(rows).view(np.uint8).reshape(len(rows), -1))
    scales = rows[:, 512:528].copy().view(np.float32).astype(np.float64)
    nope = e4m3_values(rows[:, :512]) * np.repeat(scales, 128, axis=1)
    rope = bf16_values(rows[:, 528:656].copy().view(np.uint16))
    return np.concatenate([nope, rope], axis=1)


def quantize_v32(values):
    """f32 [N, 576] -> V3.2 rows uint8 [N, 656]: per 128-column nope block scale = amax / 448 (0 for
    a zero block) and the e4m3 of value / scale; the rope as bf16."""
    values = np.asarray(values, np.float32)
    blocks = values[:, :512].reshape(-1, 4, 128)
    scales = (np.abs(blocks).max(axis=2) / np.float32(448.0)).astype(np.float32)
    divisor = np.where(scales > 0, scales, np.float32(1.0))[:, :, None]
    nope = np.where(scales[:, :, None] > 0, fp8dsa.e4m3_from_float(blocks / divisor), 0)
    rows = np.empty((len(values), 656), np.uint8)
    rows[:, :512] = nope.reshape(-1, 512)
    rows[:, 512:528] = scales.view(np.uint8)
    rows[:, 528:] = bf16_bits(values[:, 512:]).view(np.uint8)
    return rows


def random_e4m3(rng, shape, scale=1.0):
    """e4m3 bits of normal(0, scale) draws (the library rounds; the tests decode independently)."""
    return fp8dsa.e4m3_from_float(rng.normal(0.0, scale, size=shape).astype(np.float32))


def random_bf16(rng, shape, scale=1.0):
    """bf16 bits of normal(0, scale) draws."""
    return bf16_bits(rng.normal(0.0, scale, size=shape))


def random_v32_rows(rng, num_kv, scale=1.0):
    """V3.2 rows of normal(0, scale) draws with each nope block and the rope scaled by its own
    2^u, u uniform in [-2, 2) (magnitudes apart by up to 16x); row 3 has a zero block (scale 0)."""
    magnitudes = np.repeat(2.0 ** rng.uniform(-2, 2, size=(num_kv, 5)), [128, 128, 128, 128, 64], axis=1)
    values = rng.normal(0.0, scale, size=(num_kv, 576)) * magnitudes
    values[3 % num_kv, 128:256] = 0.0
    return quantize_v32(values)


def random_indices(rng, num_tokens, topk, num_kv, invalid_per_row=3):
    """[T, topk] int32: distinct rows of [0, num_kv) per token, plus a few invalid entries
    (-1, num_kv, INT_MIN, INT_MAX)."""
    invalid = np.array([-1, num_kv, np.iinfo(np.int32).min, np.iinfo(np.int32).max], np.int64)
    indices = np.empty((num_tokens, topk), np.int32)
    for t in range(num_tokens):
        row = rng.permutation(num_kv)[:topk].astype(np.int64)
        if len(row) < topk:
            row = np.concatenate([row, np.full(topk - len(row), -1)])
        slots = rng.choice(topk, size=invalid_per_row, replace=False)
        row[slots] = invalid[rng.integers(0, len(invalid), size=invalid_per_row)]
        indices[t] = row
    return indices


def sparse_mla(q_bits, kv_bits, indices, sm_scale, d_v=512, attn_sink=None, topk_length=None,
               q_scale=1.0, kv_scale=1.0, kv_format="e4m3"):
    """(out, max_logits, lse) in f64, exact softmax over the valid indices (SPEC 4). kv_format
    "deepseek_v32": q is bf16 bits and kv V3.2 rows (v32_values)."""
    if kv_format == "deepseek_v32":
        q, kv = bf16_values(q_bits), v32_values(kv_bits)
    else:
        q, kv = e4m3_values(q_bits), e4m3_values(kv_bits.reshape(kv_bits.shape[0], -1))
    indices = indices.reshape(indices.shape[0], -1).astype(np.int64)
    num_tokens, num_heads, _ = q.shape
    num_kv, topk = kv.shape[0], indices.shape[1]
    out = np.zeros((num_tokens, num_heads, d_v))
    max_logits = np.full((num_tokens, num_heads), -np.inf)
    lse = np.full((num_tokens, num_heads), np.inf)
    for t in range(num_tokens):
        length = topk if topk_length is None else topk_length[t]
        positions = np.arange(topk)
        valid = (indices[t] >= 0) & (indices[t] < num_kv) & (positions < length)
        rows = kv[indices[t][valid]]
        if len(rows) == 0:
            continue
        scores = (q_scale * kv_scale * sm_scale) * (q[t] @ rows.T)
        top = scores.max(axis=1)
        weights = np.exp(scores - top[:, None])
        total = weights.sum(axis=1)
        out[t] = kv_scale * (weights @ rows[:, :d_v]) / total[:, None]
        max_logits[t] = top
        lse[t] = top + np.log(total)
        if attn_sink is not None:
            out[t] /= (1.0 + np.exp(attn_sink.astype(np.float64) - lse[t]))[:, None]
    return out, max_logits, lse


def indexer_logits(q_bits, k_bits, k_scale, weights, ks, ke):
    """logits [T, N] in f64, -inf outside [ks, ke) (SPEC 1)."""
    q = e4m3_values(q_bits)
    k = e4m3_values(k_bits)
    dots = np.maximum(np.einsum("thd,sd->ths", q, k), 0.0)
    logits = k_scale.astype(np.float64)[None, :] * np.einsum("th,ths->ts", weights.astype(np.float64), dots)
    keys = np.arange(k.shape[0])[None, :]
    inside = (keys >= ks[:, None]) & (keys < ke[:, None])
    return np.where(inside, logits, -np.inf)


def topk_sets(logits, ks, ke, k):
    """Per row, the set of the min(k, ke - ks) keys of [ks, ke) with the largest logits."""
    sets = []
    for t in range(logits.shape[0]):
        lo, hi = max(0, ks[t]), min(logits.shape[1], ke[t])
        keys = np.arange(lo, max(lo, hi))
        best = keys[np.argsort(-logits[t, keys], kind="stable")[:k]]
        sets.append(set(int(s) for s in best))
    return sets


def through_page_table(index, page_table, page_size, seq, pos_base):
    """The page-table transform of one selected key (SPEC 2)."""
    pos = index - pos_base
    page = pos // page_size
    if page >= page_table.shape[1] or page_table[seq, page] < 0:
        return -1
    return int(page_table[seq, page]) * page_size + pos % page_size
