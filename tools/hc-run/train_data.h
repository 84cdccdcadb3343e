// Train mode's data, checked before anything large is allocated: which
// graph inputs are x_t, t, y, noise, x_start, target and the conditionings,
// the --data, --labels and --cond files against them, the classes and their
// dropout from the metadata, the label table and the flags.
#ifndef HC_RUN_TRAIN_DATA_H
#define HC_RUN_TRAIN_DATA_H

#include "common.h"
#include "data.h"

namespace hcrun {

// Opens `images`, `labels` and `conds`; throws Error(2) naming the file,
// flag or input that is wrong. R: the ranks (a global batch must fit).
Plan checkData(const Options &opt, const StepLibrary &lib, int R, MappedNpy &images,
               MappedNpy &labels, CondData &conds);

} // namespace hcrun

#endif // HC_RUN_TRAIN_DATA_H
