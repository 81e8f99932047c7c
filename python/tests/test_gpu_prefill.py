"""fp8dsa.prefill on torch CUDA tensors: against the stages run one by one and the CPU reference."""

import numpy as np
import pytest

from gpu_support import (SM_SCALE, assert_attention_matches, cuda, indexer_args, indexer_problem,
                         torch)

import fp8dsa
import numpy_reference as ref


def prefill_problem(seed, num_heads=64, topk=128):
    """Two sequences with cached prefixes (most tokens see more keys than topk)."""
    problem = indexer_problem(seed, [24, 16], [300, 150], num_heads=32)
    rng = np.random.default_rng(seed + 1)
    num_tokens, num_keys = len(problem["ks"]), len(problem["k_scale"])
    problem["mla_q"] = ref.random_e4m3(rng, (num_tokens, num_heads, 576), scale=1.0)
    problem["kv"] = ref.random_e4m3(rng, (num_keys, 576), scale=1.0)
    problem["sink"] = rng.normal(size=num_heads).astype(np.float32)
    problem["topk"] = topk
    return problem


def gpu_args(problem):
    return (*indexer_args(problem), cuda(problem["mla_q"]), cuda(problem["kv"]), SM_SCALE,
            problem["topk"], 512, cuda(problem["sink"]))


def test_prefill_equals_stages_one_by_one_and_matches_reference():
    problem = prefill_problem(0)
    (index_q, index_kv, weights, ks, ke, q, kv, sm_scale, topk, d_v, sink) = gpu_args(problem)
    out, max_logits, lse = fp8dsa.prefill(index_q, index_kv, weights, ks, ke, q, kv, sm_scale,
                                          topk, d_v, sink)
    assert out.shape == (40, 64, 512) and out.dtype == torch.bfloat16

    logits = fp8dsa.indexer_logits(index_q, index_kv, weights, ks, ke, fill_masked=False)
    indices = fp8dsa.topk(logits, ks, ke, topk)
    staged = fp8dsa.sparse_mla_prefill(q, kv, indices, sm_scale, d_v, sink)
    assert torch.equal(out.view(torch.int16), staged[0].view(torch.int16))
    assert torch.equal(lse, staged[2]) and torch.equal(max_logits, staged[1])

    expected = fp8dsa.reference.prefill(problem["q"], (problem["k"], problem["k_scale"]),
                                        problem["weights"], problem["ks"], problem["ke"],
                                        problem["mla_q"], problem["kv"], SM_SCALE, topk, 512,
                                        problem["sink"])
    assert_attention_matches((out, max_logits, lse), expected)


def test_prefill_kernels_and_given_outputs():
    problem = prefill_problem(1, num_heads=16, topk=64)
    args = gpu_args(problem)
    out = torch.empty(40, 16, 512, dtype=torch.bfloat16, device=args[0].device)
    # Only the attention kernel differs: the reference indexer's logits may order keys whose scores
    # tie to f32 rounding differently, and a top-k swap at the boundary changes a row's lse by far
    # more than SPEC 6's attention tolerance.
    result = fp8dsa.prefill(*args, out=out, attention_kernel="reference")
    assert result[0] is out
    default = fp8dsa.prefill(*args)
    assert_attention_matches(default, tuple(host_copy(x) for x in result))


def host_copy(tensor):
    """A result as the references return it: bf16 as uint16 bits."""
    if tensor.dtype == torch.bfloat16:
        return tensor.view(torch.int16).cpu().numpy().view(np.uint16)
    return tensor.cpu().numpy()


def test_fused_selects_the_same_rows():
    args = gpu_args(prefill_problem(2))
    unfused = fp8dsa.prefill(*args)
    fused = fp8dsa.prefill(*args, fused=True)
    # The same rows in another order: max_logits exactly, lse to f32 rounding, out within SPEC 6
    # (the e4m3 rounding of P depends on which keys share a tile).
    assert torch.equal(unfused[1], fused[1])
    assert torch.max(torch.abs(unfused[2] - fused[2])).item() < 1e-4
    a, b = unfused[0].float(), fused[0].float()
    assert (torch.linalg.norm(a - b) / torch.linalg.norm(a)).item() < 2.5e-2
    with pytest.raises(ValueError, match=r"prefill: indexer_kernel is k_resident; fused = True runs the "
                                         r"Q-resident scorer \('auto' or 'q_resident'\)"):
        fp8dsa.prefill(*args, fused=True, indexer_kernel="k_resident")


def test_prefill_rejections():
    args = list(gpu_args(prefill_problem(3)))
    with pytest.raises(ValueError, match=r"prefill: topk \(2049\) must be a multiple of 64"):
        fp8dsa.prefill(*args[:8], 2049)
    with pytest.raises(ValueError, match=r"kv has \d+ elements in dimension 0, index_k's N needs \d+"):
        fp8dsa.prefill(*args[:6], args[6][:-1], *args[7:])
