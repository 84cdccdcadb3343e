// hc-run: loads a compiled training step and trains with it under mpirun.
// Until the step ABI exists it reports the runtime it would use and fails
// (exit 3) rather than pretending to train.
#include "hc/runtime/hcrt.h"

#include <cstdio>
#include <cstring>

int main(int argc, char **argv) {
  for (int i = 1; i < argc; ++i)
    if (!std::strcmp(argv[i], "--help") || !std::strcmp(argv[i], "-h")) {
      std::printf("usage: [mpirun -np R] hc-run STEP.so --data X.npy "
                  "--steps K\n(runtime %s)\n",
                  hcrt_version_string());
      return 0;
    }
  std::fprintf(stderr, "hc-run: not implemented yet: loading a compiled step "
                       "(runtime %s is ready, the step ABI is not)\n",
               hcrt_version_string());
  return 3;
}
