#include "profile.h"

#include "hc/base/files.h"
#include "hc/runtime/kernels.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>

namespace hcrun {
namespace {
// Calls whose time is the matrix-unit work the step exists for: those the
// compiler counts FLOPs for (the kernel registry's FLOP rules: GEMMs and
// attention). The rest (normalizations, elementwise, copies, reductions,
// optimizer, all-reduce) is what the profile calls "outside GEMM and
// attention".
bool isGemmOrAttention(const hc_call_profile &c) { return c.flops > 0; }

std::string seconds3(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", s);
  return buf;
}
} // namespace

// A CFTP step's cluster waits, per waiting stream and by the entry each
// guards (the planner puts a wait right before the entry that needs it):
// which cross-stream dependencies the streams stall on.
void Profiler::reportClusterWaits(const std::vector<hc_call_profile> &calls, double per,
                                  nlohmann::ordered_json &j) const {
  std::map<std::string, double> byGuarded;
  std::map<int, double> byStream;
  double total = 0;
  for (std::size_t i = 0; i < calls.size(); ++i) {
    if (std::string(calls[i].kernel) != "cluster_wait")
      continue;
    const double secs =
        (calls[i].seconds - (base_.empty() ? 0 : base_[i].seconds)) * per;
    std::size_t next = i + 1;
    while (next < calls.size() && std::string(calls[next].kernel) == "cluster_wait")
      ++next;
    byGuarded[next < calls.size() ? calls[next].kernel : "(end)"] += secs;
    int stream = -1;  // the label says "cluster K waits for ..."
    std::sscanf(calls[i].where, "cluster %d", &stream);
    byStream[stream] += secs;
    total += secs;
  }
  if (byStream.empty())
    return;
  std::vector<std::pair<double, std::string>> order;
  for (const auto &[kernel, s] : byGuarded)
    order.push_back({s, kernel});
  std::sort(order.rbegin(), order.rend());
  nlohmann::ordered_json guarded = nlohmann::ordered_json::object(),
                         streams = nlohmann::ordered_json::object();
  std::string line;
  for (const auto &[s, kernel] : order) {
    guarded[kernel] = s;
    line += std::string(line.empty() ? "" : ", ") + kernel + " " + seconds3(s);
  }
  std::string perStream;
  for (const auto &[k, s] : byStream) {
    streams[std::to_string(k)] = s;
    perStream += std::string(perStream.empty() ? "" : ", ") + "cluster " + std::to_string(k) + " " + seconds3(s);
  }
  j["cluster_waits"] = {{"seconds_per_step", total},
                        {"by_waiting_cluster", streams},
                        {"by_guarded_kernel", guarded}};
  std::printf("cluster waits (s/step, summed over streams): %.3f; %s; before %s\n", total,
              perStream.c_str(), line.c_str());
}

Profiler::Profiler(const Options &opt, const StepLibrary &lib)
    : path_(opt.profile), skipFirst_(opt.steps > 1), lib_(lib), on_(!opt.profile.empty()) {}

Profiler::Profiler(const std::string &path, const StepLibrary &lib)
    : path_(path), unit_("model call"), lib_(lib), on_(!path.empty()) {}

void Profiler::measureMachine() {
  if (!on_)
    return;
  threads_ = hcrt_num_threads();
  const int32_t isa = hcrt_isa();
  isa_ = hcrt_isa_name(isa);
  peakGflops_ = hcrt_fma_peak_gflops(threads_, isa == HC_ISA_AVX512 ? HC_ISA_AVX512
                                                                    : HC_ISA_AVX2);
  triadGbs_ = hcrt_triad_gbs(threads_);
  // A bf16 library's GEMMs and attention run on AMX tiles or bf16 dot
  // products where the CPU has them: their roofline is that peak (MFU stays
  // against the FMA's).
  productPeakGflops_ = peakGflops_;
  if (lib_.desc.raw.value("precision", std::string()) == "bf16") {
    const int32_t path = hcrt_bf16_path();
    if (path == HC_BF16_AMX)
      productPeakGflops_ = std::max(peakGflops_, hcrt_amx_bf16_peak_gflops(threads_));
    else if (path == HC_BF16_VDPBF16PS)
      productPeakGflops_ = std::max(peakGflops_, hcrt_bf16_peak_gflops(threads_));
  }
}

std::vector<hc_call_profile> Profiler::read(StepContext &ctx) const {
  const hc_step_api *api = lib_.api;
  if (!api->get_profile)
    throw Error(1, lib_.path + ": the step library has no profile");
  size_t n = api->get_profile(ctx.handle(), nullptr, 0);
  std::vector<hc_call_profile> out(n);
  api->get_profile(ctx.handle(), out.data(), n);
  return out;
}

void Profiler::afterStep(StepContext &ctx, int64_t step, double seconds) {
  if (!on_)
    return;
  windowSeconds_ += seconds;
  ++windowSteps_;
  if (step == 1 && skipFirst_) {
    base_ = read(ctx);
    firstSeconds_ = seconds;
    return;
  }
  stepSeconds_ += seconds;
  ++steps_;
}

nlohmann::ordered_json Profiler::window(StepContext &ctx) {
  nlohmann::ordered_json m = nlohmann::ordered_json::object();
  if (!on_ || windowSteps_ == 0)
    return m;
  std::vector<hc_call_profile> calls = read(ctx);
  double gemm = 0, copy = 0, other = 0;
  for (std::size_t i = 0; i < calls.size(); ++i) {
    const double secs =
        calls[i].seconds - (windowBase_.empty() ? 0 : windowBase_[i].seconds);
    (isGemmOrAttention(calls[i]) ? gemm
     : std::string(calls[i].kernel) == "copy" ? copy
                                               : other) += secs;
  }
  const double per = 1.0 / static_cast<double>(windowSteps_),
               step = windowSeconds_ * per;
  gemm /= streams(), copy /= streams(), other /= streams();
  const double modelFlops = lib_.desc.raw.value("model_flops_per_step", 0.0);
  m["profiled_step_s"] = step;  // the step calls' wall time, per step
  m["gemm_attention_s"] = gemm * per;
  m["copy_s"] = copy * per;
  m["other_kernels_s"] = other * per;
  m["mfu"] = peakGflops_ > 0 && step > 0 ? modelFlops / (peakGflops_ * 1e9 * step) : 0.0;
  windowBase_ = std::move(calls);
  windowSeconds_ = 0;
  windowSteps_ = 0;
  return m;
}

void Profiler::finish(StepContext &ctx) {
  if (!on_)
    return;
  if (steps_ == 0 && !base_.empty()) {  // step 1 was all there was
    base_.clear();
    steps_ = 1;
    stepSeconds_ = firstSeconds_;
  }
  if (steps_ == 0)
    return;
  std::vector<hc_call_profile> calls = read(ctx);
  struct Kind {
    double calls = 0, seconds = 0, flops = 0, bytes = 0;
  };
  std::map<std::string, Kind> kinds;
  double profiled = 0, outside = 0;
  const double per = 1.0 / steps_;
  nlohmann::ordered_json top = nlohmann::ordered_json::array();
  std::vector<std::pair<double, std::size_t>> order;
  for (std::size_t i = 0; i < calls.size(); ++i) {
    const hc_call_profile &c = calls[i];
    const double runs = static_cast<double>(c.calls - (base_.empty() ? 0 : base_[i].calls));
    // A CFTP step's streams run at once: seconds are averaged over them.
    const double secs = (c.seconds - (base_.empty() ? 0 : base_[i].seconds)) / streams();
    Kind &k = kinds[c.kernel];
    k.calls += runs * per;
    k.seconds += secs * per;
    k.flops += c.flops * runs * per;
    k.bytes += c.bytes * runs * per;
    profiled += secs * per;
    if (!isGemmOrAttention(c))
      outside += secs * per;
    order.push_back({secs * per, i});
  }
  const double step = stepSeconds_ * per;
  const double modelFlops = lib_.desc.raw.value("model_flops_per_step", 0.0);
  const double peak = peakGflops_ * 1e9;
  nlohmann::ordered_json j;
  j["machine"] = {{"isa", isa_},
                  {"threads", threads_},
                  {"fma_peak_gflops", peakGflops_},
                  {"product_peak_gflops", productPeakGflops_},
                  {"triad_gbs", triadGbs_}};
  j["unit"] = unit_;  // what a "step" below is: a training step or a model call
  j["steps"] = steps_;
  j["step_s"] = step;
  j["profiled_s"] = profiled;
  j["model_flops_per_step"] = modelFlops;
  j["mfu"] = peak > 0 && step > 0 ? modelFlops / (peak * step) : 0.0;
  j["outside_gemm_attention_share"] = step > 0 ? outside / step : 0.0;
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  std::vector<std::pair<double, std::string>> byTime;
  for (const auto &[name, k] : kinds)
    byTime.push_back({k.seconds, name});
  std::sort(byTime.rbegin(), byTime.rend());
  const std::string bf16Peak =
      productPeakGflops_ != peakGflops_
          ? ", bf16 peak " + std::to_string(static_cast<int>(productPeakGflops_ + 0.5)) +
                " GFLOP/s (the products' roofline)"
          : "";
  std::printf("hc-run%s --profile: %lld %s(s) of %.4f s on %d thread(s), %s; FMA peak "
              "%.1f GFLOP/s%s, triad %.1f GB/s; MFU %.1f%%; outside GEMM and attention "
              "%.1f%% of the %s\n",
              unit_ == "step" ? "" : " sample", static_cast<long long>(steps_), unit_.c_str(),
              step, threads_, isa_.c_str(), peakGflops_, bf16Peak.c_str(), triadGbs_,
              100 * j["mfu"].get<double>(),
              100 * j["outside_gemm_attention_share"].get<double>(), unit_.c_str());
  std::printf("%-24s %8s %10s %7s %9s %8s %9s %8s\n", "kernel", "calls", "s/step", "share",
              "GFLOP/s", "GB/s", "FLOP/B", "roofline");
  for (const auto &[secs, name] : byTime) {
    const Kind &k = kinds[name];
    const double gf = secs > 0 ? k.flops / secs / 1e9 : 0;
    const double gb = secs > 0 ? k.bytes / secs / 1e9 : 0;
    const double ai = k.bytes > 0 ? k.flops / k.bytes : 0;
    // The roofline's bound for this intensity, and how close the kernel is.
    const double bound = std::min(productPeakGflops_, ai * triadGbs_);
    const double reach = k.flops > 0 && bound > 0 ? gf / bound
                         : triadGbs_ > 0        ? gb / triadGbs_
                                                : 0;
    rows.push_back({{"kernel", name}, {"calls_per_step", k.calls}, {"seconds_per_step", secs},
                    {"flops_per_step", k.flops}, {"bytes_per_step", k.bytes},
                    {"share", step > 0 ? secs / step : 0.0}, {"gflops", gf}, {"gbs", gb},
                    {"flop_per_byte", ai}, {"roofline_bound_gflops", bound},
                    {"of_roofline", reach}});
    std::printf("%-24s %8.1f %10.5f %6.1f%% %9.1f %8.1f %9.2f %7.0f%%\n", name.c_str(), k.calls,
                secs, step > 0 ? 100 * secs / step : 0.0, gf, gb, ai, 100 * reach);
  }
  j["kinds"] = rows;
  std::sort(order.rbegin(), order.rend());
  for (std::size_t r = 0; r < order.size() && r < 20; ++r) {
    const hc_call_profile &c = calls[order[r].second];
    top.push_back({{"call", order[r].second}, {"where", c.where}, {"seconds_per_step", order[r].first}});
  }
  j["slowest_calls"] = top;
  reportClusterWaits(calls, per, j);
  const std::string text = j.dump(2) + "\n";
  std::string err;
  if (!hc::rt::writeFileAtomic(path_, text.data(), text.size(), err))
    throw Error(1, "--profile " + err);
}

} // namespace hcrun
