// Train mode's progress: see progress.h.
#include "progress.h"

#include <cmath>
#include <cstdio>

namespace hcrun {

Progress::Progress(bool on, bool bar, double everySeconds, int64_t first, int64_t total)
    : on_(on), bar_(on && bar), every_(everySeconds), first_(first), total_(total),
      start_(Clock::now()), lastLine_(start_) {}

std::string Progress::duration(double s) {
  if (!std::isfinite(s) || s < 0)
    return "?";
  const long long t = std::llround(s);
  char buf[32];
  if (t >= 3600)
    std::snprintf(buf, sizeof buf, "%lldh%02lldm", t / 3600, t % 3600 / 60);
  else if (t >= 60)
    std::snprintf(buf, sizeof buf, "%lldm%02llds", t / 60, t % 60);
  else
    std::snprintf(buf, sizeof buf, "%llds", t);
  return buf;
}

std::string Progress::eta(int64_t done) const {
  const double el = std::chrono::duration<double>(Clock::now() - start_).count();
  if (done <= first_)
    return "?";
  return duration(el / static_cast<double>(done - first_) *
                  static_cast<double>(total_ - done));
}

void Progress::clear() const {
  if (bar_) {
    std::printf("\r\033[K");
    std::fflush(stdout);
  }
}

void Progress::line(int64_t done, double loss, double sps) {
  const double el = std::chrono::duration<double>(Clock::now() - start_).count();
  std::printf("hc-run: step %lld/%lld (%.1f%%), %.3g steps/s, loss %.4f, elapsed %s, ETA %s\n",
              static_cast<long long>(done), static_cast<long long>(total_),
              100.0 * static_cast<double>(done) / static_cast<double>(total_), sps, loss,
              duration(el).c_str(), eta(done).c_str());
  std::fflush(stdout);
  lastLine_ = Clock::now();
}

void Progress::step(int64_t done, double loss, double sps) {
  if (!on_)
    return;
  if (bar_) {
    const int width = 30;
    const int filled = static_cast<int>(width * done / total_);
    std::printf("\r%7lld/%lld [", static_cast<long long>(done), static_cast<long long>(total_));
    for (int i = 0; i < width; ++i)
      std::putchar(i < filled ? '=' : (i == filled ? '>' : ' '));
    std::printf("] loss %.4f  %.2f steps/s  ETA %s\033[K", loss, sps, eta(done).c_str());
    std::fflush(stdout);
    return;
  }
  if (std::chrono::duration<double>(Clock::now() - lastLine_).count() >= every_ &&
      done < total_)
    line(done, loss, sps);
}

void Progress::logged(int64_t done, double loss, double sps) {
  if (on_ && !bar_)
    line(done, loss, sps);
  else if (bar_ && done < total_)
    step(done, loss, sps);
}

} // namespace hcrun
