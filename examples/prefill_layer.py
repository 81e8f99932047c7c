"""The DeepSeek-V3.2 prefill of one layer in torch through fp8dsa, beside FlashMLA and DeepGEMM
where they are installed.

One sequence of --tokens new tokens over --cached cached keys: the FP8 indexer scores every
(token, key) pair, top-k keeps 2048 keys per token and maps them through a page table onto a paged
latent KV cache (pages of 64 rows in a shuffled order), and sparse MLA attends over those rows.
Each stage is timed with CUDA events (median of --iters runs) beside its anchor on the same
inputs: DeepGEMM's fp8_mqa_logits for the indexer, torch.topk (plus the same page mapping in
torch) for the top-k, FlashMLA's flash_mla_sparse_fwd on the dequantised (exact) bf16 q / kv for
sparse MLA. A few tokens are also checked against fp8dsa's CPU reference.

    python examples/prefill_layer.py [--tokens 4096] [--cached 28672] [--iters 10]

Needs a Hopper GPU, torch and fp8dsa; flash_mla and deep_gemm are optional. FlashMLA's SM90 sparse
prefill comes from the PyPI package sgl-flash-mla (`pip install sgl-flash-mla`, which keeps the SM90
kernels upstream FlashMLA dropped; it needs use_legacy=True there), DeepGEMM's from sgl-deep-gemm.
"""

import argparse
import statistics
import sys

try:
    import torch
except ImportError:
    sys.exit("examples/prefill_layer.py needs torch (pip install torch) and a Hopper GPU; "
             "fp8dsa's own tests and the fp8dsa command run without it")

import fp8dsa

INDEXER_HEADS, INDEXER_DIM = 64, 128
MLA_HEADS, D_QK, D_V = 128, 576, 512
TOPK, PAGE_SIZE = 2048, 64
SM_SCALE = 1.0 / (192 ** 0.5)


def time_ms(call, iters):
    """Median time of `call()` over `iters` runs after one warm-up, by CUDA events."""
    call()
    times = []
    for _ in range(iters):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        call()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def random_e4m3(shape, scale, generator):
    values = torch.randn(shape, device="cuda", generator=generator) * scale
    return values.to(torch.float8_e4m3fn)


def make_layer(num_tokens, num_cached, generator):
    """The inputs of one layer's prefill: indexer q / k / weights, the causal bounds, the MLA
    queries, the paged latent cache and its page table."""
    ks, ke, num_keys = fp8dsa.build_causal_bounds([num_tokens], [num_cached])
    num_pages = -(-num_keys // PAGE_SIZE)
    layer = dict(
        index_q=random_e4m3((num_tokens, INDEXER_HEADS, INDEXER_DIM), 1.0, generator),
        index_k=random_e4m3((num_keys, INDEXER_DIM), 1.0, generator),
        index_k_scale=torch.rand(num_keys, device="cuda", generator=generator) + 0.5,
        weights=torch.randn(num_tokens, INDEXER_HEADS, device="cuda", generator=generator) * 0.1,
        ks=torch.from_numpy(ks).cuda(), ke=torch.from_numpy(ke).cuda(),
        q=random_e4m3((num_tokens, MLA_HEADS, D_QK), 0.5, generator),
        # Logical page p of the sequence lives in physical page page_table[0, p].
        page_table=torch.randperm(num_pages, device="cuda", generator=generator).to(torch.int32)[None],
        kv_cache=random_e4m3((num_pages * PAGE_SIZE, D_QK), 0.5, generator),
        row_seq=torch.zeros(num_tokens, dtype=torch.int32, device="cuda"),
    )
    return layer, num_keys


def fp8dsa_stages(layer):
    logits = fp8dsa.indexer_logits(layer["index_q"], (layer["index_k"], layer["index_k_scale"]),
                                   layer["weights"], layer["ks"], layer["ke"])
    indices = fp8dsa.topk(logits, layer["ks"], layer["ke"], TOPK, page_table=layer["page_table"],
                          page_size=PAGE_SIZE, row_seq=layer["row_seq"])
    out, _, lse = fp8dsa.sparse_mla_prefill(layer["q"], layer["kv_cache"], indices, SM_SCALE)
    return logits, indices, out, lse


def torch_topk(logits, layer):
    """The anchor for top-k: torch.topk over the masked logits, then the page mapping."""
    values, positions = torch.topk(logits, TOPK, dim=1)
    pages = layer["page_table"][0][positions // PAGE_SIZE]
    physical = pages * PAGE_SIZE + positions % PAGE_SIZE
    # Cells outside [ks, ke) hold -inf: a row with fewer keys than TOPK pads with -1.
    return torch.where(values.isneginf(), -1, physical).int()


def report(name, ours_ms, anchor_name, anchor_ms, difference):
    """One table row; ratio = anchor ms / fp8dsa ms (above 1: fp8dsa is faster)."""
    ratio = f"{anchor_ms / ours_ms:5.2f}x" if anchor_ms else "     -"
    anchor = f"{anchor_ms:9.3f}" if anchor_ms else "        -"
    print(f"{name:<11} {ours_ms:9.3f} {anchor:>9} {ratio}  {anchor_name:<34} {difference}")


def relative_l2(x, y):
    return (torch.linalg.vector_norm((x - y).double()) / torch.linalg.vector_norm(y.double())).item()


def check_sample_against_reference(layer, indices, out, lse, num_samples=4):
    """A few tokens through fp8dsa.reference.sparse_mla_prefill (f64 on the CPU)."""
    tokens = torch.linspace(0, layer["q"].shape[0] - 1, num_samples).long()
    expected = fp8dsa.reference.sparse_mla_prefill(
        layer["q"][tokens].view(torch.uint8).cpu().numpy(),
        layer["kv_cache"].view(torch.uint8).cpu().numpy(), indices[tokens].cpu().numpy(), SM_SCALE)
    expected_out = torch.from_numpy(fp8dsa.bf16_to_float(expected[0]))
    out_error = relative_l2(out[tokens].float().cpu(), expected_out)
    lse_error = (lse[tokens].cpu() - torch.from_numpy(expected[2])).abs().max().item()
    print(f"CPU reference, {num_samples} tokens: out relative L2 {out_error:.2e}, "
          f"lse max |diff| {lse_error:.2e}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokens", type=int, default=4096)
    parser.add_argument("--cached", type=int, default=28672)
    parser.add_argument("--iters", type=int, default=10)
    args = parser.parse_args()

    generator = torch.Generator(device="cuda").manual_seed(0)
    layer, num_keys = make_layer(args.tokens, args.cached, generator)
    print(f"{torch.cuda.get_device_name()}: T = {args.tokens} new tokens over {args.cached} cached "
          f"(N = {num_keys}), indexer H = {INDEXER_HEADS}, MLA h = {MLA_HEADS}, top-{TOPK}, "
          f"pages of {PAGE_SIZE}")
    logits, indices, out, lse = fp8dsa_stages(layer)
    torch.cuda.synchronize()
    check_sample_against_reference(layer, indices, out, lse)

    print(f"\n{'stage':<11} {'fp8dsa ms':>9} {'anchor ms':>9} {'ratio':>6}  {'anchor':<34} difference")
    index_kv = (layer["index_k"], layer["index_k_scale"])
    index_args = (layer["index_q"], index_kv, layer["weights"], layer["ks"], layer["ke"])
    indexer_ms = time_ms(lambda: fp8dsa.indexer_logits(*index_args), args.iters)
    try:
        import deep_gemm

        anchor_logits = deep_gemm.fp8_mqa_logits(*index_args)
        valid = ~logits.isneginf()
        difference = f"logits relative L2 {relative_l2(logits[valid], anchor_logits[valid]):.2e}"
        report("indexer", indexer_ms, "DeepGEMM fp8_mqa_logits", time_ms(
            lambda: deep_gemm.fp8_mqa_logits(*index_args), args.iters), difference)
    except ImportError:
        report("indexer", indexer_ms, "(deep_gemm not installed: pip install sgl-deep-gemm)", None, "")

    topk_args = dict(page_table=layer["page_table"], page_size=PAGE_SIZE, row_seq=layer["row_seq"])
    topk_ms = time_ms(lambda: fp8dsa.topk(logits, layer["ks"], layer["ke"], TOPK, **topk_args),
                      args.iters)
    anchor_indices = torch_topk(logits, layer)
    same = (torch.sort(indices, dim=1).values == torch.sort(anchor_indices, dim=1).values)
    report("top-k", topk_ms, "torch.topk + page mapping",
           time_ms(lambda: torch_topk(logits, layer), args.iters),
           f"rows with the same set {same.all(dim=1).float().mean().item():.4f}")

    mla_ms = time_ms(lambda: fp8dsa.sparse_mla_prefill(layer["q"], layer["kv_cache"], indices,
                                                       SM_SCALE), args.iters)
    try:
        import flash_mla

        q_bf16 = layer["q"].to(torch.bfloat16)  # e4m3 -> bf16 is exact: the same values
        kv_bf16 = layer["kv_cache"].to(torch.bfloat16)[:, None, :]
        mla_args = (q_bf16, kv_bf16, indices[:, None, :], SM_SCALE, D_V)
        # sgl-flash-mla keeps the SM90 sparse prefill behind use_legacy=True; upstream FlashMLA
        # builds without that argument have it as the default path.
        try:
            flash_mla.flash_mla_sparse_fwd(*mla_args, use_legacy=True)
            mla_kwargs = {"use_legacy": True}
        except TypeError:
            mla_kwargs = {}
        anchor_out, _, anchor_lse = flash_mla.flash_mla_sparse_fwd(*mla_args, **mla_kwargs)
        difference = (f"out relative L2 {relative_l2(out.float(), anchor_out.float()):.2e}, "
                      f"lse max |diff| {(lse - anchor_lse).abs().max().item():.2e}")
        report("sparse MLA", mla_ms, "FlashMLA flash_mla_sparse_fwd (bf16)",
               time_ms(lambda: flash_mla.flash_mla_sparse_fwd(*mla_args, **mla_kwargs), args.iters),
               difference)
    except ImportError:
        report("sparse MLA", mla_ms, "(flash_mla not installed: pip install sgl-flash-mla)", None, "")

    print(f"{'all three':<11} {time_ms(lambda: fp8dsa_stages(layer), args.iters):9.3f}")


if __name__ == "__main__":
    main()
