// A hand-written step library implementing hc/abi/step_abi.h, for testing
// hc-run without the compiler: a linear least-squares "denoiser" on 1x4x4
// images, trained by SGD with gradients averaged over ranks.
//
//   pred[b,i] = fixed.bias[i] + time.weight[i]*t_b/1000 + emb.weight[y_b,i]
//               + sum_j lin.weight[i,j] * x_t[b,j]
//   loss      = mean over this rank's b, i of (pred - noise)^2, averaged over
//               ranks;  p <- p - lr * (gradient averaged over ranks)
//
// fixed.bias is frozen. Optimizer state: "sgd.step" (int64 scalar).
// Build-time: TOY_BATCH (per rank), TOY_ABI (abi_version to report).
// Test hooks (environment): HC_TOY_FAIL_RANK=r and HC_TOY_FAIL_STEP=k make
// step k (1-based) of rank r fail: HC_TOY_FAIL_MODE=error (default) returns
// -1 before the collective, "exit" ends the process without MPI_Finalize,
// "segv" raises SIGSEGV (a crash), "kill" raises SIGKILL (the OOM killer).
// HC_TOY_FAIL_STEP=0 makes create() fail on rank r (a rank that cannot start,
// e.g. a node without the memory or files the others have).
// HC_TOY_NAN_STEP=k makes step k's loss NaN on every rank.
// HC_TOY_INF_PARAM_STEP=k makes step k's update overflow lin.weight[0] to
// +inf on every rank while its loss stays finite (a learning rate of 1e40).
// HC_TOY_DUMP_DIR=DIR writes each step's inputs to DIR/r<rank>_s<step>.bin
// (x_t, t, y, noise back to back) so tests can check what hc-run fed.
#include "hc/abi/step_abi.h"

#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <cstring>
#include <new>
#include <string>
#include <unistd.h>
#include <vector>

#ifndef TOY_BATCH
#define TOY_BATCH 2
#endif
#ifndef TOY_ABI
#define TOY_ABI HC_STEP_ABI_VERSION
#endif

namespace {
constexpr int B = TOY_BATCH, C = 1, H = 4, W = 4, D = C * H * W, K = 3;
constexpr int KE = K + 1; // + the null class
constexpr float kLr = 0.05f;

struct Tensor {
  const char *name;
  std::size_t elems;
};
// Parameter arena layout: lin.weight | emb.weight | time.weight | fixed.bias;
// the first three are trainable (and the gradient arena mirrors them).
constexpr Tensor kParams[] = {{"lin.weight", D * D},
                              {"emb.weight", KE * D},
                              {"time.weight", D},
                              {"fixed.bias", D}};
constexpr std::size_t kNumParams = 4, kNumTrainable = 3;
constexpr std::size_t kOffLin = 0, kOffEmb = D * D, kOffTime = kOffEmb + KE * D,
                      kOffFixed = kOffTime + D, kParamElems = kOffFixed + D;
constexpr std::size_t kGradElems = kOffFixed; // trainable prefix

std::size_t offsetOf(std::size_t i) {
  std::size_t o = 0;
  for (std::size_t k = 0; k < i; ++k)
    o += kParams[k].elems;
  return o;
}

int envInt(const char *name, int dflt) {
  const char *s = std::getenv(name);
  return s && *s ? std::atoi(s) : dflt;
}

std::string description() {
  char buf[4096];
  std::snprintf(
      buf, sizeof buf,
      R"({"abi_version": %d, "batch_per_rank": %d,
 "inputs": [{"name": "x_t", "dtype": "float32", "shape": [%d, %d, %d, %d]},
            {"name": "t", "dtype": "int64", "shape": [%d]},
            {"name": "y", "dtype": "int64", "shape": [%d]},
            {"name": "noise", "dtype": "float32", "shape": [%d, %d, %d, %d]}],
 "parameters": [{"name": "lin.weight", "shape": [%d, %d], "trainable": true},
                {"name": "emb.weight", "shape": [%d, %d], "trainable": true},
                {"name": "time.weight", "shape": [%d], "trainable": true},
                {"name": "fixed.bias", "shape": [%d], "trainable": false}],
 "frozen": ["fixed.bias"],
 "state": [{"name": "sgd.step", "dtype": "int64", "shape": []}],
 "gradients": ["lin.weight", "emb.weight", "time.weight"],
 "optimizer": {"name": "sgd", "lr": %g},
 "hyperparameters": {"lr": %.17g},
 "flops_per_step": %d,
 "memory_plan": {}, "buckets": [],
 "init_file": "toy.init.safetensors",
 "dit_config": {"model": "toy", "num_classes": %d, "class_dropout_prob": 0.1,
                "in_channels": %d, "image_size": %d}})",
      TOY_ABI, B, B, C, H, W, B, B, B, C, H, W, D, D, KE, D, D, D, kLr,
      static_cast<double>(kLr), 6 * B * D * D, K, C, H);
  std::string d = buf;
  // TOY_PLAN_FILE: description keys to add (a machine plan: "topology",
  // "core_budget", as hc-compile --topology writes them), for hc-run's
  // machine check (test/run/topology_check.py).
  if (const char *plan = std::getenv("TOY_PLAN_FILE")) {
    std::ifstream in(plan);
    std::string keys((std::istreambuf_iterator<char>(in)),
                     std::istreambuf_iterator<char>());
    if (!keys.empty())
      d.insert(d.rfind('}'), ", " + keys);
  }
  return d;
}

struct Ctx {
  hc_step_env env;
  std::vector<float> params = std::vector<float>(kParamElems, 0.f);
  std::vector<float> grads = std::vector<float>(kGradElems, 0.f);
  int64_t step = 0;
  double lr = kLr;  // the "lr" hyperparameter (ABI 5)
};

hc_step *create(const hc_step_env *env, char *error, size_t size) {
  if (!env || env->world_size < 1 || env->rank < 0 ||
      env->rank >= env->world_size ||
      (env->world_size > 1 && !env->allreduce_sum_f32)) {
    std::snprintf(error, size, "toy: bad environment");
    return nullptr;
  }
  if (env->rank == envInt("HC_TOY_FAIL_RANK", -1) &&
      envInt("HC_TOY_FAIL_STEP", 1) == 0) {
    std::snprintf(error, size, "toy: rank %d cannot start (test hook)",
                  env->rank);
    return nullptr;
  }
  Ctx *c = new (std::nothrow) Ctx;
  if (!c) {
    std::snprintf(error, size, "toy: out of memory");
    return nullptr;
  }
  c->env = *env;
  return reinterpret_cast<hc_step *>(c);
}

void destroy(hc_step *s) { delete reinterpret_cast<Ctx *>(s); }

// Where a named tensor lives: pointer + bytes; null when unknown.
void *locate(Ctx *c, const char *name, std::size_t &bytes, bool forGet) {
  if (!std::strcmp(name, "sgd.step")) {
    bytes = sizeof(int64_t);
    return &c->step;
  }
  bool grad = !std::strncmp(name, "grad:", 5);
  if (grad && !forGet)
    return nullptr;
  const char *n = grad ? name + 5 : name;
  for (std::size_t i = 0; i < kNumParams; ++i)
    if (!std::strcmp(n, kParams[i].name)) {
      if (grad && i >= kNumTrainable)
        return nullptr;
      bytes = kParams[i].elems * sizeof(float);
      return (grad ? c->grads.data() : c->params.data()) + offsetOf(i);
    }
  return nullptr;
}

int setTensor(hc_step *s, const char *name, const void *data, size_t bytes) {
  std::size_t want = 0;
  void *p = locate(reinterpret_cast<Ctx *>(s), name, want, false);
  if (!p || bytes != want)
    return -1;
  std::memcpy(p, data, bytes);
  return 0;
}

int getTensor(const hc_step *s, const char *name, void *data, size_t bytes) {
  std::size_t want = 0;
  void *p = locate(const_cast<Ctx *>(reinterpret_cast<const Ctx *>(s)), name,
                   want, true);
  if (!p || bytes != want)
    return -1;
  std::memcpy(data, p, bytes);
  return 0;
}

int step(hc_step *s, const void *const *inputs, double *loss) {
  Ctx *c = reinterpret_cast<Ctx *>(s);
  const int64_t now = c->step + 1;
  if (c->env.rank == envInt("HC_TOY_FAIL_RANK", -1) &&
      now == envInt("HC_TOY_FAIL_STEP", 1)) {
    const char *mode = std::getenv("HC_TOY_FAIL_MODE");
    if (mode && !std::strcmp(mode, "exit")) {
      std::fprintf(stderr, "toy: rank %d exits at step %lld\n", c->env.rank,
                   static_cast<long long>(now));
      std::fflush(stderr);
      _exit(7);
    }
    if (mode && !std::strcmp(mode, "segv"))
      std::raise(SIGSEGV);
    if (mode && !std::strcmp(mode, "kill"))
      std::raise(SIGKILL);
    return -1;
  }
  const float *x = static_cast<const float *>(inputs[0]);
  const int64_t *t = static_cast<const int64_t *>(inputs[1]);
  const int64_t *y = static_cast<const int64_t *>(inputs[2]);
  const float *noise = static_cast<const float *>(inputs[3]);
  if (const char *dump = std::getenv("HC_TOY_DUMP_DIR")) {
    std::string path = std::string(dump) + "/r" + std::to_string(c->env.rank) +
                       "_s" + std::to_string(now) + ".bin";
    if (std::FILE *f = std::fopen(path.c_str(), "wb")) {
      std::fwrite(x, sizeof(float), B * D, f);
      std::fwrite(t, sizeof(int64_t), B, f);
      std::fwrite(y, sizeof(int64_t), B, f);
      std::fwrite(noise, sizeof(float), B * D, f);
      std::fclose(f);
    }
  }
  // HC_TOY_SLOW_MS=n: a slow forward, polling abandon_requested every 10 ms
  // as a compiled step polls it between kernels (preemption tests).
  bool abandoned = false;
  for (int ms = envInt("HC_TOY_SLOW_MS", 0); ms > 0 && !abandoned; ms -= 10) {
    usleep(10000);
    abandoned = c->env.abandon_requested && c->env.abandon_requested(c->env.host);
  }
  const float *Wl = c->params.data() + kOffLin;
  const float *E = c->params.data() + kOffEmb;
  const float *Tw = c->params.data() + kOffTime;
  const float *Fb = c->params.data() + kOffFixed;
  // One buffer for the collective: gradients, then the loss.
  std::vector<float> buf(kGradElems + 1, 0.f);
  float *gW = buf.data() + kOffLin, *gE = buf.data() + kOffEmb,
        *gT = buf.data() + kOffTime;
  double lsum = 0;
  const float scale = 2.0f / (B * D);
  for (int b = 0; b < B && !abandoned; ++b) {
    if (y[b] < 0 || y[b] >= KE || t[b] < 0 || t[b] >= 1000)
      return -1;
    const float tb = static_cast<float>(t[b]) / 1000.0f;
    const float *xb = x + b * D;
    for (int i = 0; i < D; ++i) {
      float acc = Fb[i] + Tw[i] * tb + E[y[b] * D + i];
      for (int j = 0; j < D; ++j)
        acc += Wl[i * D + j] * xb[j];
      float r = acc - noise[b * D + i];
      lsum += static_cast<double>(r) * r;
      float d = scale * r;
      for (int j = 0; j < D; ++j)
        gW[i * D + j] += d * xb[j];
      gE[y[b] * D + i] += d;
      gT[i] += d * tb;
    }
  }
  buf[kGradElems] = static_cast<float>(lsum / (B * D));
  if (c->env.world_size > 1 &&
      c->env.allreduce_sum_f32(c->env.comm, buf.data(), buf.size()) != 0)
    return -1;
  // The update gate (ABI 4): every rank asks before it writes parameters.
  if (c->env.update_gate) {
    int32_t g = c->env.update_gate(c->env.host, abandoned ? 1 : 0);
    if (g != 0)
      return g < 0 ? -1 : -4;
  } else if (abandoned) {
    return -4;
  }
  const float inv = 1.0f / c->env.world_size;
  for (std::size_t k = 0; k < kGradElems; ++k) {
    c->grads[k] = buf[k] * inv;
    c->params[k] -= static_cast<float>(c->lr * c->grads[k]);
  }
  *loss = static_cast<double>(buf[kGradElems] * inv);
  if (now == envInt("HC_TOY_NAN_STEP", -1))
    *loss = std::nan("");
  if (now == envInt("HC_TOY_INF_PARAM_STEP", -1))
    c->params[kOffLin] = INFINITY;
  c->step = now;
  return 0;
}

const char *lastError(const hc_step *) { return ""; }

int setHyper(hc_step *s, const char *name, double value) {
  if (std::strcmp(name, "lr") != 0 || !std::isfinite(value))
    return -1;
  reinterpret_cast<Ctx *>(s)->lr = value;
  return 0;
}

int getHyper(const hc_step *s, const char *name, double *value) {
  if (std::strcmp(name, "lr") != 0)
    return -1;
  *value = reinterpret_cast<const Ctx *>(s)->lr;
  return 0;
}

const std::string &descriptionText() {
  static const std::string d = description();
  return d;
}

} // namespace

extern "C" __attribute__((visibility("default"))) const hc_step_api *
hc_step_get_api(void) {
  static hc_step_api api = {TOY_ABI, descriptionText().c_str(), create,
                            destroy, setTensor, getTensor, step, lastError,
                            nullptr /* no profile */, setHyper, getHyper,
                            nullptr /* no evaluate */};
  return &api;
}
