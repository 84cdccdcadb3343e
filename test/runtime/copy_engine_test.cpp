// The copy engine (hc/runtime/copy_engine.h): memory and disk copies in
// order on a lane's copy thread, lanes side by side, bytes intact (odd
// sizes, a disk tail shorter than a block, neighbours in the file left
// alone), the statistics, the disk tier's refusals, and a failed copy
// failing its wait and every later one on any lane.
#include "hc/runtime/copy_engine.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

namespace {

std::string tempDir() {
  char templ[] = "/tmp/hc-copy-XXXXXX";
  const char *d = mkdtemp(templ);
  return d ? d : "/tmp";
}

std::vector<char> randomBytes(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<char> v(n);
  for (char &c : v)
    c = static_cast<char>(rng());
  return v;
}

} // namespace

TEST(CopyEngine, MemoryCopiesArriveInOrderAndCount) {
  hcrt_copy_stats before;
  hcrt_copy_stats_take(&before);
  const size_t n = (9u << 20) + 37;  // past two 4 MiB chunks, odd tail
  std::vector<char> a = randomBytes(n, 1), b(n), c(n);
  int64_t t1 = hcrt_copy_start(0, HCRT_COPY_TO_SLOW, b.data(), a.data(), n, -1, 0);
  int64_t t2 = hcrt_copy_start(0, HCRT_COPY_FROM_SLOW, c.data(), b.data(), n, -1, 0);
  EXPECT_LT(t1, t2);
  char err[256] = {};
  ASSERT_EQ(hcrt_copy_wait(t2, err, sizeof err), 0) << err;
  EXPECT_EQ(hcrt_copy_wait(t1, err, sizeof err), 0) << err;  // already done
  EXPECT_EQ(std::memcmp(a.data(), c.data(), n), 0);
  hcrt_copy_stats s;
  hcrt_copy_stats_take(&s);
  EXPECT_EQ(s.copies, 2);
  EXPECT_EQ(s.bytes[HCRT_COPY_TO_SLOW], static_cast<int64_t>(n));
  EXPECT_EQ(s.bytes[HCRT_COPY_FROM_SLOW], static_cast<int64_t>(n));
  EXPECT_GT(s.busy_s, 0.0);
  hcrt_copy_stats_take(&s);
  EXPECT_EQ(s.copies, 0) << "taking the statistics zeroes them";
}

// Each lane keeps its own order (a chain whose second copy reads what the
// first wrote), tickets name their lane, a lane past the last wraps around
// and a negative one is lane 0.
TEST(CopyEngine, LanesKeepTheirOwnOrder) {
  const int lanes[] = {0, 1, 2, HCRT_COPY_LANES - 1, HCRT_COPY_LANES + 1, -3};
  const size_t n = (5u << 20) + 11;
  std::vector<std::vector<char>> src, mid, dst;
  std::vector<int64_t> first, second;
  for (int i = 0; i < 6; ++i) {
    src.push_back(randomBytes(n, 10 + i));
    mid.emplace_back(n);
    dst.emplace_back(n);
  }
  for (int i = 0; i < 6; ++i) {
    first.push_back(hcrt_copy_start(lanes[i], HCRT_COPY_TO_SLOW, mid[i].data(),
                                    src[i].data(), n, -1, 0));
    second.push_back(hcrt_copy_start(lanes[i], HCRT_COPY_FROM_SLOW, dst[i].data(),
                                     mid[i].data(), n, -1, 0));
  }
  char err[256] = {};
  for (int i = 5; i >= 0; --i) {
    const int lane = lanes[i] < 0 ? 0 : lanes[i] % HCRT_COPY_LANES;
    EXPECT_EQ(first[i] % HCRT_COPY_LANES, lane);
    EXPECT_EQ(second[i] % HCRT_COPY_LANES, lane);
    EXPECT_LT(first[i], second[i]);
    ASSERT_EQ(hcrt_copy_wait(second[i], err, sizeof err), 0) << err;
    EXPECT_EQ(std::memcmp(src[i].data(), dst[i].data(), n), 0) << "lane " << lanes[i];
  }
  hcrt_copy_stats s;
  hcrt_copy_stats_take(&s);
  EXPECT_EQ(s.copies, 12);
}

TEST(CopyEngine, DiskRoundTripKeepsEveryByteAndItsNeighbours) {
  std::string dir = tempDir();
  char err[512] = {};
  const size_t n1 = (5u << 20) + 123, n2 = 4096 * 3 + 1;
  // Offsets as the plan makes them: multiples of 4096, each slot rounded up.
  const int64_t off1 = 0, off2 = ((n1 + 4095) / 4096) * 4096;
  int32_t disk = hcrt_disk_open(dir.c_str(), off2 + static_cast<int64_t>(n2), err, sizeof err);
  ASSERT_GE(disk, 0) << err;
  EXPECT_GE(hcrt_disk_direct(disk), 0);
  EXPECT_TRUE(std::filesystem::is_empty(dir)) << "the tier's file has no name";
  std::vector<char> a = randomBytes(n1, 2), b = randomBytes(n2, 3), a2(n1), b2(n2);
  int64_t w1 = hcrt_copy_start(0, HCRT_COPY_TO_DISK, nullptr, a.data(), n1, disk, off1);
  int64_t w2 = hcrt_copy_start(0, HCRT_COPY_TO_DISK, nullptr, b.data(), n2, disk, off2);
  int64_t r1 = hcrt_copy_start(0, HCRT_COPY_FROM_DISK, a2.data(), nullptr, n1, disk, off1);
  int64_t r2 = hcrt_copy_start(0, HCRT_COPY_FROM_DISK, b2.data(), nullptr, n2, disk, off2);
  ASSERT_EQ(hcrt_copy_wait(r2, err, sizeof err), 0) << err;
  (void)w1, (void)w2, (void)r1;
  EXPECT_EQ(std::memcmp(a.data(), a2.data(), n1), 0);
  EXPECT_EQ(std::memcmp(b.data(), b2.data(), n2), 0);
  hcrt_copy_stats s;
  hcrt_copy_stats_take(&s);
  EXPECT_EQ(s.bytes[HCRT_COPY_TO_DISK], static_cast<int64_t>(n1 + n2));
  EXPECT_EQ(s.bytes[HCRT_COPY_FROM_DISK], static_cast<int64_t>(n1 + n2));
  hcrt_disk_close(disk);
  EXPECT_EQ(hcrt_disk_direct(disk), -1);
  std::filesystem::remove_all(dir);
}

// Block-aligned buffers move in place under direct I/O, the rest of a
// copy (a last partial block, a misaligned buffer) through the staging
// buffer: whole chunks, an aligned buffer with a short tail, and one 64
// bytes off a block; every byte arrives and the bytes after each target
// stay as they were.
TEST(CopyEngine, DiskCopiesOfAlignedAndMisalignedBuffersKeepEveryByte) {
  std::string dir = tempDir();
  char err[512] = {};
  struct Case {
    size_t bytes, misalign;
  } cases[] = {{(9u << 20), 0}, {4096 * 3 + 100, 0}, {(4u << 20) + 4096 * 2 + 7, 64}};
  const size_t guard = 8192;
  int64_t end = 0;
  std::vector<int64_t> at;
  for (const Case &c : cases) {
    at.push_back(end);
    end += static_cast<int64_t>((c.bytes + 4095) / 4096 * 4096);
  }
  int32_t disk = hcrt_disk_open(dir.c_str(), end, err, sizeof err);
  ASSERT_GE(disk, 0) << err;
  EXPECT_GE(hcrt_disk_direct(disk), 0);
  unsigned seed = 40;
  for (size_t i = 0; i < std::size(cases); ++i) {
    const Case &c = cases[i];
    const size_t room = (c.misalign + c.bytes + guard + 4095) / 4096 * 4096;
    char *src = static_cast<char *>(std::aligned_alloc(4096, room));
    char *dst = static_cast<char *>(std::aligned_alloc(4096, room));
    ASSERT_TRUE(src && dst);
    std::vector<char> bytes = randomBytes(c.bytes, seed++), after = randomBytes(guard, seed++);
    std::memcpy(src + c.misalign, bytes.data(), c.bytes);
    std::memset(dst, 0, room);
    std::memcpy(dst + c.misalign + c.bytes, after.data(), guard);
    int64_t w = hcrt_copy_start(1, HCRT_COPY_TO_DISK, nullptr, src + c.misalign, c.bytes,
                                disk, at[i]);
    ASSERT_EQ(hcrt_copy_wait(w, err, sizeof err), 0) << err;
    std::memset(src, 0, room);  // what was written is on disk only
    int64_t r = hcrt_copy_start(1, HCRT_COPY_FROM_DISK, dst + c.misalign, nullptr, c.bytes,
                                disk, at[i]);
    ASSERT_EQ(hcrt_copy_wait(r, err, sizeof err), 0) << err;
    EXPECT_EQ(std::memcmp(dst + c.misalign, bytes.data(), c.bytes), 0) << "case " << i;
    EXPECT_EQ(std::memcmp(dst + c.misalign + c.bytes, after.data(), guard), 0)
        << "case " << i << ": the bytes after the target changed";
    std::free(src);
    std::free(dst);
  }
  hcrt_copy_stats s;
  hcrt_copy_stats_take(&s);
  hcrt_disk_close(disk);
  std::filesystem::remove_all(dir);
}

TEST(CopyEngine, DiskTierRefusesWhatItCannotUse) {
  char err[512] = {};
  std::string dir = tempDir();
  EXPECT_EQ(hcrt_disk_open((dir + "/missing").c_str(), 4096, err, sizeof err), -1);
  EXPECT_NE(std::string(err).find(dir + "/missing"), std::string::npos) << err;
  EXPECT_NE(std::string(err).find("No such file"), std::string::npos) << err;
  std::ofstream(dir + "/file") << "x";
  EXPECT_EQ(hcrt_disk_open((dir + "/file").c_str(), 4096, err, sizeof err), -1);
  EXPECT_NE(std::string(err).find("not a folder"), std::string::npos) << err;
  EXPECT_EQ(hcrt_disk_open("/proc/self", 4096, err, sizeof err), -1);
  EXPECT_NE(std::string(err).find("/proc/self"), std::string::npos) << err;
  EXPECT_EQ(hcrt_disk_open(nullptr, 4096, err, sizeof err), -1);
  EXPECT_NE(std::string(err).find("--offload-dir"), std::string::npos) << err;
  // hc-run --offload-dir overrides the compiled folder.
  hcrt_set_offload_dir(dir.c_str());
  int32_t disk = hcrt_disk_open("/nonexistent", 4096, err, sizeof err);
  EXPECT_GE(disk, 0) << err;
  hcrt_disk_close(disk);
  hcrt_set_offload_dir(nullptr);
  std::filesystem::remove_all(dir);
}

// Last: a failure is sticky for the process (no later copy may pretend the
// data it depends on arrived).
TEST(CopyEngine, ZFailedCopyFailsItsWaitAndEveryLaterOne) {
  std::string dir = tempDir();
  char err[512] = {};
  int32_t disk = hcrt_disk_open(dir.c_str(), 8192, err, sizeof err);
  ASSERT_GE(disk, 0) << err;
  std::vector<char> buf(4096, 1);
  // Past the reserved size is fine for a file; a closed file is not.
  hcrt_disk_close(disk);
  int64_t t = hcrt_copy_start(0, HCRT_COPY_TO_DISK, nullptr, buf.data(), 4096, disk, 0);
  EXPECT_EQ(hcrt_copy_wait(t, err, sizeof err), -1);
  EXPECT_NE(std::string(err).find("write of 4096 bytes at 0 failed"), std::string::npos) << err;
  std::vector<char> other(64);
  int64_t t2 = hcrt_copy_start(0, HCRT_COPY_TO_SLOW, other.data(), buf.data(), 64, -1, 0);
  EXPECT_EQ(hcrt_copy_wait(t2, err, sizeof err), -1);
  int64_t t3 = hcrt_copy_start(5, HCRT_COPY_TO_SLOW, other.data(), buf.data(), 64, -1, 0);
  EXPECT_EQ(hcrt_copy_wait(t3, err, sizeof err), -1) << "another lane fails too";
  std::filesystem::remove_all(dir);
}
