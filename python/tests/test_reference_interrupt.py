"""Ctrl-C during a CPU reference: KeyboardInterrupt within a second, not when the call ends, and
the GIL free meanwhile. Each case runs in a child process that sends itself SIGINT half a second
into a reference of about ten seconds on one thread (FP8DSA_CPU_THREADS=1) or five on two."""

import os
import subprocess
import sys
import textwrap

import pytest

_CHILD = textwrap.dedent("""
    import os, signal, sys, threading, time
    import numpy as np
    import fp8dsa

    one = 0x38  # e4m3 1.0: the references take as long on any values
    def e4m3(*shape):
        return np.full(shape, one, np.uint8)

    def indexer_inputs(T, N):
        ks, ke = np.zeros(T, np.int32), np.full(T, N, np.int32)
        return e4m3(T, 64, 128), (e4m3(N, 128), np.ones(N, np.float32)), np.ones((T, 64), np.float32), ks, ke

    def attention_inputs(T, N):
        return e4m3(T, 64, 576), e4m3(N, 576)

    T, N = 512, 8192
    R = fp8dsa.reference
    calls = {
        # 512 x 8192 pairs, H = 64, D = 128: 6.9e10 operations
        "indexer_logits": lambda: R.indexer_logits(*indexer_inputs(T, N)),
        # 256 tokens x 64 heads x 2048 keys x 1088: 7.3e10
        "sparse_mla_prefill": lambda: R.sparse_mla_prefill(
            *attention_inputs(256, N),
            np.random.default_rng(0).integers(0, N, (256, 2048)).astype(np.int32), 0.05),
        # 256 x 8192 pairs, then 256 x 64 heads x 2048 keys
        "prefill": lambda: R.prefill(*indexer_inputs(256, N), *attention_inputs(256, N), 0.05),
    }
    call = calls[sys.argv[1]]

    ticks = 0
    done = False
    def tick():  # runs only while the reference leaves the GIL free
        global ticks
        while not done:
            ticks += 1
            time.sleep(0.01)
    threading.Thread(target=tick, daemon=True).start()

    sent = []
    def interrupt():
        sent.append(time.monotonic())
        os.kill(os.getpid(), signal.SIGINT)
    threading.Timer(0.5, interrupt).start()
    try:
        call()
        print("finished")
    except KeyboardInterrupt:
        print(f"interrupted {time.monotonic() - sent[0]:.3f} s after the signal, {ticks} ticks")
    done = True
""")


@pytest.mark.parametrize("threads", ["1", "2"])
@pytest.mark.parametrize("call", ["indexer_logits", "sparse_mla_prefill", "prefill"])
def test_ctrl_c_stops_a_cpu_reference_within_a_second(call, threads):
    env = dict(os.environ, FP8DSA_CPU_THREADS=threads)
    child = subprocess.run([sys.executable, "-c", _CHILD, call], env=env, capture_output=True,
                           text=True, timeout=120)
    assert child.returncode == 0, child.stderr
    words = child.stdout.split()
    assert words[:1] == ["interrupted"], child.stdout
    assert float(words[1]) < 1.0, child.stdout
    # 10 ms sleeps for the half second before the signal: the GIL was free while the reference ran.
    assert int(words[6]) >= 20, child.stdout
