// hc-run --profile FILE: where a step's time goes, per kernel kind, against
// the machine's FMA peak (a bf16 library's products: the bf16 peak) and
// triad bandwidth measured at the start, and the
// step's MFU (model FLOPs over peak x time). One JSON file (rank 0), and a
// table on stdout. Step 1 (first touch of every arena) is left out when
// there are more steps. hc-run sample --profile: the same for a sampler's
// model calls (a "step" is one call; "unit" in the JSON says which).
#ifndef HC_RUN_PROFILE_H
#define HC_RUN_PROFILE_H

#include <algorithm>
#include "common.h"

#include <string>
#include <vector>

namespace hcrun {

class Profiler {
public:
  Profiler(const Options &opt, const StepLibrary &lib);
  // hc-run sample --profile PATH (empty: off): each model call a step.
  Profiler(const std::string &path, const StepLibrary &lib);
  bool on() const { return on_; }
  // Rank 0, before the first step: measures the peak and the bandwidth.
  void measureMachine();
  // After each step (1-based index) with its wall time.
  void afterStep(StepContext &ctx, int64_t step, double seconds);
  // The same, counting the calls itself (sample mode's model calls).
  void afterCall(StepContext &ctx, double seconds) { afterStep(ctx, ++calls_, seconds); }
  // The steps since the last call, for the metrics line: seconds per step
  // in GEMM/attention kernels, in copies and in the other kernels, and MFU
  // against the peak measured at the start (rank 0; empty when off).
  nlohmann::ordered_json window(StepContext &ctx);
  // Rank 0: writes the file and prints the table. Throws Error(1).
  void finish(StepContext &ctx);

private:
  // A CFTP library's concurrent streams (description "cftp_clusters"; 1
  // otherwise): per-call seconds are summed over them, so kinds' seconds
  // are divided by it to add up to the step's wall time.
  double streams() const {
    return std::max(1.0, lib_.desc.raw.value("cftp_clusters", 1.0));
  }
  std::vector<hc_call_profile> read(StepContext &ctx) const;
  // Prints and records (j["cluster_waits"]) where a CFTP step's streams
  // waited for each other; nothing on a one-stream step.
  void reportClusterWaits(const std::vector<hc_call_profile> &calls, double per,
                          nlohmann::ordered_json &j) const;
  std::string path_;
  // Whether step 1 is left out (train and test modes: when more steps are
  // asked for; sample mode: when a second call comes).
  bool skipFirst_ = true;
  std::string unit_ = "step";
  const StepLibrary &lib_;
  bool on_ = false;
  int64_t calls_ = 0;
  double firstSeconds_ = 0;
  double peakGflops_ = 0, triadGbs_ = 0;
  double productPeakGflops_ = 0;  // the GEMMs' and attention's: bf16's or the FMA's
  int threads_ = 0;
  std::string isa_;
  std::vector<hc_call_profile> base_; // after step 1
  double stepSeconds_ = 0;
  int64_t steps_ = 0;
  std::vector<hc_call_profile> windowBase_;  // at the last window()
  double windowSeconds_ = 0;
  int64_t windowSteps_ = 0;
};

} // namespace hcrun

#endif // HC_RUN_PROFILE_H
