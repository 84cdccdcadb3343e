// hc-run sample for flow models: per chunk, x ~ N(0, I) at t0 (the same
// Philox draws as DDPM's x_T), integrated to t1 by flow_sampling.h with one
// library call per model evaluation. Guidance: SiT's forward_with_cfg, but
// on every channel (upstream guides 3): the conditional rows and the same x
// with their null forms in one batch, uncond + s (cond - uncond).
#include "sample_mode.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

namespace hcrun {

int64_t sampleFlowChunks(const SampleRun &r, const FlowObjective &obj,
                         const FlowSamplerOptions &fo) {
  const int64_t D = r.channels * r.plane, outD = r.outChannels * r.plane;
  std::vector<float> pred(r.batch * outD);
  // --dump-steps: every model call's t, x and raw output; x after every step.
  std::vector<double> dumpT, dumpStepT;
  std::vector<float> dumpX, dumpPred, dumpSteps, dumpNoise;
  const bool dump = !r.dumpSteps.empty();
  const auto start = std::chrono::steady_clock::now();
  auto seconds = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  const int64_t chunks = (r.images + r.perCall - 1) / r.perCall;
  int64_t calls = 0, step = 0;
  FlowSampleStats total;
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t first = c * r.perCall, n = std::min(r.perCall, r.images - first);
    std::vector<float> x(static_cast<std::size_t>(n * D));
    for (int64_t j = 0; j < n; ++j)
      for (int64_t e = 0; e < D; ++e)
        x[j * D + e] = normalDraw(r.seed, 0, first + j, kDrawInitialNoise, e);
    r.inputs.setChunk(first, n);  // rows past n run on zeros, ignored
    auto model = [&](const std::vector<float> &xs, double t, std::vector<double> &out) {
      for (int64_t j = 0; j < n; ++j)
        r.inputs.setImage(j, xs.data() + j * D);
      r.inputs.setTime(t);
      modelCall(r, step++);
      if (r.lib.api->get_tensor(r.ctx.handle(), "prediction", pred.data(),
                                pred.size() * sizeof(float)) != 0)
        throw Error(1, r.lib.path + ": get_tensor('prediction') failed");
      ++calls;
      if (dump) {
        dumpT.push_back(static_cast<float>(t));
        dumpX.insert(dumpX.end(), xs.begin(), xs.end());
        dumpPred.insert(dumpPred.end(), pred.begin(), pred.end());
      }
      // The data's channels of each image (a learned sigma's are ignored).
      out.resize(xs.size());
      for (int64_t j = 0; j < n; ++j)
        for (int64_t e = 0; e < D; ++e) {
          const double cond = pred[j * outD + e];
          out[j * D + e] = r.guided ? pred[(r.perCall + j) * outD + e] +
                                          r.cfgScale * (cond - pred[(r.perCall + j) * outD + e])
                                    : cond;
        }
      if (r.bar)
        std::fprintf(stderr, "\rsampling: %lld model calls, %.1f s\033[K",
                     static_cast<long long>(calls), seconds());
    };
    auto noise = [&](int s, std::vector<double> &w) {
      w.resize(static_cast<std::size_t>(n * D));
      for (int64_t j = 0; j < n; ++j)
        for (int64_t e = 0; e < D; ++e)
          w[j * D + e] = normalDraw(r.seed, static_cast<uint64_t>(s) + 1, first + j,
                                    kDrawStepNoise, e);
      if (dump)
        dumpNoise.insert(dumpNoise.end(), w.begin(), w.end());
    };
    if (dump)
      dumpSteps.insert(dumpSteps.end(), x.begin(), x.end());
    auto onStep = [&](double t, const std::vector<float> &xs) {
      if (dump) {
        dumpStepT.push_back(t);
        dumpSteps.insert(dumpSteps.end(), xs.begin(), xs.end());
      }
    };
    const FlowSampleStats st = sampleFlow(obj, fo, x, model, noise, onStep);
    total.evaluations += st.evaluations;
    total.accepted += st.accepted;
    total.rejected += st.rejected;
    std::copy(x.begin(), x.end(), r.samples.begin() + first * D);
  }
  if (r.bar)
    std::fputc('\n', stderr);
  if (fo.method == FlowMethod::Dopri5)
    std::printf("dopri5: %lld function evaluations per image chunk on average (%lld steps "
                "accepted, %lld rejected, over %lld chunk(s))\n",
                static_cast<long long>(total.evaluations / chunks),
                static_cast<long long>(total.accepted), static_cast<long long>(total.rejected),
                static_cast<long long>(chunks));
  if (dump) {
    const std::string &dir = r.dumpSteps;
    const int64_t evals = static_cast<int64_t>(dumpT.size());
    const int64_t steps = static_cast<int64_t>(dumpStepT.size());
    std::vector<int64_t> image = {r.images, r.channels, r.plane};
    writeNpyOrFail(dir + "/eval_t.npy", "f8", {evals}, dumpT.data());
    writeNpyOrFail(dir + "/eval_x.npy", "f4", {evals, r.images, D}, dumpX.data());
    writeNpyOrFail(dir + "/model_out.npy", "f4", {evals, r.batch, outD}, dumpPred.data());
    writeNpyOrFail(dir + "/step_t.npy", "f8", {steps}, dumpStepT.data());
    writeNpyOrFail(dir + "/x.npy", "f4", {steps + 1, r.images, D}, dumpSteps.data());
    writeNpyOrFail(dir + "/noise.npy", "f4",
                   {static_cast<int64_t>(dumpNoise.size()) / std::max<int64_t>(1, r.images * D),
                    r.images, D},
                   dumpNoise.data());
    r.inputs.dump(dir);
  }
  return calls;
}

} // namespace hcrun
