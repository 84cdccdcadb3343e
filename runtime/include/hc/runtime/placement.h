// Placement of a step's arenas: each planned slice of an arena is zeroed
// (first-touched) by team threads of the cluster that owns it, so under
// Linux's default local-allocation policy its pages land on that cluster's
// NUMA node. Called once per step context, by the generated step's create().
// Plain C: generated code includes it.
#ifndef HC_RUNTIME_PLACEMENT_H
#define HC_RUNTIME_PLACEMENT_H

#include "hc/abi/step_program.h"  // hcrt_touch_slice

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// Page size the plan aligns slices to (hcs.placement's page_bytes).
#define HCRT_PLACEMENT_PAGE 4096

// Zeroes every slice. Owner k runs on the team threads of the k-th distinct
// cluster of the team (modulo their count, so a plan for more clusters than
// the team has still touches everything, on fewer nodes), each thread a
// contiguous page-aligned share.
void hcrt_first_touch(char *const *arenas, const hcrt_touch_slice *slices,
                      int32_t count);

// A step arena of `bytes`: page-aligned, and 2 MiB-aligned with transparent
// huge pages asked for (madvise MADV_HUGEPAGE) when it spans at least one
// huge page; HC_HUGE_PAGES=0 opts out (MADV_NOHUGEPAGE). Huge pages cut the TLB misses of the
// kernels' strided walks over large activations. NULL when out of memory.
// Free with hcrt_arena_free.
char *hcrt_arena_alloc(size_t bytes);
void hcrt_arena_free(char *arena);
// Bytes of [p, p + bytes) backed by transparent huge pages (from
// /proc/self/smaps); -1 when the kernel does not say.
int64_t hcrt_huge_page_bytes(const void *p, size_t bytes);

// Test hook: called for every range a thread touches, from that thread.
// `cluster` is the team cluster (index into the runtime's topology) the
// thread belongs to. NULL removes it.
typedef void (*hcrt_touch_observer)(void *ctx, int32_t thread, int32_t cluster,
                                    int32_t owner, int32_t numa,
                                    const void *begin, size_t bytes);
void hcrt_set_touch_observer(hcrt_touch_observer fn, void *ctx);

// The NUMA node of each page of [p, p + bytes), asked of the kernel with
// move_pages (no move). Writes up to `max` entries (-1: the page is not
// resident or the kernel could not say) and returns how many pages the
// range has, or -1 when move_pages is unavailable.
int32_t hcrt_page_nodes(const void *p, size_t bytes, int32_t *nodes, int32_t max);

#ifdef __cplusplus
}
#endif

#endif // HC_RUNTIME_PLACEMENT_H
