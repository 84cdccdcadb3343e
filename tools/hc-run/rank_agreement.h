// Ranks agree before step 1: every rank contributes what must be the same
// everywhere (the library's bytes, its initial parameters, the data's
// identity, the seed, the step count, the batch, precision, augmentation,
// EMA, cadences, preemption settings, hc-run's version). A difference ends
// every rank with exit 2 before step 1, naming the field and the ranks: an
// MPMD launch or nodes holding other files would otherwise train wrongly
// in silence, or hang at the first collective one rank skips.
// Paths may differ between nodes; files are compared by content.
#ifndef HC_RUN_RANK_AGREEMENT_H
#define HC_RUN_RANK_AGREEMENT_H

#include "common.h"

namespace hcrun {

// What names the training data: "size:hash" of --data and --labels
// (hc::rt::sampledIdentity), "none" without labels.
struct DataFiles {
  std::string data, labels = "none";
  std::string conds = "none";  // "NAME=<identity>,..." of --cond, ordered by name
};
// Throws Error(2) naming the file when one cannot be read.
DataFiles dataFilesOf(const Options &opt);

// Collective (a no-op on one rank). Returns only when every rank agrees.
void agreeAcrossRanks(const Options &opt, const StepLibrary &lib,
                      const DataFiles &files, hc::rt::Comm &comm);

} // namespace hcrun

#endif // HC_RUN_RANK_AGREEMENT_H
