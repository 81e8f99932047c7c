"""torch CPU tensors through the references (DLPack from torch without a GPU): float8 and bf16
dtypes, outputs allocated as torch tensors, single-row strides, tensors that require grad."""

import numpy as np
import pytest

import fp8dsa
import numpy_reference as ref

torch = pytest.importorskip("torch")


def test_sparse_mla_reference_on_torch_tensors():
    rng = np.random.default_rng(0)
    q = ref.random_e4m3(rng, (3, 16, 576), scale=0.5)
    kv = ref.random_e4m3(rng, (150, 576), scale=0.5)
    indices = ref.random_indices(rng, 3, 128, 150)
    sink = torch.zeros(16, requires_grad=True)
    e4m3 = torch.float8_e4m3fn
    out, max_logits, lse = fp8dsa.reference.sparse_mla_prefill(
        torch.from_numpy(q).view(e4m3), torch.from_numpy(kv).view(e4m3)[:, None],
        torch.from_numpy(indices)[:, None], 0.1, attn_sink=sink)
    assert isinstance(out, torch.Tensor) and out.dtype == torch.bfloat16 and lse.dtype == torch.float32
    expected = ref.sparse_mla(q, kv, indices, 0.1, attn_sink=np.zeros(16, np.float32))
    np.testing.assert_allclose(out.float().numpy(), expected[0], rtol=1e-2,
                               atol=1e-2 * np.abs(expected[0]).max())
    np.testing.assert_allclose(lse.numpy(), expected[2], rtol=1e-6)
    with pytest.raises(ValueError, match="sparse_mla_prefill: q must be on a CUDA device"):
        fp8dsa.sparse_mla_prefill(torch.from_numpy(q), torch.from_numpy(kv), torch.from_numpy(indices), 0.1)


def test_indexer_reference_single_row():
    """One token over 6 keys: torch reports stride 1 for the single row of the padded buffer."""
    rng = np.random.default_rng(1)
    q = ref.random_e4m3(rng, (1, 4, 64))
    k = ref.random_e4m3(rng, (6, 64))
    ks, ke = np.zeros(1, np.int32), np.full(1, 6, np.int32)
    logits = fp8dsa.reference.indexer_logits(torch.from_numpy(q).view(torch.float8_e4m3fn),
                                             (torch.from_numpy(k), torch.ones(6)), torch.ones(1, 4),
                                             torch.from_numpy(ks), torch.from_numpy(ke))
    assert isinstance(logits, torch.Tensor) and logits.shape == (1, 6)
    expected = ref.indexer_logits(q, k, np.ones(6), np.ones((1, 4)), ks, ke)
    np.testing.assert_allclose(logits.numpy(), expected, rtol=1e-5)
