#include "hc/runtime/hcrt.h"

#define HCRT_STR2(x) #x
#define HCRT_STR(x) HCRT_STR2(x)

extern "C" {
const char *hcrt_version_string(void) {
  return HCRT_STR(HCRT_VERSION_MAJOR) "." HCRT_STR(HCRT_VERSION_MINOR);
}
int hcrt_version_major(void) { return HCRT_VERSION_MAJOR; }
int hcrt_version_minor(void) { return HCRT_VERSION_MINOR; }
}
