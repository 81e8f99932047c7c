"""Bad arguments raise Python exceptions with the library's message, on every function: the
references run the library's own checks on host arrays, and every GPU call refuses host arrays
before touching a device (so these run without a GPU)."""

import numpy as np
import pytest

import fp8dsa
import numpy_reference as ref

SM_SCALE = 0.1


@pytest.fixture
def mla():
    rng = np.random.default_rng(0)
    return dict(q=ref.random_e4m3(rng, (4, 16, 576)), kv=ref.random_e4m3(rng, (200, 576)),
                indices=ref.random_indices(rng, 4, 64, 200))


@pytest.fixture
def indexer():
    rng = np.random.default_rng(1)
    ks, ke, num_keys = fp8dsa.build_causal_bounds([4], [28])
    return dict(q=ref.random_e4m3(rng, (4, 8, 128)),
                kv=(ref.random_e4m3(rng, (num_keys, 128)), np.ones(num_keys, np.float32)),
                weights=np.ones((4, 8), np.float32), ks=ks, ke=ke)


def misaligned(bits):
    """The same values at an address one byte past a 16-byte boundary."""
    storage = np.zeros(bits.size + 32, np.uint8)
    start = 17 - storage.ctypes.data % 16
    view = storage[start:start + bits.size].reshape(bits.shape)
    view[...] = bits
    return view


def run_mla(mla, **changes):
    args = dict(mla, sm_scale=SM_SCALE)
    args.update(changes)
    return fp8dsa.reference.sparse_mla_prefill(**args)


class TestSparseMla:
    def test_dtype(self, mla):
        with pytest.raises(TypeError, match="q dtype must be float8_e4m3fn or uint8 or bfloat16 "
                                            r"\(given float16\)"):
            run_mla(mla, q=mla["q"].astype(np.float16))
        with pytest.raises(TypeError, match="indices dtype must be int32 \\(given int64\\)"):
            run_mla(mla, indices=mla["indices"].astype(np.int64))
        with pytest.raises(TypeError, match="out dtype must be bfloat16 or uint16"):
            run_mla(mla, out=np.zeros((4, 16, 512), np.float32))
        with pytest.raises(TypeError, match="q must be an array"):
            run_mla(mla, q=mla["q"].tolist())

    def test_bf16_inputs_are_a_later_stage(self, mla):
        ml_dtypes = pytest.importorskip("ml_dtypes")
        q = np.zeros((4, 16, 576), ml_dtypes.bfloat16)
        with pytest.raises(NotImplementedError,
                           match="q dtype bf16: the BF16/dequant path is a later stage"):
            run_mla(mla, q=q)

    def test_shapes(self, mla):
        with pytest.raises(ValueError, match=r"q must be \[T, h, d_qk\] \(given shape \(4, 9216\)\)"):
            run_mla(mla, q=mla["q"].reshape(4, -1))
        with pytest.raises(ValueError, match="kv has 512 elements in dimension 1, q's d_qk needs 576"):
            run_mla(mla, kv=mla["kv"][:, :512])
        with pytest.raises(ValueError,
                           match="kv has 2 elements in dimension 1, one latent KV head needs 1"):
            run_mla(mla, kv=np.zeros((200, 2, 576), np.uint8))
        with pytest.raises(ValueError, match="indices has 3 elements in dimension 0, q's T needs 4"):
            run_mla(mla, indices=mla["indices"][:3])
        with pytest.raises(ValueError, match="lse has 8 elements in dimension 1, q's h needs 16"):
            run_mla(mla, lse=np.zeros((4, 8), np.float32))
        with pytest.raises(ValueError, match=r"out has 256 elements in dimension 2, d_v needs 512"):
            run_mla(mla, out=np.zeros((4, 16, 256), np.uint16))
        with pytest.raises(ValueError, match="out has 1024 elements in dimension 2, d_v needs 512"):
            run_mla(mla, out=np.zeros((4, 16, 1024), np.uint16))
        with pytest.raises(ValueError, match="attn_sink has 15 elements in dimension 0, q's h needs 16"):
            run_mla(mla, attn_sink=np.zeros(15, np.float32))

    def test_library_values(self, mla):
        with pytest.raises(ValueError, match=r"sparse_mla: topk \(100\) must be a multiple of 64"):
            run_mla(mla, indices=np.zeros((4, 100), np.int32))
        with pytest.raises(ValueError,
                           match=r"sparse_mla: q's h \(12\) must be one of \{8, 16, 32, 64, 128\}"):
            run_mla(mla, q=np.zeros((4, 12, 576), np.uint8))
        with pytest.raises(ValueError, match=r"sparse_mla: d_v \(256\) must be one of \{512\}"):
            run_mla(mla, d_v=256)
        with pytest.raises(ValueError, match=r"sparse_mla: d_v \(1099511627776\) must be one of \{512\}"):
            run_mla(mla, d_v=2**40)  # refused before the outputs are allocated
        with pytest.raises(TypeError, match=r"sm_scale must be a real number \(given None\)"):
            run_mla(mla, sm_scale=None)
        with pytest.raises(ValueError, match=r"q has 512 elements in dimension 2, d_qk must be 576"):
            run_mla(mla, q=np.zeros((4, 16, 512), np.uint8))
        with pytest.raises(ValueError, match=r"sparse_mla: sm_scale \(-1\) must be finite and > 0"):
            run_mla(mla, sm_scale=-1.0)
        with pytest.raises(ValueError, match=r"sparse_mla: q_scale \* kv_scale \* sm_scale \(1e\+20 \* 1 \* 1e\+20"):
            run_mla(mla, sm_scale=1e20, q_scale=1e20)

    def test_strides_and_alignment(self, mla):
        with pytest.raises(ValueError, match=r"sparse_mla: q \(0x[0-9a-f]+\) must be 16-byte aligned"):
            run_mla(mla, q=misaligned(mla["q"]))
        with pytest.raises(ValueError, match=r"sparse_mla: kv's stride in dimension 0 \(580\) must be a multiple of 16"):
            run_mla(mla, kv=np.zeros((200, 580), np.uint8)[:, :576])
        with pytest.raises(ValueError, match="q must be contiguous in its innermost dimension"):
            run_mla(mla, q=np.zeros((4, 16, 1152), np.uint8)[:, :, ::2])
        with pytest.raises(ValueError, match="lse must be contiguous"):
            run_mla(mla, lse=np.zeros((16, 4), np.float32).T)
        with pytest.raises(ValueError, match="kv has stride 0 in dimension 0"):
            run_mla(mla, kv=np.broadcast_to(mla["kv"][:1], (200, 576)))

    def test_gpu_call_refuses_host_arrays(self, mla):
        with pytest.raises(ValueError,
                           match=r"sparse_mla_prefill: q must be on a CUDA device \(given host memory"):
            fp8dsa.sparse_mla_prefill(mla["q"], mla["kv"], mla["indices"], SM_SCALE)


class TestIndexer:
    def test_dtype_and_shapes(self, indexer):
        args = dict(indexer)
        with pytest.raises(TypeError, match=r"weights dtype must be float32 \(given float64\)"):
            fp8dsa.reference.indexer_logits(**dict(args, weights=args["weights"].astype(np.float64)))
        with pytest.raises(TypeError, match=r"kv must be a tuple \(k \[N, D\], k_scale \[N\]\)"):
            fp8dsa.reference.indexer_logits(**dict(args, kv=args["kv"][0]))
        with pytest.raises(ValueError, match="k_scale has 31 elements in dimension 0, k's N needs 32"):
            fp8dsa.reference.indexer_logits(**dict(args, kv=(args["kv"][0], np.ones(31, np.float32))))
        with pytest.raises(ValueError, match="logits has 16 columns, fewer than k's N"):
            fp8dsa.reference.indexer_logits(**args, logits=np.zeros((4, 16), np.float32))
        with pytest.raises(ValueError, match="q must have packed heads"):
            wide = np.zeros((4, 8, 256), np.uint8)
            fp8dsa.reference.indexer_logits(**dict(args, q=wide[:, :, :128]))

    def test_library_values(self, indexer):
        args = dict(indexer)
        with pytest.raises(ValueError,
                           match=r"indexer: q's H \(3\) must be one of \{4, 8, 16, 32, 64\}"):
            fp8dsa.reference.indexer_logits(**dict(args, q=np.zeros((4, 3, 128), np.uint8),
                                                   weights=np.ones((4, 3), np.float32)))
        with pytest.raises(ValueError, match=r"logits rows must start 16 bytes apart .*given 33\): pass a \[T, N\] view of rows of 36"):
            fp8dsa.reference.indexer_logits(**args, logits=np.zeros((4, 33), np.float32))

    def test_gpu_call_refuses_host_arrays(self, indexer):
        with pytest.raises(ValueError, match="indexer_logits: q must be on a CUDA device"):
            fp8dsa.indexer_logits(**indexer)


class TestTopk:
    def test_bad_k(self):
        logits = np.zeros((2, 10), np.float32)
        ks = np.zeros(2, np.int32)
        ke = np.full(2, 10, np.int32)
        for k in (0, 2049, -3):
            with pytest.raises(ValueError, match=rf"topk: k \({k}\) must be in \[1, 2048\]"):
                fp8dsa.reference.topk(logits, ks, ke, k)
        with pytest.raises(ValueError, match=r"topk: k \(1099511627776\) must be in \[1, 2048\]"):
            fp8dsa.reference.topk(logits, ks, ke, 2**40)  # refused before `out` is allocated
        with pytest.raises(ValueError, match="topk: row_seq is given but page_table is null"):
            fp8dsa.reference.topk(logits, ks, ke, 4, row_seq=np.zeros(2, np.int32))
        with pytest.raises(ValueError, match=r"topk: page_size \(0\) must be in"):
            fp8dsa.reference.topk(logits, ks, ke, 4, page_table=np.zeros((2, 4), np.int32))
        with pytest.raises(ValueError, match="ke has 3 elements in dimension 0, logits' T needs 2"):
            fp8dsa.reference.topk(logits, ks, np.zeros(3, np.int32), 4)
        with pytest.raises(ValueError, match="out has 8 elements in dimension 1, k needs 4"):
            fp8dsa.reference.topk(logits, ks, ke, 4, out=np.zeros((2, 8), np.int32))
        with pytest.raises(TypeError, match="logits dtype must be float32"):
            fp8dsa.reference.topk(logits.astype(np.float64), ks, ke, 4)

    def test_gpu_call_refuses_host_arrays(self):
        with pytest.raises(ValueError, match="topk: logits must be on a CUDA device"):
            fp8dsa.topk(np.zeros((2, 10), np.float32), np.zeros(2, np.int32), np.zeros(2, np.int32), 4)


class TestPrefill:
    def test_errors(self, mla, indexer):
        ks, ke, num_keys = fp8dsa.build_causal_bounds([4], [196])
        index_kv = (np.zeros((200, 128), np.uint8), np.ones(200, np.float32))
        args = dict(index_q=indexer["q"], index_kv=index_kv, weights=indexer["weights"], ks=ks,
                    ke=ke, q=mla["q"], kv=mla["kv"], sm_scale=SM_SCALE)
        with pytest.raises(ValueError, match=r"prefill: topk \(100\) must be a multiple of 64"):
            fp8dsa.reference.prefill(**args, topk=100)
        with pytest.raises(TypeError, match=r"index_kv\[1\] \(k_scale\) dtype must be float32"):
            fp8dsa.reference.prefill(**dict(args, index_kv=(args["index_kv"][0], np.ones(200))))
        with pytest.raises(ValueError,
                           match="index_k has 64 elements in dimension 1, index_q's D needs 128"):
            fp8dsa.reference.prefill(**dict(args, index_kv=(np.zeros((200, 64), np.uint8),
                                                            np.ones(200, np.float32))))
        with pytest.raises(ValueError, match="prefill: index_q must be on a CUDA device"):
            fp8dsa.prefill(**args, topk=64, fused=True)

    def test_workspace_queries_reject_what_validate_rejects(self):
        # The size queries the GPU calls size their workspace with: an invalid topk or size raises
        # the library's message instead of returning a size.
        with pytest.raises(ValueError, match=r"prefill: topk \(-64\) must be in \[64, 2048\]"):
            fp8dsa._fp8dsa.prefill_workspace_bytes(4, 200, -64, False)
        with pytest.raises(ValueError, match=r"prefill: indexer: num_keys \(-1\) must be in"):
            fp8dsa._fp8dsa.prefill_workspace_bytes(4, -1, 64, False)
        with pytest.raises(ValueError, match=r"topk: k \(0\) must be in \[1, 2048\]"):
            fp8dsa._fp8dsa.topk_workspace_bytes(4, 200, 0)
        assert fp8dsa._fp8dsa.prefill_workspace_bytes(4, 200, 64, False) > 0
        with pytest.raises(ValueError, match=r"prefill: selection_chunk_tokens \(-1\) must be >= 0"):
            fp8dsa._fp8dsa.prefill_workspace_bytes(4, 200, 64, False, -1)

    def test_chunked_selection_needs_one_chunks_logits(self):
        # The unfused path in chunks of tokens holds one chunk's [chunk, N] logits instead of T's.
        whole = fp8dsa._fp8dsa.prefill_workspace_bytes(4096, 32768, 2048, False)
        chunk = fp8dsa._fp8dsa.MIN_SELECTION_CHUNK_TOKENS
        part = fp8dsa._fp8dsa.prefill_workspace_bytes(4096, 32768, 2048, False, chunk)
        assert whole - part >= (4096 - chunk) * 32768 * 4
        assert fp8dsa._fp8dsa.prefill_workspace_bytes(4096, 32768, 2048, False, 4096) == whole


class TestScalarsAndSizes:
    """Scalars are checked by type and range before anything is sized from them, NumPy integers
    count as integers, and an impossible size is refused before it is allocated."""

    def test_topk_scalars(self):
        logits = np.arange(20, dtype=np.float32).reshape(2, 10)
        ks, ke = np.zeros(2, np.int32), np.full(2, 10, np.int32)
        got = fp8dsa.reference.topk(logits, ks, ke, np.int64(4), np.bool_(True))
        assert got.tolist() == [[9, 8, 7, 6], [9, 8, 7, 6]]
        with pytest.raises(TypeError, match=r"topk: k must be an integer \(given 4.0\)"):
            fp8dsa.reference.topk(logits, ks, ke, 4.0)
        with pytest.raises(TypeError, match="reference.topk: sorted must be a bool"):
            fp8dsa.reference.topk(logits, ks, ke, 4, "no")
        with pytest.raises(ValueError, match=r"reference.topk: page_size \(2147483648\) must be in"):
            fp8dsa.reference.topk(logits, ks, ke, 4, page_size=2**31)
        with pytest.raises(TypeError, match="logits must be in the machine's byte order"):
            fp8dsa.reference.topk(logits.astype(">f4"), ks, ke, 4)

    def test_page_table_without_rows(self):
        # num_seqs = 0 means "not bounded" to the library: a [0, P] table is refused, not read.
        logits = np.zeros((1, 4), np.float32)
        for row_seq in (None, np.array([10**9], np.int32)):
            with pytest.raises(ValueError, match=r"reference.topk: page_table has no rows"):
                fp8dsa.reference.topk(logits, np.zeros(1, np.int32), np.full(1, 4, np.int32), 2,
                                      page_table=np.zeros((0, 4), np.int32), page_size=2,
                                      row_seq=row_seq)
        empty = fp8dsa.reference.topk(np.zeros((0, 4), np.float32), np.zeros(0, np.int32),
                                      np.zeros(0, np.int32), 2, page_table=np.zeros((0, 4), np.int32),
                                      page_size=2)
        assert empty.shape == (0, 2)

    def test_sizes_refused_before_allocation(self, indexer):
        rows = np.broadcast_to(np.zeros((1, 10), np.float32), (2**31 + 5, 10))
        bounds = np.broadcast_to(np.zeros(1, np.int32), (2**31 + 5,))
        # Every argument is checked before out ([T, k]) is allocated: the broadcast first.
        with pytest.raises(ValueError, match=r"reference.topk: logits has stride 0 in dimension 0"):
            fp8dsa.reference.topk(rows, bounds, bounds, 4)
        # A GPU call checks the placement first (2**30 rows x k = 2048 would be 8 GiB).
        with pytest.raises(ValueError, match="topk: logits must be on a CUDA device"):
            fp8dsa.topk(rows[:2**30], bounds[:2**30], bounds[:2**30], 2048)
        with pytest.raises(ValueError, match=r"topk: k \(17179869184\) must be in \[1, 2048\]"):
            fp8dsa.fused_topk(**indexer, k=2**34)
        with pytest.raises(ValueError, match=r"sequences\[0\]\.new_tokens \(2147483648\) must be in"):
            fp8dsa.build_causal_bounds([2**31], [0])
        with pytest.raises(ValueError, match=r"sequences\[0\]\.cached_keys \(2147483648\) must be in"):
            fp8dsa.build_causal_bounds([2**30], [2**31])
        with pytest.raises(ValueError, match=r"sequences\[0\]\.cached_keys \(9223372036854775808\)"):
            fp8dsa.build_causal_bounds([1], [2**63])

    def test_names_in_messages(self, indexer):
        with pytest.raises(TypeError, match=r"kv must be a tuple .*, given tuple of 3"):
            fp8dsa.reference.indexer_logits(**dict(indexer, kv=indexer["kv"] + (1,)))
        with pytest.raises(TypeError, match="reference.indexer_logits: fill_masked must be a bool"):
            fp8dsa.reference.indexer_logits(**indexer, fill_masked="no")
        out_parts = np.zeros((2, 3, 16, 512), np.uint16)
        lse_parts = np.zeros((2, 3, 16), np.float32)
        with pytest.raises(TypeError, match="max_logits must be an array"):
            fp8dsa.reference.lse_merge(out_parts, lse_parts, max_logits="junk")
        with pytest.raises(TypeError, match=r"prefill: topk must be an integer \(given 64.0\)"):
            fp8dsa.reference.prefill(*[None] * 7, SM_SCALE, topk=64.0)
        # Past int32 here (the extension could not take it), the rest in the library's words.
        with pytest.raises(ValueError, match=r"prefill: topk \(2147483648\) must be in \[64, 2048\]"):
            fp8dsa.reference.prefill(*[None] * 7, SM_SCALE, topk=2**31)

    def test_outputs_and_conversions(self, indexer):
        logits = np.zeros((2, 10), np.float32)
        ks, ke = np.zeros(2, np.int32), np.full(2, 10, np.int32)
        with pytest.raises(ValueError, match="reference.topk: out must be writable"):
            fp8dsa.reference.topk(logits, ks, ke, 4, out=np.broadcast_to(np.zeros((1, 4), np.int32), (2, 4)))
        wide = dict(indexer, q=np.broadcast_to(indexer["q"][:1], (2**31, 8, 128)))
        with pytest.raises(ValueError, match=r"reference.indexer_logits: q has stride 0 in dimension 0"):
            fp8dsa.reference.indexer_logits(**dict(wide, weights=np.broadcast_to(indexer["weights"][:1], (2**31, 8))))
        # page_size without a table would transform nothing: refused, as row_seq is.
        with pytest.raises(ValueError, match=r"topk: page_size \(-1\) is given but page_table is null"):
            fp8dsa.reference.topk(logits, ks, ke, 4, page_size=-1)
        with pytest.raises(ValueError, match=r"topk: page_size \(64\) is given but page_table is null"):
            fp8dsa.reference.topk(logits, ks, ke, 4, page_size=64)

    def test_kernel_names_and_streams(self, mla):
        with pytest.raises(TypeError, match=r"sparse_mla_prefill: kernel must be a string \(given 3\)"):
            fp8dsa.sparse_mla_prefill(mla["q"], mla["kv"], mla["indices"], SM_SCALE, kernel=3)
        with pytest.raises(TypeError, match="prefill: fused must be a bool"):
            fp8dsa.prefill(*[None] * 7, SM_SCALE, fused="no")
        with pytest.raises(TypeError, match="prefill: split_epilogue must be a bool"):
            fp8dsa.prefill(*[None] * 7, SM_SCALE, split_epilogue="no")
        # The stream handle's own check (a GPU call reaches it after the placement checks).
        from fp8dsa import _arrays
        assert _arrays._stream_handle(np.uint64(7)) == 7
        for bad, error in ((True, TypeError), (1.5, TypeError), ("s", TypeError), (-1, ValueError),
                           (2**64, ValueError)):
            with pytest.raises(error, match="stream"):
                _arrays._stream_handle(bad)
