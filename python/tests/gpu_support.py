"""What the GPU tests share: the skip when there is no torch or no sm_90 GPU, torch inputs built
from the NumPy problems, their CPU references and the SPEC 6 accuracy checks against them."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)
if torch.cuda.get_device_capability() != (9, 0):
    pytest.skip("the fp8dsa kernels need an sm_90 (Hopper) GPU", allow_module_level=True)

import fp8dsa  # noqa: E402
import numpy_reference as ref  # noqa: E402

DEVICE = torch.device("cuda")
SM_SCALE = 1.0 / np.sqrt(192.0)


def cuda(array):
    """A NumPy array on the GPU (uint8 e4m3 bits become float8_e4m3fn)."""
    tensor = torch.from_numpy(np.ascontiguousarray(array)).to(DEVICE)
    return tensor.view(torch.float8_e4m3fn) if tensor.dtype == torch.uint8 else tensor


def cuda_bf16(bits):
    """bf16 bits (uint16 NumPy) as a torch bfloat16 tensor on the GPU."""
    return torch.from_numpy(np.ascontiguousarray(bits).view(np.int16)).to(DEVICE).view(torch.bfloat16)


def host(tensor):
    """A GPU result as NumPy: float8 as uint8 bits, bf16 as float32 values."""
    if tensor.dtype == torch.float8_e4m3fn:
        tensor = tensor.view(torch.uint8)
    if tensor.dtype == torch.bfloat16:
        tensor = tensor.float()
    return tensor.cpu().numpy()


def mla_problem(seed, num_tokens, num_heads, num_kv, topk):
    """NumPy inputs of one sparse MLA call (e4m3 bits; indices with invalid entries). The scores'
    standard deviation across keys is about 1.7, SPEC 8's flat end: with unstructured (zero-mean
    random) values and a flatter softmax, rounding P to e4m3 alone costs out about 2.5% relative L2
    (2.47e-2 at a std of 0.43, simulated), SPEC 6's whole budget."""
    rng = np.random.default_rng(seed)
    return dict(q=ref.random_e4m3(rng, (num_tokens, num_heads, 576), scale=1.0),
                kv=ref.random_e4m3(rng, (num_kv, 576), scale=1.0),
                indices=ref.random_indices(rng, num_tokens, topk, num_kv))


def mla_v32_problem(seed, num_tokens, num_heads, num_kv, topk):
    """mla_problem with bf16 q bits and DeepSeek-V3.2 rows (kv_format="deepseek_v32")."""
    rng = np.random.default_rng(seed)
    return dict(q=ref.random_bf16(rng, (num_tokens, num_heads, 576), scale=1.0),
                kv=ref.random_v32_rows(rng, num_kv, scale=1.0),
                indices=ref.random_indices(rng, num_tokens, topk, num_kv))


def indexer_problem(seed, new_tokens, cached_keys, num_heads, head_dim=128):
    """NumPy inputs of one indexer call over causal bounds."""
    rng = np.random.default_rng(seed)
    ks, ke, num_keys = fp8dsa.build_causal_bounds(new_tokens, cached_keys)
    return dict(q=ref.random_e4m3(rng, (len(ks), num_heads, head_dim)),
                k=ref.random_e4m3(rng, (num_keys, head_dim)),
                k_scale=rng.uniform(0.5, 2.0, size=num_keys).astype(np.float32),
                weights=rng.normal(size=(len(ks), num_heads)).astype(np.float32), ks=ks, ke=ke)


def indexer_args(problem):
    """An indexer_problem's arguments of fp8dsa.indexer_logits, on the GPU."""
    return (cuda(problem["q"]), (cuda(problem["k"]), cuda(problem["k_scale"])),
            cuda(problem["weights"]), cuda(problem["ks"]), cuda(problem["ke"]))


def indexer_reference(problem):
    return fp8dsa.reference.indexer_logits(problem["q"], (problem["k"], problem["k_scale"]),
                                           problem["weights"], problem["ks"], problem["ke"])


def mla_reference(problem, **kwargs):
    return fp8dsa.reference.sparse_mla_prefill(problem["q"], problem["kv"], problem["indices"],
                                               SM_SCALE, **kwargs)


def assert_attention_matches(result, expected, score_factor=1.0, out_rel_l2=2.5e-2, out_cosine=0.999):
    """SPEC 6 for sparse MLA: out within out_rel_l2 relative L2 and cosine >= out_cosine (SPEC 6:
    2.5e-2 and 0.999), lse and max_logits within score_factor times the larger of 2e-3 and 5e-4
    |max_logits| + 1e-3 (a lower bound of SPEC 6's 5e-4 max|s| + 1e-3), where finite (the V3.2 rows'
    factors are the C++ tests': tests/sparse_mla/fp8_run.cu); the no-valid-key conventions exactly."""
    out, max_logits, lse = (host(x).astype(np.float64) for x in result)
    expected_out = ref.bf16_values(expected[0])
    expected_max, expected_lse = (np.asarray(x, np.float64) for x in expected[1:])
    norm = np.linalg.norm(expected_out)
    assert np.linalg.norm(out - expected_out) <= out_rel_l2 * norm
    assert np.sum(out * expected_out) >= out_cosine * norm * np.linalg.norm(out)
    for got, want in ((max_logits, expected_max), (lse, expected_lse)):
        assert np.array_equal(np.isinf(got), np.isinf(want))
        finite = np.isfinite(want)
        limit = score_factor * np.maximum(2e-3, 5e-4 * np.abs(expected_max[finite]) + 1e-3)
        assert np.all(np.abs(got[finite] - want[finite]) <= limit), np.max(np.abs(got[finite] - want[finite]) - limit)


def assert_logits_match(logits, expected):
    """SPEC 6 for the indexer, over the cells in [ks, ke); the same -inf cells."""
    logits = host(logits).astype(np.float64)
    expected = np.asarray(expected, np.float64)
    assert np.array_equal(np.isneginf(logits), np.isneginf(expected))
    finite = np.isfinite(expected)
    x, y = logits[finite], expected[finite]
    assert 1.0 - 2.0 * np.sum(x * y) / np.sum(x * x + y * y) < 1e-5
    assert np.max(np.abs(x - y)) <= 1e-3 * np.max(np.abs(y))


def index_sets(indices):
    """Per row, the set of selected keys (the -1 slots dropped)."""
    return [set(int(i) for i in row if i >= 0) for row in np.asarray(indices)]
