// hc_sgemm: placeholder until the packed path lands — reference per batch.
#include "internal.h"

using namespace hc::rt;

extern "C" void hc_sgemm(const hc_sgemm_args *g, hc_threads threads) {
  (void)threads;
  hc_sgemm_ref(g);
}
