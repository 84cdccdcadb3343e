// Rank 0's progress in train mode: on a terminal a bar redrawn every step;
// elsewhere (a file, a pipe, mpirun) a line at each log line and at least
// every --progress-every seconds (default 30), so a long run under a
// launcher is never silent for long. Both carry the ETA: the remaining
// steps at the run's mean rate so far.
#ifndef HC_RUN_PROGRESS_H
#define HC_RUN_PROGRESS_H

#include <chrono>
#include <cstdint>
#include <string>

namespace hcrun {

class Progress {
public:
  using Clock = std::chrono::steady_clock;
  // `bar`: draw the terminal bar; `on`: rank 0 (the others print nothing).
  Progress(bool on, bool bar, double everySeconds, int64_t first, int64_t total);
  // After step `done`: the bar, or a line when the interval has passed.
  void step(int64_t done, double loss, double stepsPerSec);
  // After a log line (not on a terminal): the progress line.
  void logged(int64_t done, double loss, double stepsPerSec);
  // Clears the bar's line before other output.
  void clear() const;
  // "1h02m", "4m05s", "12s".
  static std::string duration(double seconds);
  std::string eta(int64_t done) const;

private:
  void line(int64_t done, double loss, double stepsPerSec);
  bool on_, bar_;
  double every_;
  int64_t first_, total_;
  Clock::time_point start_, lastLine_;
};

} // namespace hcrun

#endif // HC_RUN_PROGRESS_H
