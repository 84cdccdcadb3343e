// GEMM epilogues against the separate pass they would replace, on DiT's MLP
// shapes: the data behind hc-compile's --fuse-gemm-epilogues default (off).
// For fc1 (x W1^T + b, GELU, keeping the pre-activation) and the backward
// through the GELU ((dY W2) * gelu'(h)), it times, interleaved, the plain
// GEMM, the GEMM plus hc's vectorized GELU pass, and the GEMM with the
// fused epilogue, and prints medians and the fused/separate ratio. A
// sampler keeps no pre-activation (nothing differentiates it): its fc1 row
// times the fused GELU without the preact store. fc2's and the attention
// projection's adaLN residual x + gate (h W^T + b) is timed the same way
// against hc's gated_residual pass.
#include "bench_common.h"
#include "hc/runtime/graph_ops.h"
#include "hc/runtime/hcrt.h"
#include "hc/runtime/kernels.h"

#include <random>

namespace {

using bench::Clock;

struct Shape {
  const char *name;
  int64_t M, hidden, mlp;  // tokens, D, 4 D
};

// y [M, N] = A [M, K] W^T, W [N, K] (a linear layer's forward)
hc_sgemm_args linearArgs(const float *A, const float *W, int64_t M, int64_t N, int64_t K) {
  hc_sgemm_args g{};
  g.M = M, g.N = N, g.K = K, g.batch = 1, g.alpha = 1, g.beta = 0;
  g.A = A, g.lda = K, g.B = W, g.ldb = K, g.trans_b = 1;
  return g;
}

double timeIt(const std::function<void()> &f) {
  auto t0 = Clock::now();
  f();
  return bench::seconds(t0, Clock::now()) * 1e3;
}

} // namespace

int main(int argc, char **argv) {
  int threads = 2, reps = 9;
  bool bf16 = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--threads" && i + 1 < argc)
      threads = std::atoi(argv[++i]);
    else if (a == "--reps" && i + 1 < argc)
      reps = std::atoi(argv[++i]);
    else if (a == "--precision" && i + 1 < argc && (std::string(argv[i + 1]) == "bf16" ||
                                                    std::string(argv[i + 1]) == "fp32"))
      bf16 = std::string(argv[++i]) == "bf16";
    else {
      std::fprintf(stderr, "usage: %s [--threads N] [--reps N] [--precision fp32|bf16]\n",
                   argv[0]);
      return 2;
    }
  }
  const Shape shapes[] = {{"S/2 MLP, batch 32", 8192, 384, 1536},
                          {"S/2 MLP, batch 4", 1024, 384, 1536},
                          {"XL/2 MLP, batch 8", 2048, 1152, 4608}};
  hc_threads th{0, threads};
  // bf16: hc_gemm_bf16 (the GEMMs of hc-compile --precision bf16)
  auto gemm = [&](const hc_sgemm_args *g) { bf16 ? hc_gemm_bf16(g, th) : hc_sgemm(g, th); };
  std::printf("# hc-bench-epilogue: %d thread(s), isa %s, %s GEMMs%s, median of %d "
              "interleaved runs (ms)\n",
              threads, hcrt_isa_name(hcrt_isa()), bf16 ? "bf16" : "fp32",
              bf16 ? (std::string(" (") + hcrt_bf16_path_name(hcrt_bf16_path()) + ")").c_str() : "",
              reps);
  std::printf("%-20s %-28s %9s %9s %9s %7s\n", "shape", "product", "plain",
              "+pass", "fused", "f/pass");
  for (const Shape &s : shapes) {
    const int64_t M = s.M, K = s.hidden, N = s.mlp;
    std::vector<float> x(M * K), w1(N * K), b1(N), w2(K * N), dy(M * K),
        h(M * N), a(M * N), pre(M * N);
    std::mt19937 rng(1);
    std::uniform_real_distribution<float> u(-1, 1);
    for (auto *v : {&x, &w1, &b1, &w2, &dy, &h})
      for (float &e : *v)
        e = u(rng);
    // forward: a = GELU(x W1^T + b1), pre kept
    auto fwd = [&](int variant) {
      hc_sgemm_args g = linearArgs(x.data(), w1.data(), M, N, K);
      hc_epilogue e{};
      e.flags = HC_EPI_BIAS, e.bias = b1.data();
      if (variant >= 2) {  // 3: a sampler's, no pre-activation kept
        e.flags |= HC_EPI_GELU_TANH;
        if (variant == 2)
          e.preact = pre.data(), e.ld_preact = N;
        g.C = a.data(), g.ldc = N;
      } else {
        g.C = pre.data(), g.ldc = N;
      }
      g.epi = &e;
      return timeIt([&] {
        gemm(&g);
        if (variant == 1)
          hc_gelu_tanh_fwd(M * N, pre.data(), a.data(), th);
      });
    };
    // backward through the GELU: dh = (dy W2) * gelu'(h)
    auto bwd = [&](int variant) {
      hc_sgemm_args g{};
      g.M = M, g.N = N, g.K = K, g.batch = 1, g.alpha = 1, g.beta = 0;
      g.A = dy.data(), g.lda = K, g.B = w2.data(), g.ldb = N;
      g.C = a.data(), g.ldc = N;
      hc_epilogue e{};
      if (variant == 2) {
        e.flags = HC_EPI_GELU_TANH_GRAD;
        e.gelu_x = h.data(), e.ld_gelu_x = N;
        g.epi = &e;
      }
      return timeIt([&] {
        gemm(&g);
        if (variant == 1)
          hc_gelu_tanh_bwd(M * N, h.data(), a.data(), a.data(), th);
      });
    };
    // fc2 and the adaLN residual: y = x + gate (a W2^T + b2), gate per
    // sample (rows / tokens samples); hc's gated_residual pass, or fused
    std::vector<float> xr(M * K), y2(M * K), h2(M * K), gate(M * K), b2(K);
    for (auto *v : {&xr, &gate, &b2})
      for (float &e : *v)
        e = u(rng);
    const int64_t tokens = 256, samples = M / tokens;
    auto residual = [&](int variant) {
      hc_sgemm_args g = linearArgs(a.data(), w2.data(), M, K, N);
      hc_epilogue e{};
      e.flags = HC_EPI_BIAS, e.bias = b2.data();
      if (variant >= 2) {
        e.flags |= HC_EPI_GATE | HC_EPI_RESIDUAL;
        e.gate = gate.data(), e.ld_gate = K, e.gate_rows = tokens;
        e.residual = xr.data(), e.ld_residual = K;
        g.C = y2.data(), g.ldc = K;
      } else {
        g.C = h2.data(), g.ldc = K;
      }
      g.epi = &e;
      hcrt_tensor io[4] = {};
      const int64_t dims[3][3] = {{samples, tokens, K}, {samples, K, 0}, {samples, tokens, K}};
      float *data[4] = {xr.data(), gate.data(), h2.data(), y2.data()};
      for (int i = 0; i < 4; ++i) {
        const int64_t *d = dims[i == 3 ? 0 : i];
        io[i].data = data[i], io[i].dtype = HCRT_F32, io[i].rank = i == 1 ? 2 : 3;
        for (int r = io[i].rank - 1, st = 1; r >= 0; st *= d[r], --r)
          io[i].shape[r] = d[r], io[i].strides[r] = st;
      }
      return timeIt([&] {
        gemm(&g);
        if (variant == 1)
          hcrt_op_gated_residual(io, 3, io + 3, 1, nullptr, th);
      });
    };
    for (int dir = 0; dir < 3; ++dir) {
      const int variants = dir == 1 ? 3 : 4;
      std::vector<double> t[4];
      fwd(0), bwd(0), residual(0);  // warm up
      for (int r = 0; r < reps; ++r)
        for (int v = 0; v < variants; ++v)
          t[v].push_back(dir == 0 ? fwd(v) : dir == 1 ? bwd(v) : residual(v));
      const double plain = bench::median(t[0]), sep = bench::median(t[1]),
                   fused = bench::median(t[2]);
      const char *what[] = {"x W1^T + b, GELU (+preact)", "(dY W2) * gelu'(h)",
                            "x + gate (a W2^T + b)"};
      std::printf("%-20s %-28s %9.2f %9.2f %9.2f %7.3f\n", s.name, what[dir],
                  plain, sep, fused, fused / sep);
      if (dir == 0) {
        const double sampler = bench::median(t[3]);
        std::printf("%-20s %-28s %9.2f %9.2f %9.2f %7.3f\n", s.name,
                    "x W1^T + b, GELU (sampler)", plain, sep, sampler, sampler / sep);
      }
    }
  }
  return 0;
}
