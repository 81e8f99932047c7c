"""build_causal_bounds under a memory limit: MemoryError naming the call and the size, not a bare
std::bad_alloc (run in a child process whose address space is capped)."""
import subprocess
import sys
import textwrap

import pytest

resource = pytest.importorskip("resource")


def test_allocation_failure_names_the_call():
    child = textwrap.dedent("""
        import resource
        import fp8dsa
        resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))
        try:
            fp8dsa.build_causal_bounds([2**31 - 1], [0])
        except MemoryError as e:
            print("MemoryError:", e)
        else:
            print("no error")
    """)
    result = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=120)
    assert "MemoryError: build_causal_bounds: cannot allocate ks and ke for 2147483647 tokens" in result.stdout, (
        result.stdout + result.stderr)
