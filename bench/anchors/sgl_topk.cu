// sgl_topk: a measuring instrument ("anchor") that times SGLang's DeepSeek-V3.2 (DSA) top-k kernels on
// raw input files.  The kernels' device code is included unmodified from the PyPI wheel sglang==0.5.23
// (Apache-2.0); only this host driver is ours.  It launches the __global__ kernels directly with their
// params structs, so no tvm-ffi runtime is linked (tvm-ffi headers are only needed to parse the .cuh files).
//
//   fast_topk : sglang/kernels/jit/csrc/elementwise/fast_topk.cuh
//               sglang::fast_topk_detail::fast_topk_kernel<kTopK, kUsePDL=false>   (kTopK = 512 or 2048)
//   topk_v2   : sglang/kernels/jit/csrc/deepseek_v4/topk_v2.cuh
//               sglang::topk_ragged_kernel<kPDL=false>  (what TopKKernel<>::transform_ragged launches,
//               reached from dsa_topk_backend._topk_transform_v2_ragged), any 0 < k <= 2048
//
// See SGL_TOPK.md for usage and semantics.

#include <elementwise/fast_topk.cuh>
#include <deepseek_v4/topk_v2.cuh>

#include <cuda_runtime.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <sys/stat.h>
#include <vector>

#ifndef SGL_TOPK_SGLANG_VERSION
#define SGL_TOPK_SGLANG_VERSION "unknown"
#endif
#ifndef SGL_TOPK_TVM_FFI_VERSION
#define SGL_TOPK_TVM_FFI_VERSION "unknown"
#endif
#ifndef SGL_TOPK_NVCC_FLAGS
#define SGL_TOPK_NVCC_FLAGS "unknown"
#endif

namespace {

constexpr int kExitRuntime = 1;  // CUDA or I/O failure
constexpr int kExitUsage = 2;    // bad arguments or inputs that do not match them

void usage() {
  std::fprintf(stderr,
               "usage:\n"
               "  sgl_topk io --dir D --T T --N N --k K [--iters 20] [--warmup 5] [--kernels fast_topk,topk_v2]\n"
               "  sgl_topk info\n"
               "io reads D/logits.f32 [T,N] f32, D/ks.i32 [T], D/ke.i32 [T] (row t's window is [ks[t], ke[t]))\n"
               "and writes D/sgl_<kernel>_indices.i32 [T,K] int32 (absolute columns, -1 = empty).\n"
               "k: fast_topk supports 512 and 2048; topk_v2 supports 1..2048.\n");
}

[[noreturn]] void die_usage(const char* fmt, const char* arg = "") {
  std::fprintf(stderr, "error: ");
  std::fprintf(stderr, fmt, arg);
  std::fprintf(stderr, "\n");
  usage();
  std::exit(kExitUsage);
}

#define CUDA_CHECK(call)                                                                                \
  do {                                                                                                  \
    const cudaError_t err_ = (call);                                                                    \
    if (err_ != cudaSuccess) {                                                                          \
      std::fprintf(stderr, "CUDA error: %s (%s) at %s:%d: %s\n", cudaGetErrorString(err_),             \
                   cudaGetErrorName(err_), __FILE__, __LINE__, #call);                                  \
      std::exit(kExitRuntime);                                                                          \
    }                                                                                                   \
  } while (0)

// ---------------------------------------------------------------------------------------------------
// Kernels
// ---------------------------------------------------------------------------------------------------

enum class Kernel { kFastTopK, kTopKV2 };

const char* kernel_name(Kernel k) { return k == Kernel::kFastTopK ? "fast_topk" : "topk_v2"; }

bool kernel_supports_k(Kernel kern, int k) {
  if (kern == Kernel::kFastTopK) return k == 512 || k == 2048;  // SGLang's _FAST_TOPK_SUPPORTED_K
  return k > 0 && static_cast<uint32_t>(k) <= sglang::kMaxTopK;  // topk_v2: 0 < k <= 2048
}

struct DeviceInputs {
  float* logits;          // [T, stride]
  int64_t stride;         // row stride in floats (multiple of 4)
  const int32_t* ks;      // [T] row_starts (and topk_v2's out_offsets)
  const int32_t* len;     // [T] ke - ks
  int32_t* out;           // [T, K]
  int T;
  int K;
};

// fast_topk: exactly what FastTopKKernel<kTopK, kUsePDL>::run launches (grid T, 1024 threads,
// kSmemBytes of dynamic shared memory), with kUsePDL = false.
void launch_fast_topk(const DeviceInputs& in, cudaStream_t stream) {
  namespace d = sglang::fast_topk_detail;
  const d::FastTopKParams params{
      .input = in.logits,
      .row_starts = in.ks,
      .indices = in.out,
      .lengths = in.len,
      .input_stride = in.stride,
  };
  const dim3 grid(static_cast<uint32_t>(in.T));
  if (in.K == 2048) {
    d::fast_topk_kernel<2048, false><<<grid, d::kThreadsPerBlock, d::kSmemBytes, stream>>>(params);
  } else {
    d::fast_topk_kernel<512, false><<<grid, d::kThreadsPerBlock, d::kSmemBytes, stream>>>(params);
  }
}

// topk_v2: exactly what TopKKernel<kUsePDL>::transform_ragged launches (grid T, kBlockSize threads,
// no dynamic shared memory), with kUsePDL = false, row_starts = ks and out_offsets = ks (SGLang's
// production convention, so indices come out as absolute columns).
void launch_topk_v2(const DeviceInputs& in, cudaStream_t stream) {
  const sglang::TopKRaggedParams params{
      .scores = in.logits,
      .seq_lens = in.len,
      .row_starts = in.ks,
      .out_offsets = in.ks,
      .topk_indices = in.out,
      .score_stride = in.stride,
      .topk = static_cast<uint32_t>(in.K),
  };
  sglang::topk_ragged_kernel<false><<<static_cast<uint32_t>(in.T), sglang::kBlockSize, 0, stream>>>(params);
}

void launch(Kernel kern, const DeviceInputs& in, cudaStream_t stream) {
  if (kern == Kernel::kFastTopK) {
    launch_fast_topk(in, stream);
  } else {
    launch_topk_v2(in, stream);
  }
}

// ---------------------------------------------------------------------------------------------------
// Arguments and files
// ---------------------------------------------------------------------------------------------------

struct Args {
  std::string dir;
  long long T = -1, N = -1, K = -1;
  long long iters = 20, warmup = 5;
  std::vector<Kernel> kernels{Kernel::kFastTopK, Kernel::kTopKV2};
};

long long parse_int(const char* opt, const char* s, long long lo, long long hi) {
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi) {
    std::fprintf(stderr, "error: %s: bad value '%s' (want an integer in [%lld, %lld])\n", opt, s, lo, hi);
    usage();
    std::exit(kExitUsage);
  }
  return v;
}

std::vector<Kernel> parse_kernels(const std::string& list) {
  std::vector<Kernel> out;
  size_t pos = 0;
  while (true) {
    const size_t comma = list.find(',', pos);
    const std::string name = list.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    Kernel k;
    if (name == "fast_topk") {
      k = Kernel::kFastTopK;
    } else if (name == "topk_v2") {
      k = Kernel::kTopKV2;
    } else {
      die_usage("--kernels: unknown kernel '%s' (known: fast_topk, topk_v2)", name.c_str());
    }
    if (std::find(out.begin(), out.end(), k) != out.end()) die_usage("--kernels: '%s' given twice", name.c_str());
    out.push_back(k);
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return out;
}

Args parse_io_args(int argc, char** argv) {
  Args a;
  for (int i = 2; i < argc; i += 2) {
    const std::string opt = argv[i];
    if (i + 1 >= argc) die_usage("%s needs a value", argv[i]);
    const char* val = argv[i + 1];
    if (opt == "--dir") {
      a.dir = val;
    } else if (opt == "--T") {
      a.T = parse_int("--T", val, 1, INT32_MAX);
    } else if (opt == "--N") {
      a.N = parse_int("--N", val, 1, INT32_MAX);
    } else if (opt == "--k") {
      a.K = parse_int("--k", val, 1, INT32_MAX);
    } else if (opt == "--iters") {
      a.iters = parse_int("--iters", val, 1, 100000);
    } else if (opt == "--warmup") {
      a.warmup = parse_int("--warmup", val, 0, 100000);
    } else if (opt == "--kernels") {
      a.kernels = parse_kernels(val);
    } else {
      die_usage("unknown option '%s'", argv[i]);
    }
  }
  if (a.dir.empty()) die_usage("--dir is required");
  if (a.T < 0) die_usage("--T is required");
  if (a.N < 0) die_usage("--N is required");
  if (a.K < 0) die_usage("--k is required");
  for (const Kernel k : a.kernels) {
    if (!kernel_supports_k(k, static_cast<int>(a.K))) {
      std::fprintf(stderr, "error: kernel %s does not support k=%lld (fast_topk: 512 or 2048; topk_v2: 1..2048)\n",
                   kernel_name(k), a.K);
      usage();
      std::exit(kExitUsage);
    }
  }
  return a;
}

// Reads exactly `bytes` bytes; the file must be exactly that long.
void read_file(const std::string& path, void* dst, uint64_t bytes) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) {
    std::fprintf(stderr, "error: cannot stat %s: %s\n", path.c_str(), std::strerror(errno));
    std::exit(kExitUsage);
  }
  if (static_cast<uint64_t>(st.st_size) != bytes) {
    std::fprintf(stderr, "error: %s has %lld bytes, expected %llu from --T/--N\n", path.c_str(),
                 static_cast<long long>(st.st_size), static_cast<unsigned long long>(bytes));
    std::exit(kExitUsage);
  }
  FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) {
    std::fprintf(stderr, "error: cannot open %s: %s\n", path.c_str(), std::strerror(errno));
    std::exit(kExitRuntime);
  }
  const size_t got = bytes == 0 ? 0 : std::fread(dst, 1, bytes, f);
  std::fclose(f);
  if (got != bytes) {
    std::fprintf(stderr, "error: short read on %s (%zu of %llu bytes)\n", path.c_str(), got,
                 static_cast<unsigned long long>(bytes));
    std::exit(kExitRuntime);
  }
}

void write_file(const std::string& path, const void* src, uint64_t bytes) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) {
    std::fprintf(stderr, "error: cannot create %s: %s\n", path.c_str(), std::strerror(errno));
    std::exit(kExitRuntime);
  }
  const size_t put = std::fwrite(src, 1, bytes, f);
  if (std::fclose(f) != 0 || put != bytes) {
    std::fprintf(stderr, "error: short write on %s\n", path.c_str());
    std::exit(kExitRuntime);
  }
}

// Sanity check of one kernel's absolute indices (stderr only; it never changes the output): every
// entry is -1 or inside its row's window, no column repeats, and a row has min(K, window) entries.
void check_indices(const char* name, const std::vector<int32_t>& idx, const std::vector<int32_t>& ks,
                   const std::vector<int32_t>& ke, int T, int K) {
  long long bad_rows = 0, first_bad = -1;
  std::vector<int32_t> row(K);
  for (int t = 0; t < T; ++t) {
    const int32_t* r = idx.data() + static_cast<size_t>(t) * K;
    int n = 0;
    bool ok = true;
    for (int j = 0; j < K; ++j) {
      if (r[j] == -1) continue;
      if (r[j] < ks[t] || r[j] >= ke[t]) ok = false;
      row[n++] = r[j];
    }
    std::sort(row.begin(), row.begin() + n);
    if (std::adjacent_find(row.begin(), row.begin() + n) != row.begin() + n) ok = false;
    if (n != std::min<int64_t>(K, static_cast<int64_t>(ke[t]) - ks[t])) ok = false;
    if (!ok) {
      if (bad_rows++ == 0) first_bad = t;
    }
  }
  if (bad_rows != 0) {
    std::fprintf(stderr,
                 "warning: kernel=%s: %lld of %d rows have an index outside [ks,ke), a repeated index, or a count "
                 "other than min(k, ke-ks) (first: row %lld)\n",
                 name, bad_rows, T, first_bad);
  }
}

double median_of(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (static_cast<double>(v[n / 2 - 1]) + v[n / 2]);
}

// ---------------------------------------------------------------------------------------------------
// Commands
// ---------------------------------------------------------------------------------------------------

int cmd_info() {
  std::printf("sgl_topk: SGLang DSA top-k kernels, built from the PyPI wheel sglang==%s (Apache-2.0)\n",
              SGL_TOPK_SGLANG_VERSION);
  std::printf("kernel=fast_topk k=512,2048 source=sglang/kernels/jit/csrc/elementwise/fast_topk.cuh "
              "entry=sglang::fast_topk_detail::fast_topk_kernel<k,false> (FastTopKKernel<k,false>::run) "
              "threads=%u dyn_smem=%zu\n",
              sglang::fast_topk_detail::kThreadsPerBlock, sglang::fast_topk_detail::kSmemBytes);
  std::printf("kernel=topk_v2 k=1..%u source=sglang/kernels/jit/csrc/deepseek_v4/topk_v2.cuh "
              "+ sglang/kernels/jit/include/sgl_kernel/deepseek_v4/topk_impl.cuh "
              "entry=sglang::topk_ragged_kernel<false> (TopKKernel<false>::transform_ragged) threads=%u "
              "row_starts=ks out_offsets=ks\n",
              sglang::kMaxTopK, sglang::kBlockSize);
  std::printf("pdl=off (kUsePDL=false)\n");
  std::printf("tvm_ffi_headers=apache-tvm-ffi==%s (headers only, no runtime linked)\n", SGL_TOPK_TVM_FFI_VERSION);
  std::printf("nvcc_flags=%s\n", SGL_TOPK_NVCC_FLAGS);
  std::printf("cuda_runtime_build=%d (static)\n", CUDART_VERSION);
  return 0;
}

int cmd_io(const Args& a) {
  const int T = static_cast<int>(a.T);
  const int N = static_cast<int>(a.N);
  const int K = static_cast<int>(a.K);
  // T, N < 2^31, so T * N < 2^62 and the byte counts below fit in uint64.
  const uint64_t n_logits = static_cast<uint64_t>(T) * static_cast<uint64_t>(N);
  const uint64_t n_out = static_cast<uint64_t>(T) * static_cast<uint64_t>(K);

  std::vector<int32_t> ks(T), ke(T), len(T);
  read_file(a.dir + "/ks.i32", ks.data(), static_cast<uint64_t>(T) * sizeof(int32_t));
  read_file(a.dir + "/ke.i32", ke.data(), static_cast<uint64_t>(T) * sizeof(int32_t));
  for (int t = 0; t < T; ++t) {
    if (!(0 <= ks[t] && ks[t] <= ke[t] && ke[t] <= N)) {
      std::fprintf(stderr, "error: row %d: ks=%d ke=%d violates 0 <= ks <= ke <= N=%d\n", t, ks[t], ke[t], N);
      return kExitUsage;
    }
    len[t] = ke[t] - ks[t];
  }
  std::vector<float> logits(n_logits);
  read_file(a.dir + "/logits.f32", logits.data(), n_logits * sizeof(float));

  // topk_v2 needs a row stride that is a multiple of 4 floats (16-byte vector loads; SGLang checks
  // score_stride % 4 == 0, which DeepGEMM's padded logits satisfy).  When N is not, rows are copied
  // into a buffer with stride round_up(N, 4); the pad columns lie outside every window.  Both kernels
  // read the same device buffer.
  const int64_t stride = (static_cast<int64_t>(N) + 3) / 4 * 4;
  const uint64_t dev_logits_bytes = static_cast<uint64_t>(T) * static_cast<uint64_t>(stride) * sizeof(float);

  CUDA_CHECK(cudaSetDevice(0));
  cudaStream_t stream;
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  float* d_logits = nullptr;
  int32_t *d_ks = nullptr, *d_len = nullptr, *d_out = nullptr;
  CUDA_CHECK(cudaMalloc(&d_logits, dev_logits_bytes));
  CUDA_CHECK(cudaMalloc(&d_ks, static_cast<size_t>(T) * sizeof(int32_t)));
  CUDA_CHECK(cudaMalloc(&d_len, static_cast<size_t>(T) * sizeof(int32_t)));
  CUDA_CHECK(cudaMalloc(&d_out, n_out * sizeof(int32_t)));
  CUDA_CHECK(cudaMemcpy(d_ks, ks.data(), static_cast<size_t>(T) * sizeof(int32_t), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(d_len, len.data(), static_cast<size_t>(T) * sizeof(int32_t), cudaMemcpyHostToDevice));

  const int iters = static_cast<int>(a.iters);
  const int warmup = static_cast<int>(a.warmup);
  std::vector<cudaEvent_t> ev_start(iters), ev_stop(iters);
  for (int i = 0; i < iters; ++i) {
    CUDA_CHECK(cudaEventCreate(&ev_start[i]));
    CUDA_CHECK(cudaEventCreate(&ev_stop[i]));
  }
  std::vector<int32_t> out(n_out);

  for (const Kernel kern : a.kernels) {
    const char* name = kernel_name(kern);
    // Fresh copy of the file's bytes for every kernel: topk_v2 writes NaN into the <= 3 columns just
    // ahead of each unaligned window (outside the window; idempotent across launches).
    if (stride == N) {
      CUDA_CHECK(cudaMemcpy(d_logits, logits.data(), dev_logits_bytes, cudaMemcpyHostToDevice));
    } else {
      CUDA_CHECK(cudaMemset(d_logits, 0, dev_logits_bytes));
      CUDA_CHECK(cudaMemcpy2D(d_logits, static_cast<size_t>(stride) * sizeof(float), logits.data(),
                              static_cast<size_t>(N) * sizeof(float), static_cast<size_t>(N) * sizeof(float),
                              static_cast<size_t>(T), cudaMemcpyHostToDevice));
    }
    CUDA_CHECK(cudaMemset(d_out, 0xFF, n_out * sizeof(int32_t)));  // -1
    const DeviceInputs in{d_logits, stride, d_ks, d_len, d_out, T, K};

    // 1. one run for the output
    launch(kern, in, stream);
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaStreamSynchronize(stream));
    CUDA_CHECK(cudaMemcpy(out.data(), d_out, n_out * sizeof(int32_t), cudaMemcpyDeviceToHost));

    // 2. timing: warmup launches, then `iters` launches each between an event pair, all enqueued
    //    before one synchronize so that the GPU never waits for the host.
    for (int i = 0; i < warmup; ++i) launch(kern, in, stream);
    for (int i = 0; i < iters; ++i) {
      CUDA_CHECK(cudaEventRecord(ev_start[i], stream));
      launch(kern, in, stream);
      CUDA_CHECK(cudaEventRecord(ev_stop[i], stream));
    }
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaStreamSynchronize(stream));
    std::vector<float> ms(iters);
    for (int i = 0; i < iters; ++i) CUDA_CHECK(cudaEventElapsedTime(&ms[i], ev_start[i], ev_stop[i]));
    const double med = median_of(ms);
    const float mn = *std::min_element(ms.begin(), ms.end());
    const float mx = *std::max_element(ms.begin(), ms.end());
    std::printf("kernel=%s kernel_ms_median %.5f min %.5f max %.5f T=%d N=%d k=%d\n", name, med, mn, mx, T, N, K);
    std::fflush(stdout);

    // 3. absolute columns: fast_topk returns indices relative to ks[t]; topk_v2 already added
    //    out_offsets = ks[t] on the device.  -1 stays -1.
    if (kern == Kernel::kFastTopK) {
      for (int t = 0; t < T; ++t) {
        int32_t* r = out.data() + static_cast<size_t>(t) * K;
        for (int j = 0; j < K; ++j) {
          if (r[j] >= 0) r[j] += ks[t];
        }
      }
    }
    check_indices(name, out, ks, ke, T, K);
    write_file(a.dir + "/sgl_" + name + "_indices.i32", out.data(), n_out * sizeof(int32_t));
  }

  for (int i = 0; i < iters; ++i) {
    CUDA_CHECK(cudaEventDestroy(ev_start[i]));
    CUDA_CHECK(cudaEventDestroy(ev_stop[i]));
  }
  CUDA_CHECK(cudaFree(d_logits));
  CUDA_CHECK(cudaFree(d_ks));
  CUDA_CHECK(cudaFree(d_len));
  CUDA_CHECK(cudaFree(d_out));
  CUDA_CHECK(cudaStreamDestroy(stream));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    usage();
    return kExitUsage;
  }
  const std::string cmd = argv[1];
  if (cmd == "info") {
    if (argc != 2) die_usage("info takes no arguments");
    return cmd_info();
  }
  if (cmd == "io") return cmd_io(parse_io_args(argc, argv));
  if (cmd == "-h" || cmd == "--help" || cmd == "help") {
    usage();
    return 0;
  }
  die_usage("unknown command '%s'", argv[1]);
}
