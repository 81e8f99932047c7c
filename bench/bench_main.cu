// fp8dsa_bench: times every op's public fast entry point beside a cuBLASLt FP8 GEMM measured in the
// same run, prints a table and appends the rows to bench/results.csv.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>

#include "core/cuda_check.h"
#include "gemm_yardstick.h"
#include "op_benches.h"
#include "results.h"

#include "commit_stamp.h"  // FP8DSA_GIT_COMMIT, generated at every build (cmake/commit_stamp.cmake)
#ifndef FP8DSA_DEFAULT_CSV
#define FP8DSA_DEFAULT_CSV "bench/results.csv"
#endif

namespace {

using namespace fp8dsa;
using namespace fp8dsa::bench;

constexpr int kGemmSize = 8192;
const char* const kAllOps[] = {"indexer", "topk", "fused_topk", "sparse_mla", "sparse_mla_v32", "pipeline"};

struct Options {
  std::vector<std::string> ops{std::begin(kAllOps), std::end(kAllOps)};
  bool quick = false;
  bool write_csv = true;
  std::string csv = FP8DSA_DEFAULT_CSV;
  std::string commit = FP8DSA_GIT_COMMIT;
  int reps = 10;
  int warmup = 3;
  std::string flashmla;
  std::string q8kv8;
  std::string flashmla_kv;
  std::string sgl_topk;
  std::string torch_topk;
  std::string deepgemm;
  std::vector<std::string> mla_data;
  std::vector<tools::MlaSelection> mla_selections;
  std::vector<int64_t> mla_keys;
  std::vector<int> mla_qk_chains;
  std::vector<int> mla_heads;
  std::string anchor_dir = "/tmp/fp8dsa_anchors";
};

void print_usage(std::FILE* out) {
  std::fprintf(out,
               "usage: fp8dsa_bench [flags]\n"
               "\n"
               "Times each op's public fast entry point (whatever kernel is current) and a cuBLASLt FP8\n"
               "GEMM 8192^3 (e4m3 in, bf16 out) in the same run; prints op, shape, kernel, ms, TFLOPS\n"
               "(valid work only), ratio_to_fp8_gemm and GB/s, and appends the rows to a CSV.\n"
               "\n"
               "  --ops=LIST     comma-separated subset of indexer,topk,fused_topk,sparse_mla,sparse_mla_v32,pipeline (default: all)\n"
               "  --quick        fewer shapes (one or two per op)\n"
               "  --reps=N       timed repetitions per shape, median reported (default 10)\n"
               "  --warmup=N     untimed launches first (default 3)\n"
               "  --csv=PATH     append rows here (default %s)\n"
               "  --no-csv       do not write the CSV\n"
               "  --commit=REV   commit recorded in the CSV (default: as built, %s)\n"
               "  --flashmla=PATH  also time FlashMLA's BF16 sparse prefill (../shared/anchors/flashmla_io.py)\n"
               "                 on the same inputs (rows with baseline=flashmla_bf16) and print every kernel's\n"
               "                 accuracy against the f64 references\n"
               "  --q8kv8=PATH   also time SGLang's FP8 sparse prefill (../shared/anchors/q8kv8) on the same\n"
               "                 e4m3 inputs (rows with baseline=q8kv8); on DeepSeek-V3.2 rows, after the rows'\n"
               "                 requantisation to unit-scale e4m3 (baseline=requant+q8kv8)\n"
               "  --flashmla-kv=PATH  also time FlashMLA's FP8-cache sparse decode kernel as prefill\n"
               "                 (bench/anchors/flashmla_kv_io.py) on the DeepSeek-V3.2 rows as they are\n"
               "                 (baseline=flashmla_kv)\n"
               "  --sgl-topk=PATH  also time SGLang's top-k kernels (an anchor built by\n"
               "                 bench/anchors/build_sgl_topk.sh) on the causal top-k rows' logits (rows with\n"
               "                 baseline=sgl_fast_topk_v2 and baseline=sgl_topk_transform)\n"
               "  --torch-topk=PATH  also time torch.topk (bench/torch_topk_io.py) on them (baseline=torch_topk)\n"
               "  --deepgemm=PATH  also run the indexer on DeepGEMM's own inputs (../shared/anchors/\n"
               "                 deepgemm_indexer_bench --dump) beside DeepGEMM's time for them (rows with\n"
               "                 data=deepgemm, and baseline=deepgemm for DeepGEMM's); with --flashmla too, the\n"
               "                 pipeline also times the anchors' stages on its inputs (baseline=anchor_stages)\n"
               "  --mla-data=LIST  sparse MLA input sets at N = 32K: realistic,peaked,random,random_std1,\n"
               "                 random_std10,zeros (default: all)\n"
               "  --mla-sel=LIST   sparse MLA selections: realistic (top-k by relevance, neighbours overlap),\n"
               "                 uniform (distinct uniform rows over the visible pool) (default: both)\n"
               "  --mla-keys=LIST  sparse MLA cache sizes N (default: 32768 with --quick, else\n"
               "                 8192,32768,131072,262144; the data sets other than realistic at 32768 only)\n"
               "  --mla-heads=LIST sparse MLA (576-byte rows) head counts, of 128, 64, 32, 16, 8 (default: all;\n"
               "                 with --quick 128,64,16,8)\n"
               "  --mla-qk-chains=LIST  FP8DSA_TUNING builds: also time these sparse MLA QK^T chain counts\n"
               "                 (rows with qk_chains=N) and print their accuracy\n"
               "  --anchor-dir=DIR  where the anchors' input files are written (default /tmp/fp8dsa_anchors)\n"
               "  --help         this text\n"
               "\n"
               "Exit status: 0 on success, and also without a CUDA device (a message says nothing was\n"
               "timed, so CI-style runs do not fail); 1 on a CUDA error or a non-Hopper GPU; 2 on a\n"
               "bad flag.\n",
               FP8DSA_DEFAULT_CSV, FP8DSA_GIT_COMMIT);
}

bool starts_with(const char* s, const char* prefix, const char** rest) {
  const size_t n = std::strlen(prefix);
  if (std::strncmp(s, prefix, n) != 0) return false;
  *rest = s + n;
  return true;
}

bool parse_int(const char* s, int min, int* out) {
  char* end = nullptr;
  const long v = std::strtol(s, &end, 10);
  if (end == s || *end != '\0' || v < min || v > 100000) return false;
  *out = static_cast<int>(v);
  return true;
}

// The comma-separated items of a flag's value, in order (empty items kept, so that a stray comma
// fails the item check).
std::vector<std::string> split_list(const std::string& list) {
  std::vector<std::string> items;
  for (size_t pos = 0; pos <= list.size();) {
    const size_t comma = std::min(list.find(',', pos), list.size());
    items.push_back(list.substr(pos, comma - pos));
    pos = comma + 1;
  }
  return items;
}

// 0 = parsed, 1 = --help printed, 2 = error printed.
int parse_args(int argc, char** argv, Options* opt) {
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    const char* v = nullptr;
    if (std::strcmp(a, "--help") == 0 || std::strcmp(a, "-h") == 0) {
      print_usage(stdout);
      return 1;
    } else if (std::strcmp(a, "--quick") == 0) {
      opt->quick = true;
    } else if (std::strcmp(a, "--no-csv") == 0) {
      opt->write_csv = false;
    } else if (starts_with(a, "--csv=", &v) && *v != '\0') {
      opt->csv = v;
    } else if (starts_with(a, "--commit=", &v) && *v != '\0') {
      opt->commit = v;
    } else if (starts_with(a, "--flashmla=", &v) && *v != '\0') {
      opt->flashmla = v;
    } else if (starts_with(a, "--q8kv8=", &v) && *v != '\0') {
      opt->q8kv8 = v;
    } else if (starts_with(a, "--flashmla-kv=", &v) && *v != '\0') {
      opt->flashmla_kv = v;
    } else if (starts_with(a, "--sgl-topk=", &v) && *v != '\0') {
      opt->sgl_topk = v;
    } else if (starts_with(a, "--torch-topk=", &v) && *v != '\0') {
      opt->torch_topk = v;
    } else if (starts_with(a, "--deepgemm=", &v) && *v != '\0') {
      opt->deepgemm = v;
    } else if (starts_with(a, "--mla-data=", &v) && *v != '\0') {
      opt->mla_data.clear();
      for (const std::string& name : split_list(v)) {
        if (!is_mla_data_set(name)) {
          std::fprintf(stderr, "fp8dsa_bench: unknown --mla-data set '%s' (%s)\n", name.c_str(),
                       mla_data_set_names().c_str());
          return 2;
        }
        opt->mla_data.push_back(name);
      }
    } else if (starts_with(a, "--mla-sel=", &v) && *v != '\0') {
      opt->mla_selections.clear();
      for (const std::string& name : split_list(v)) {
        tools::MlaSelection selection{};
        if (!parse_mla_selection(name, &selection)) {
          std::fprintf(stderr, "fp8dsa_bench: unknown --mla-sel selection '%s' (realistic, uniform)\n", name.c_str());
          return 2;
        }
        opt->mla_selections.push_back(selection);
      }
    } else if (starts_with(a, "--mla-keys=", &v) && *v != '\0') {
      opt->mla_keys.clear();
      for (const std::string& item : split_list(v)) {
        char* end = nullptr;
        const long long n = std::strtoll(item.c_str(), &end, 10);
        if (item.empty() || *end != '\0' || n < kMlaMinKeys || n > kMlaMaxKeys) {
          std::fprintf(stderr, "fp8dsa_bench: --mla-keys wants key counts in [%lld, %lld], got '%s'\n",
                       static_cast<long long>(kMlaMinKeys), static_cast<long long>(kMlaMaxKeys), item.c_str());
          return 2;
        }
        opt->mla_keys.push_back(n);
      }
    } else if (starts_with(a, "--mla-heads=", &v) && *v != '\0') {
      opt->mla_heads.clear();
      for (const std::string& item : split_list(v)) {
        int h = 0;
        if (!parse_int(item.c_str(), 1, &h) || (h != 128 && h != 64 && h != 32 && h != 16 && h != 8)) {
          std::fprintf(stderr, "fp8dsa_bench: --mla-heads wants head counts of 128, 64, 32, 16, 8, got '%s'\n",
                       item.c_str());
          return 2;
        }
        opt->mla_heads.push_back(h);
      }
    } else if (starts_with(a, "--mla-qk-chains=", &v) && *v != '\0') {
      opt->mla_qk_chains.clear();
      for (const std::string& item : split_list(v)) {
        int chains = 0;
        if (!parse_int(item.c_str(), 1, &chains)) {
          std::fprintf(stderr, "fp8dsa_bench: --mla-qk-chains wants positive integers, got '%s'\n", v);
          return 2;
        }
        opt->mla_qk_chains.push_back(chains);
      }
    } else if (starts_with(a, "--anchor-dir=", &v) && *v != '\0') {
      opt->anchor_dir = v;
    } else if (starts_with(a, "--reps=", &v)) {
      if (!parse_int(v, 1, &opt->reps)) {
        std::fprintf(stderr, "fp8dsa_bench: --reps wants a positive integer, got '%s'\n", v);
        return 2;
      }
    } else if (starts_with(a, "--warmup=", &v)) {
      if (!parse_int(v, 0, &opt->warmup)) {
        std::fprintf(stderr, "fp8dsa_bench: --warmup wants a non-negative integer, got '%s'\n", v);
        return 2;
      }
    } else if (starts_with(a, "--ops=", &v)) {
      opt->ops.clear();
      for (const std::string& op : split_list(v)) {
        bool known = false;
        for (const char* k : kAllOps) known = known || op == k;
        if (!known) {
          std::fprintf(stderr, "fp8dsa_bench: unknown op '%s' (indexer, topk, fused_topk, sparse_mla, sparse_mla_v32, pipeline)\n", op.c_str());
          return 2;
        }
        opt->ops.push_back(op);
      }
    } else {
      std::fprintf(stderr, "fp8dsa_bench: unknown flag '%s'\n\n", a);
      print_usage(stderr);
      return 2;
    }
  }
  return 0;
}

bool wants(const Options& opt, const char* op) {
  for (const std::string& o : opt.ops) {
    if (o == op) return true;
  }
  return false;
}

// Owns the benchmark's stream.
struct Stream {
  cudaStream_t stream = nullptr;
  ~Stream() {
    if (stream) cudaStreamDestroy(stream);
  }
};

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  if (const int rc = parse_args(argc, argv, &opt); rc != 0) return rc == 1 ? 0 : 2;

  const Status device = check_device();
  if (device.code() == StatusCode::kNoDevice) {
    std::printf("fp8dsa_bench: no CUDA device here (%s); nothing was timed.\n", device.message().c_str());
    return 0;
  }
  if (!device.is_ok()) {
    std::fprintf(stderr, "fp8dsa_bench: %s\n", device.to_string().c_str());
    return 1;
  }
  int dev = 0;
  cudaDeviceProp prop{};
  Stream stream;
  for (const Status& setup : {cuda_status(cudaGetDevice(&dev), "cudaGetDevice"),
                              cuda_status(cudaGetDeviceProperties(&prop, dev), "cudaGetDeviceProperties"),
                              cuda_status(cudaStreamCreateWithFlags(&stream.stream, cudaStreamNonBlocking),
                                          "cudaStreamCreateWithFlags")}) {
    if (!setup.is_ok()) {
      std::fprintf(stderr, "fp8dsa_bench: %s\n", setup.to_string().c_str());
      return 1;
    }
  }

  Results results;
  BenchContext ctx;
  ctx.quick = opt.quick;
  ctx.timing.reps = opt.reps;
  ctx.timing.warmup = opt.warmup;
  ctx.l2_bytes = static_cast<size_t>(prop.l2CacheSize);
  ctx.stream = stream.stream;
  ctx.results = &results;
  ctx.flashmla = opt.flashmla;
  ctx.q8kv8 = opt.q8kv8;
  ctx.flashmla_kv = opt.flashmla_kv;
  ctx.sgl_topk = opt.sgl_topk;
  ctx.torch_topk = opt.torch_topk;
  ctx.deepgemm = opt.deepgemm;
  ctx.mla_data = opt.mla_data;
  ctx.mla_selections = opt.mla_selections;
  ctx.mla_keys = opt.mla_keys;
  ctx.mla_qk_chains = opt.mla_qk_chains;
  ctx.mla_heads = opt.mla_heads;
  ctx.anchor_dir = opt.anchor_dir;
  std::printf("fp8dsa_bench on %s (%d SMs, L2 %d MB), commit %s, median of %d reps after %d warm-up\n",
              prop.name, prop.multiProcessorCount, prop.l2CacheSize >> 20, opt.commit.c_str(), opt.reps, opt.warmup);

  GemmYardstick gemm;
  const Status gemm_status = run_fp8_gemm_yardstick(kGemmSize, kGemmSize, kGemmSize, ctx.timing, ctx.l2_bytes, ctx.stream, &gemm);
  if (!gemm_status.is_ok()) {
    std::fprintf(stderr, "fp8dsa_bench: the FP8 GEMM yardstick failed: %s\n", gemm_status.to_string().c_str());
    return 1;
  }
  results.set_gemm_tflops(gemm.tflops);
  ResultRow gemm_row;
  gemm_row.op = "fp8_gemm";
  gemm_row.shape = shape_string({{"M", gemm.m}, {"N", gemm.n}, {"K", gemm.k}});
  gemm_row.kernel = gemm.algo;
  gemm_row.ms = gemm.timing.median_ms;
  gemm_row.tflops = gemm.tflops;
  results.add(gemm_row);

  struct OpBench {
    const char* op;
    Status (*run)(const BenchContext&);
  };
  const OpBench benches[] = {{"indexer", run_indexer_bench},
                             {"topk", run_topk_bench},
                             {"fused_topk", run_fused_topk_bench},
                             {"sparse_mla", run_sparse_mla_bench},
                             {"sparse_mla_v32", run_sparse_mla_v32_bench},
                             {"pipeline", run_pipeline_bench}};
  int exit_code = 0;
  // Each op's rows are printed and appended to the CSV as soon as it ends, so a run cut short by a
  // time limit still leaves everything measured before it.
  const auto report = [&](size_t first) {
    const Results part = results.since(first);
    part.print_table(stdout);
    std::fflush(stdout);
    if (!opt.write_csv) return;
    const Status status = part.append_csv(opt.csv, prop.name, opt.commit);
    if (!status.is_ok()) {
      std::fprintf(stderr, "fp8dsa_bench: %s\n", status.to_string().c_str());
      exit_code = 1;
    }
  };
  report(0);
  for (const OpBench& b : benches) {
    if (!wants(opt, b.op)) continue;
    std::printf("  running %s ...\n", b.op);
    std::fflush(stdout);
    const size_t first = results.rows().size();
    const Status status = b.run(ctx);
    report(first);
    if (!status.is_ok()) {
      // A CUDA error may leave the context unusable: stop after reporting what ran.
      std::fprintf(stderr, "fp8dsa_bench: %s failed: %s\n", b.op, status.to_string().c_str());
      exit_code = 1;
      break;
    }
  }

  std::printf("\nall rows:\n");
  results.print_table(stdout);
  return exit_code;
}
