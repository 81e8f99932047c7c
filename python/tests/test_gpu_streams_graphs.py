"""The current-stream rule and CUDA graph capture with torch: every call runs on the caller's
current stream (or the one it is given) and replays from a torch.cuda.CUDAGraph."""

import numpy as np

from gpu_support import (SM_SCALE, assert_attention_matches, assert_logits_match, cuda, host,
                         index_sets, indexer_problem, indexer_reference, mla_problem, mla_reference,
                         torch)

import fp8dsa
import numpy_reference as ref

SLEEP_CYCLES = 100_000_000  # ~50 ms of GPU time


def late_copies(tensors):
    """Copies of `tensors` made on the current stream behind a sleep, into zeroed memory: a call
    that ran on another (non-blocking) stream would read the zeros."""
    torch.cuda._sleep(SLEEP_CYCLES)
    copies = []
    for tensor in tensors:
        bits = tensor.view(torch.uint8) if tensor.dtype == torch.float8_e4m3fn else tensor
        late = torch.zeros_like(bits)
        late.copy_(bits)
        copies.append(late.view(tensor.dtype))
    return copies


def test_calls_run_on_the_current_stream():
    mla = mla_problem(0, num_tokens=32, num_heads=64, num_kv=400, topk=128)
    idx = indexer_problem(1, [40], [100], 32)
    mla_sources = [cuda(mla[name]) for name in ("q", "kv", "indices")]
    idx_sources = [cuda(idx[name]) for name in ("q", "k", "k_scale", "weights", "ks", "ke")]
    side = torch.cuda.Stream()
    torch.cuda.synchronize()
    with torch.cuda.stream(side):
        q, kv, indices = late_copies(mla_sources)
        attention = fp8dsa.sparse_mla_prefill(q, kv, indices, SM_SCALE)
        index_q, k, k_scale, weights, ks, ke = late_copies(idx_sources)
        logits = fp8dsa.indexer_logits(index_q, (k, k_scale), weights, ks, ke)
        selected = fp8dsa.topk(logits, ks, ke, 64)
    side.synchronize()
    assert_attention_matches(attention, mla_reference(mla))
    assert_logits_match(logits, indexer_reference(idx))
    assert index_sets(host(selected)) == index_sets(
        fp8dsa.reference.topk(host(logits), idx["ks"], idx["ke"], 64))


def test_calls_run_on_the_stream_given():
    mla = mla_problem(2, num_tokens=16, num_heads=128, num_kv=300, topk=64)
    sources = [cuda(mla[name]) for name in ("q", "kv", "indices")]
    side = torch.cuda.Stream()
    torch.cuda.synchronize()
    with torch.cuda.stream(side):
        q, kv, indices = late_copies(sources)
    # The current stream is the default one again; the call is told to run on `side`.
    result = fp8dsa.sparse_mla_prefill(q, kv, indices, SM_SCALE, stream=side)
    side.synchronize()
    assert_attention_matches(result, mla_reference(mla))


def copy_into(static, array):
    tensor = cuda(array)
    if tensor.dtype == torch.float8_e4m3fn:
        static.view(torch.uint8).copy_(tensor.view(torch.uint8))
    else:
        static.copy_(tensor)


def capture(call):
    """`call()` captured into a CUDA graph after a warm-up run on a side stream (the library's
    first call on a device reads its properties, which capture does not allow)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        call()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        outputs = call()
    return graph, outputs


def test_sparse_mla_graph_replays_on_new_inputs():
    first = mla_problem(3, num_tokens=24, num_heads=64, num_kv=500, topk=192)
    q, kv, indices = cuda(first["q"]), cuda(first["kv"]), cuda(first["indices"])
    graph, outputs = capture(lambda: fp8dsa.sparse_mla_prefill(q, kv, indices, SM_SCALE))
    for seed in (4, 5):
        problem = mla_problem(seed, num_tokens=24, num_heads=64, num_kv=500, topk=192)
        for static, name in ((q, "q"), (kv, "kv"), (indices, "indices")):
            copy_into(static, problem[name])
        graph.replay()
        torch.cuda.synchronize()
        assert_attention_matches(outputs, mla_reference(problem))


def test_fused_topk_and_prefill_graphs_replay_on_new_inputs():
    def problem(seed):
        p = indexer_problem(seed, [20, 12], [200, 60], 64)
        rng = np.random.default_rng(seed)
        p["mla_q"] = ref.random_e4m3(rng, (32, 16, 576), scale=1.0)
        p["kv"] = ref.random_e4m3(rng, (len(p["k_scale"]), 576), scale=1.0)
        return p

    first = problem(6)
    names = ("q", "k", "k_scale", "weights", "ks", "ke", "mla_q", "kv")
    static = {name: cuda(first[name]) for name in names}

    def stages():
        logits = fp8dsa.indexer_logits(static["q"], (static["k"], static["k_scale"]),
                                       static["weights"], static["ks"], static["ke"])
        return logits, fp8dsa.topk(logits, static["ks"], static["ke"], 128)

    def whole():
        return fp8dsa.prefill(static["q"], (static["k"], static["k_scale"]), static["weights"],
                              static["ks"], static["ke"], static["mla_q"], static["kv"], SM_SCALE,
                              128)

    stages_graph, (logits, selected) = capture(stages)
    prefill_graph, attention = capture(whole)
    second = problem(7)
    for name in names:
        copy_into(static[name], second[name])
    stages_graph.replay()
    prefill_graph.replay()
    torch.cuda.synchronize()
    assert_logits_match(logits, indexer_reference(second))
    assert index_sets(host(selected)) == index_sets(
        fp8dsa.reference.topk(host(logits), second["ks"], second["ke"], 128))
    expected = fp8dsa.reference.prefill(second["q"], (second["k"], second["k_scale"]),
                                        second["weights"], second["ks"], second["ke"],
                                        second["mla_q"], second["kv"], SM_SCALE, 128)
    assert_attention_matches(attention, expected)
