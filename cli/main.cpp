// fp8dsa: the command-line front end. `fp8dsa run` runs the whole DeepSeek-V3.2 prefill on synthetic
// data (on the GPU when there is one, else the CPU references on a smaller shape) and checks it.
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <new>
#include <string>

#include "core/cuda_check.h"
#include "run.h"

namespace {

using fp8dsa::cli::RunOptions;

// To stdout when asked for (--help), to stderr when the command line was wrong.
void print_main_help(std::FILE* to) {
  std::fprintf(to,
      "usage: fp8dsa <command> [flags]\n"
      "\n"
      "fp8dsa: FP8 DeepSeek-V3.2 sparse-attention prefill for Hopper (indexer -> top-k -> sparse MLA).\n"
      "\n"
      "commands:\n"
      "  run       run the whole prefill on random data, time each stage, check a sample of tokens\n"
      "            against the CPU references (see `fp8dsa run --help`)\n"
      "\n"
      "  --help    this text\n");
}

void print_run_help() {
  std::printf(
      "usage: fp8dsa run [flags]\n"
      "\n"
      "Runs one causal sequence of T new tokens over C cached key rows (N = C + T key rows):\n"
      "indexer scoring -> top-k -> sparse MLA, first stage by stage (each timed, through the fast\n"
      "entry points; a stage whose fast kernel is not implemented yet runs its GPU reference kernel,\n"
      "shown as \"reference (CUDA cores)\"), then as one fp8dsa::prefill call. A sample of tokens is\n"
      "recomputed by the f64 CPU references and judged by the SPEC 6 metrics. Prints a table of\n"
      "stage, kernel, ms, TFLOPS (valid work only) and check result.\n"
      "\n"
      "Without a CUDA device (or with --cpu) it runs the CPU references instead, on a smaller default\n"
      "shape, and checks that the whole-prefill reference equals the stages run one by one. Their time\n"
      "is estimated first (on FP8DSA_CPU_THREADS threads if set, else every core); past an hour the run\n"
      "is refused.\n"
      "\n"
      "flags (defaults: GPU / CPU path):\n"
      "  --tokens=T        new query tokens (4096 / 64)\n"
      "  --cached=C        cached key rows before them (28672 / 1984, so N = 32768 / 2048)\n"
      "  --heads=h         attention heads, one of 8 16 32 64 128 (128 / 16)\n"
      "  --topk=K          selected keys per token, a multiple of 64, <= 2048 (2048 / 512)\n"
      "  --index-heads=H   indexer heads, one of 4 8 16 32 64 (64)\n"
      "  --seed=S          random seed of the synthetic inputs (1234)\n"
      "  --check-tokens=M  tokens checked against the CPU references, 0 = none (8)\n"
      "  --cpu             use the CPU references even when a GPU is present\n"
      "  --help            this text\n"
      "\n"
      "Results go to stdout, diagnostics to stderr. Before allocating anything the run checks the\n"
      "flags against the library's rules and its estimate of the memory it needs against what the\n"
      "machine has.\n"
      "\n"
      "Exit status: 0 when every check passed (a stage that is not implemented yet is reported, not\n"
      "failed), 1 when a check or a call failed, 2 on a bad flag or a run that cannot go ahead (a\n"
      "shape the library rejects, not enough host or GPU memory).\n");
}

bool parse_int64(const std::string& text, long long min, long long max, long long* out) {
  if (text.empty()) return false;
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (errno != 0 || *end != '\0' || v < min || v > max) return false;
  *out = v;
  return true;
}

// 0 = parsed, 1 = help printed, 2 = error printed.
int parse_run_flags(int argc, char** argv, int first, RunOptions* o) {
  for (int i = first; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      print_run_help();
      return 1;
    }
    if (arg == "--cpu") {
      o->force_cpu = true;
      continue;
    }
    std::string name = arg, value;
    const size_t eq = arg.find('=');
    if (eq != std::string::npos) {
      name = arg.substr(0, eq);
      value = arg.substr(eq + 1);
    } else if (i + 1 < argc) {
      value = argv[++i];
    }
    long long v = 0;
    bool ok = true;
    if (name == "--tokens") {
      ok = parse_int64(value, 1, 1 << 24, &v);
      o->tokens = v;
    } else if (name == "--cached") {
      ok = parse_int64(value, 0, int64_t{1} << 30, &v);
      o->cached = v;
    } else if (name == "--heads") {
      ok = parse_int64(value, 1, 1024, &v);
      o->heads = static_cast<int>(v);
    } else if (name == "--topk") {
      ok = parse_int64(value, 1, 1 << 20, &v);
      o->topk = static_cast<int>(v);
    } else if (name == "--index-heads") {
      ok = parse_int64(value, 1, 1024, &v);
      o->index_heads = static_cast<int>(v);
    } else if (name == "--seed") {
      ok = parse_int64(value, 0, INT64_MAX, &v);
      o->seed = static_cast<uint64_t>(v);
    } else if (name == "--check-tokens") {
      ok = parse_int64(value, 0, 1 << 20, &v);
      o->check_tokens = static_cast<int>(v);
    } else {
      std::fprintf(stderr, "fp8dsa run: unknown flag '%s' (see fp8dsa run --help)\n", arg.c_str());
      return 2;
    }
    if (!ok) {
      std::fprintf(stderr, "fp8dsa run: bad value '%s' for %s (see fp8dsa run --help)\n", value.c_str(),
                   name.c_str());
      return 2;
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0 ||
      std::strcmp(argv[1], "help") == 0) {
    print_main_help(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  if (std::strcmp(argv[1], "run") != 0) {
    std::fprintf(stderr, "fp8dsa: unknown command '%s' (see fp8dsa --help)\n", argv[1]);
    return 2;
  }
  RunOptions options;
  if (const int rc = parse_run_flags(argc, argv, 2, &options); rc != 0) return rc == 1 ? 0 : 2;

  bool gpu = false;
  if (!options.force_cpu) {
    const fp8dsa::Status device = fp8dsa::check_device();
    gpu = device.is_ok();
    if (!gpu) {
      const bool default_shape = options.tokens <= 0 && options.cached < 0;
      std::fprintf(stderr, "fp8dsa run: no usable GPU (%s); running the CPU references%s instead.\n",
                   device.to_string().c_str(), default_shape ? " on their smaller default shape" : "");
    }
  }
  // The runs check the shape and the memory they need before allocating (exit 2); this is the last
  // line of defence for an estimate that fell short, so that the command never aborts.
  try {
    return gpu ? fp8dsa::cli::run_on_gpu(options) : fp8dsa::cli::run_on_cpu(options);
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "\nfp8dsa run: out of host memory; use smaller --tokens / --cached\n");
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "\nfp8dsa run: %s\n", e.what());
    return 1;
  }
}
