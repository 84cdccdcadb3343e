// Test mode: the same global inputs every step, read from one NPY per input;
// each rank feeds its rows (and the keys of the graph's own draws, offset
// to its first sample); prints "loss <value>" per step.
#include "common.h"
#include "profile.h"

#include "hc/abi/random.h"
#include "hc/base/npy.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>

namespace hcrun {

namespace {
// Timesteps index DiT's 1000-step schedule and class ids its label table:
// values outside them would read past a table inside the step (train mode
// draws them in range; here they come from the user's files).
void checkInputValues(const StepLibrary &lib, const TensorSpec &in,
                      const std::string &path, const hc::rt::NpyArray &a) {
  int64_t hi = 0;
  std::string what;
  if (in.name == "t" && in.dtype == "F32") {
    // A flow model's continuous time: SiT's [0, 1], 1 = data.
    const float *t = reinterpret_cast<const float *>(a.data.data());
    for (std::size_t k = 0; k < static_cast<std::size_t>(a.header.shape[0]); ++k)
      if (!(t[k] >= 0.0f && t[k] <= 1.0f))
        usageError(path + ": " + std::to_string(t[k]) + " at index " + std::to_string(k) +
                   " is not a flow time: needs 0 <= t <= 1");
    return;
  }
  if (in.name == "t") {
    hi = 1000;
    what = "timestep";
  } else if (in.name == "y") {
    const TensorSpec *table = lib.desc.labelTable();
    if (!table)
      return; // no table to index: nothing to bound (the step checks its own)
    hi = table->shape[0];
    what = "class id (the label table " + table->name + " has " +
           std::to_string(hi) + " rows)";
  } else {
    return;
  }
  const std::size_t n = in.numElements() / in.shape[0] * a.header.shape[0];
  for (std::size_t k = 0; k < n; ++k) {
    int64_t v = in.dtype == "I32" ? reinterpret_cast<const int32_t *>(a.data.data())[k]
                                  : reinterpret_cast<const int64_t *>(a.data.data())[k];
    if (v < 0 || v >= hi)
      usageError(path + ": " + std::to_string(v) + " at index " + std::to_string(k) +
                 " is not a valid " + what + ": needs 0.." + std::to_string(hi - 1));
  }
}
} // namespace

int runTestMode(const Options &opt, const StepLibrary &lib, hc::rt::Comm &comm) {
  const Description &d = lib.desc;
  const int R = comm.size(), r = comm.rank();
  const int64_t B = d.batchPerRank;
  std::vector<hc::rt::NpyArray> arrays(d.inputs.size());
  std::vector<const void *> ptrs(d.inputs.size());
  std::vector<int64_t> scalars(d.inputs.size());  // the draws' keys, as this rank feeds them
  std::unique_ptr<StepContext> ctx;
  LrSchedule schedule;
  Error failure(0, "");
  bool failed = false;
  try {
    checkOutputs(opt, lib, r);
    schedule = resolveSchedule(opt, lib);
    for (std::size_t i = 0; i < d.inputs.size(); ++i) {
      const TensorSpec &in = d.inputs[i];
      std::string path = opt.inputs + "/" + in.name + ".npy";
      std::string err;
      if (!hc::rt::readNpy(path, arrays[i], err))
        usageError("input '" + in.name + "': " + err);
      const auto &h = arrays[i].header;
      std::string dt = canonicalDtype(h.dtype);
      if (dt != in.dtype)
        usageError(path + ": dtype " + (dt.empty() ? h.dtype : dt) +
                   ", input '" + in.name + "' of " + lib.path + " is " +
                   in.dtype);
      if (in.shape.empty()) {
        // A key of the graph's own draws (step_library.cpp admits no other
        // scalar input): the file's value for the whole global batch, so a
        // rank's sample offset is the file's plus its first sample's index.
        if (!h.shape.empty())
          usageError(path + ": shape " + shapeString(h.shape) + ", input '" + in.name +
                     "' is a scalar (shape [])");
        std::memcpy(&scalars[i], arrays[i].data.data(), sizeof(int64_t));
        if (in.name == hc::rt::kSampleOffsetInput)
          scalars[i] += static_cast<int64_t>(r) * B;
        ptrs[i] = &scalars[i];
        continue;
      }
      std::vector<int64_t> want = in.shape;
      want[0] = R * B;
      if (h.shape.size() != want.size() ||
          !std::equal(want.begin() + 1, want.end(), h.shape.begin() + 1))
        usageError(path + ": shape " + shapeString(h.shape) + ", input '" +
                   in.name + "' needs " + shapeString(want) + " (global batch = " +
                   std::to_string(R) + " rank(s) x " + std::to_string(B) + ")");
      if (h.shape[0] != R * B)
        usageError(path + ": global batch " + std::to_string(h.shape[0]) +
                   " is not " + std::to_string(R) + " rank(s) x batch_per_rank " +
                   std::to_string(B) + " = " + std::to_string(R * B));
      ptrs[i] = arrays[i].data.data() + static_cast<std::size_t>(r) * in.bytes();
      checkInputValues(lib, in, path, arrays[i]);
    }
    ctx = std::make_unique<StepContext>(lib, comm, opt.checkFinite, !opt.profile.empty());
    ctx->loadInit(opt.init);
  } catch (const Error &e) {
    failure = e;
    failed = true;
  }
  agreeOrExit(comm, failed ? &failure : nullptr);

  Profiler profiler(opt, lib);
  if (r == 0)
    profiler.measureMachine();
  for (int64_t s = 0; s < opt.steps; ++s) {
    double loss = 0;
    const auto t0 = std::chrono::steady_clock::now();
    try {
      applySchedule(schedule, lib, *ctx, s);
      loss = ctx->step(ptrs.data(), s + 1);
    } catch (const Error &e) {
      comm.fail(e.code, e.what());
    }
    profiler.afterStep(*ctx, s + 1, std::chrono::duration<double>(
                                         std::chrono::steady_clock::now() - t0).count());
    if (r == 0) {
      std::printf("loss %.17g\n", loss);
      const double norm = ctx->gradNorm();
      if (std::isfinite(norm))
        std::printf("grad_norm %.9g\n", norm);
      std::fflush(stdout);
    }
  }
  finishRun(opt, *ctx, comm, opt.steps);
  try {
    if (r == 0)
      profiler.finish(*ctx);
  } catch (const Error &e) {
    comm.fail(e.code, e.what());
  }
  return 0;
}

} // namespace hcrun
