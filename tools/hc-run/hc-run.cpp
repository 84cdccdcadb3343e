// hc-run: loads a compiled training step (dit_step.so, see
// hc/runtime/step_abi.h) and runs it, data-parallel under mpirun:
//   test mode  (--inputs DIR): fixed global inputs, prints each step's loss,
//                              saves parameters / gradients / state;
//   train mode (--data X.npy): DiT training with diffusion sampling, logs
//                              and metrics.
// MPI is used when a launcher started the process (mpirun sets
// OMPI_COMM_WORLD_SIZE); plain `hc-run ...` is one rank without MPI.
#include "common.h"

#include "hc/runtime/hcrt.h"

#include <cstdio>

int main(int argc, char **argv) {
  using namespace hcrun;
  std::string err;
  std::unique_ptr<hc::rt::Comm> comm = hc::rt::makeWorldComm(&argc, &argv, err);
  if (!comm) {
    std::fprintf(stderr, "hc-run: cannot start MPI: %s\n", err.c_str());
    return 2;
  }
  comm->prefix = "hc-run";

  Options opt;
  StepLibrary lib;
  Error failure(0, "");
  bool failed = false;
  try {
    opt = parseOptions(argc, argv);
    if (!opt.help)
      lib.load(opt.step);
  } catch (const Error &e) {
    failure = e;
    failed = true;
  }
  agreeOrExit(*comm, failed ? &failure : nullptr);
  if (opt.help) {
    if (comm->rank() == 0)
      std::printf("%s(runtime %s, step ABI %d)\n", usageText(),
                  hcrt_version_string(), HC_STEP_ABI_VERSION);
    comm->finalize();
    return 0;
  }
  int rc = opt.trainMode() ? runTrainMode(opt, lib, *comm)
                           : runTestMode(opt, lib, *comm);
  std::fflush(stdout);
  comm->finalize();
  return rc;
}
