// libhcrt: public C entry points shared by hc-run and every compiled step.
// Plain C so generated code and foreign loaders need no C++ ABI agreement.
#ifndef HC_RUNTIME_HCRT_H
#define HC_RUNTIME_HCRT_H

#ifdef __cplusplus
extern "C" {
#endif

// Runtime version, bumped on any change visible to compiled steps.
#define HCRT_VERSION_MAJOR 0
#define HCRT_VERSION_MINOR 1

// "MAJOR.MINOR" of the loaded runtime library.
const char *hcrt_version_string(void);
int hcrt_version_major(void);
int hcrt_version_minor(void);

#ifdef __cplusplus
}
#endif

#endif // HC_RUNTIME_HCRT_H
