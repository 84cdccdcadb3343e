// The copy engine: hc-automem's tier copies (hcs.offload / hcs.prefetch)
// run on copy threads while the step computes, between DRAM buffers or to
// and from the disk tier, a file in the offload folder. The step starts a
// copy and later waits for it (the plan's hcs.wait); the time it waits is
// the copy's exposed part. Plain C: generated code includes it.
//
// Lanes: one FIFO and one copy thread per lane; the step executor queues
// each CFTP cluster stream's copies on the lane of its cluster, so a
// stream's copies never wait behind another stream's (hc-cftp's cost model
// prices each lane's queue apart). Each copy thread runs on a core the
// core budget reserved (hc-run --comm-cores) when there is one, else
// unpinned, yielding between 4 MiB chunks. Disk I/O is direct (O_DIRECT,
// through an aligned staging buffer per lane) where the file system
// allows it; elsewhere buffered, with each range
// written back and dropped from the page cache (sync_file_range +
// POSIX_FADV_DONTNEED), so offloaded data does not quietly stay in RAM.
#ifndef HC_RUNTIME_COPY_ENGINE_H
#define HC_RUNTIME_COPY_ENGINE_H

#include "hc/abi/step_program.h"  // HCRT_COPY_*

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// The folder the disk tier's file is made in (hc-run --offload-dir): it
// overrides the folder a step library was compiled with. NULL clears it.
void hcrt_set_offload_dir(const char *dir);

// Makes the disk tier: an unnamed file (O_TMPFILE, else created and
// unlinked at once, so nothing else can open or change it) of `bytes` in
// the override folder, else `dir`, all of it allocated now (posix_fallocate)
// so a full disk fails here, before any step. Returns a handle >= 0, or -1
// with one line in `error` naming the folder and what is wrong.
int32_t hcrt_disk_open(const char *dir, int64_t bytes, char *error, size_t size);
void hcrt_disk_close(int32_t disk);
// Whether a disk tier uses direct I/O (1), buffered I/O with the page
// cache dropped (0), or is not open (-1).
int32_t hcrt_disk_direct(int32_t disk);

#define HCRT_COPY_LANES 64

// Queues a copy of `bytes` on `lane` (taken modulo HCRT_COPY_LANES, so
// more streams than lanes share them; a negative one is lane 0): memory to memory (TO_SLOW, FROM_SLOW: `dst`, `src`), memory to
// the disk file (TO_DISK: `src`, `disk`, `offset`) or back (FROM_DISK:
// `dst`, `disk`, `offset`). Disk offsets are multiples of 4096; the file's
// bytes from `offset` up to the next multiple of 4096 past `bytes` belong
// to the copy. A lane's copies run one at a time in the order queued;
// copies on different lanes run at once, so they must not touch the same
// bytes (hc-verify-plan's in-flight check proves it). Returns a ticket
// (> 0).
int64_t hcrt_copy_start(int32_t lane, int32_t kind, void *dst, const void *src,
                        int64_t bytes, int32_t disk, int64_t offset);
// Blocks until copy `ticket` is done. 0, or -1 with one line in `error`
// when any copy so far failed (after a failure no lane copies any more):
// the step must not go on.
int32_t hcrt_copy_wait(int64_t ticket, char *error, size_t size);

typedef struct {
  int64_t bytes[HCRT_COPY_KINDS];  // moved, per kind
  int64_t copies;                  // completed
  double busy_s;                   // the copy threads' time copying (summed)
  double stall_s;                  // time steps spent in hcrt_copy_wait
} hcrt_copy_stats;

// The statistics since the last call (then zeroed).
void hcrt_copy_stats_take(hcrt_copy_stats *out);

#ifdef __cplusplus
}
#endif

#endif // HC_RUNTIME_COPY_ENGINE_H
