// hc-run sample's DDPM and DDIM loop (DiT's p_sample_loop and
// ddim_sample_loop over the respaced schedule of sampling_schedule.h): per
// chunk of images x_T ~ N(0, I), then per step one model call (with
// guidance: the conditional rows and their null twins in one batch, as
// forward_with_cfg) and one update per element.
#include "sample_mode.h"
#include "sampling_schedule.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

namespace hcrun {

int64_t sampleDdpmChunks(const SampleRun &r, const SamplingSchedule &sched, bool ddim,
                         bool clip) {
  const StepLibrary &lib = r.lib;
  StepContext &ctx = r.ctx;
  const int K = sched.size();
  const int64_t plane = r.plane, D = r.channels * plane;
  const int64_t outD = r.outChannels * plane, perCall = r.perCall, N = r.images;
  const bool guided = r.guided, bar = r.bar;
  std::vector<float> &samples = r.samples;
  std::vector<float> pred(r.batch * outD);
  // --dump-steps: x before every step and after the last, raw model outputs,
  // step noise, timesteps and labels fed (one chunk only).
  std::vector<float> dumpX, dumpPred, dumpNoise;
  std::vector<int64_t> dumpT;

  const int64_t chunks = (N + perCall - 1) / perCall, calls = chunks * K;
  const auto t0 = std::chrono::steady_clock::now();
  auto seconds = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  double lastDrawn = -1.0;
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t first = c * perCall, n = std::min(perCall, N - first);
    float *x = samples.data() + first * D;  // the chunk's images, updated in place
    for (int64_t j = 0; j < n; ++j)
      for (int64_t e = 0; e < D; ++e)
        x[j * D + e] = normalDraw(r.seed, 0, first + j, kDrawInitialNoise, e);
    r.inputs.setChunk(first, n);
    for (int i = K - 1; i >= 0; --i) {
      for (int64_t j = 0; j < n; ++j)
        r.inputs.setImage(j, x + j * D);
      r.inputs.setTime(sched.timestepMap[i]);
      modelCall(r, K - 1 - i);
      if (lib.api->get_tensor(ctx.handle(), "prediction", pred.data(),
                              pred.size() * sizeof(float)) != 0)
        throw Error(1, lib.path + ": get_tensor('prediction') failed");
      if (!r.dumpSteps.empty()) {
        dumpT.push_back(sched.timestepMap[i]);
        dumpX.insert(dumpX.end(), x, x + n * D);
        dumpPred.insert(dumpPred.end(), pred.begin(), pred.end());
      }
      for (int64_t j = 0; j < n; ++j)
        for (int64_t e = 0; e < D; ++e) {
          const int64_t ch = e / plane, at = e % plane;
          const float *cond = pred.data() + j * outD, *uncond = cond + perCall * outD;
          StepElement s;
          s.x = x[j * D + e];
          s.eps = guided ? guidedEps(cond[ch * plane + at], uncond[ch * plane + at], r.cfgScale)
                         : cond[ch * plane + at];
          s.hasVar = r.learnSigma;  // the conditional rows' variance, as DiT
          s.var = r.learnSigma ? cond[(r.channels + ch) * plane + at] : 0.0;
          const bool noisy = !ddim && i > 0;
          s.noise = noisy ? normalDraw(r.seed, static_cast<uint64_t>(i), first + j,
                                       kDrawStepNoise, e)
                          : 0.0;
          if (!r.dumpSteps.empty())
            dumpNoise.push_back(static_cast<float>(s.noise));
          const double next = ddim ? ddimStep(sched, i, s, clip) : ddpmStep(sched, i, s, clip);
          x[j * D + e] = static_cast<float>(next);
        }
      const int64_t done = c * K + (K - i);
      if (bar && (done == calls || seconds() - lastDrawn >= 0.1)) {  // ~10 redraws/s
        progressLine(done, calls, seconds());
        lastDrawn = seconds();
      }
    }
    if (!r.dumpSteps.empty())
      dumpX.insert(dumpX.end(), x, x + n * D);
  }
  if (bar)
    std::fputc('\n', stderr);
  const std::vector<int64_t> image = {r.channels, r.height, r.width};
  if (!r.dumpSteps.empty()) {
    const std::string &dir = r.dumpSteps;
    auto shaped = [&](int64_t lead, int64_t rows, const std::vector<int64_t> &tail) {
      std::vector<int64_t> s = {lead, rows};
      s.insert(s.end(), tail.begin(), tail.end());
      return s;
    };
    writeNpyOrFail(dir + "/x.npy", "f4", shaped(K + 1, N, image), dumpX.data());
    writeNpyOrFail(dir + "/model_out.npy", "f4",
                   shaped(K, r.batch, {r.outChannels, r.height, r.width}), dumpPred.data());
    writeNpyOrFail(dir + "/noise.npy", "f4", shaped(K, N, image), dumpNoise.data());
    writeNpyOrFail(dir + "/t.npy", "i8", {K}, dumpT.data());
    r.inputs.dump(dir);
  }
  return calls;
}

} // namespace hcrun
