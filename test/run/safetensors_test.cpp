// libhcrt's safetensors reader and atomic writer.
#include "hc/base/files.h"
#include "hc/base/safetensors.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fstream>
#include <string>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

using namespace hc::rt;

namespace {
// Temporary folders, removed when the test program ends.
struct TempDirs {
  std::vector<std::string> dirs;
  ~TempDirs() {
    for (const auto &d : dirs) {
      std::error_code ec;
      std::filesystem::remove_all(d, ec);
      if (ec)
        std::fprintf(stderr, "cannot remove %s: %s\n", d.c_str(),
                     ec.message().c_str());
    }
  }
} tempDirs;

std::string tempDir() {
  char templ[] = "/tmp/hc-st-XXXXXX";
  const char *d = mkdtemp(templ);
  if (!d)
    return "/tmp";
  tempDirs.dirs.push_back(d);
  return d;
}

std::string slurp(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)),
                     std::istreambuf_iterator<char>());
}

void spit(const std::string &path, const std::string &bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// A file with the given JSON header and `dataBytes` zero bytes of data.
std::string rawFile(const std::string &header, std::size_t dataBytes) {
  std::string s(8, '\0');
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i)
    s[i] = static_cast<char>(n >> (8 * i));
  return s + header + std::string(dataBytes, '\0');
}

int filesIn(const std::string &dir) {
  int n = 0;
  DIR *d = opendir(dir.c_str());
  while (dirent *e = readdir(d))
    n += e->d_name[0] != '.' || std::strlen(e->d_name) > 2;
  closedir(d);
  return n;
}
} // namespace

TEST(Safetensors, RoundTripF32AndI64) {
  std::string dir = tempDir(), path = dir + "/a.safetensors";
  std::vector<float> w = {1.5f, -2.f, 3.25f, 0.f, 7.f, -0.125f};
  int64_t step = 42;
  std::vector<int64_t> ids = {-1, 0, 1LL << 40};
  std::string err;
  ASSERT_TRUE(writeSafetensors(path,
                               {{"blocks.0.w", "F32", {2, 3}, w.data()},
                                {"adamw.step", "I64", {}, &step},
                                {"ids", "I64", {3}, ids.data()},
                                {"empty", "F32", {0, 4}, nullptr}},
                               {{"format", "pt"}}, err))
      << err;
  std::string bytes = slurp(path);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i)
    n = (n << 8) | static_cast<unsigned char>(bytes[i]);
  EXPECT_EQ((8 + n) % 8, 0u) << "header padded to 8 bytes";
  EXPECT_EQ(bytes.size(), 8 + n + 6 * 4 + 8 + 3 * 8);

  SafetensorsFile f;
  ASSERT_TRUE(f.open(path, err)) << err;
  ASSERT_EQ(f.entries().size(), 4u);
  EXPECT_EQ(f.metadata().at("format"), "pt");
  const SafetensorsEntry *e = f.find("blocks.0.w");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->dtype, "F32");
  EXPECT_EQ(e->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(std::memcmp(f.data(*e), w.data(), 24), 0);
  e = f.find("adamw.step");
  ASSERT_NE(e, nullptr);
  EXPECT_TRUE(e->shape.empty());
  EXPECT_EQ(*static_cast<const int64_t *>(f.data(*e)), 42);
  e = f.find("ids");
  EXPECT_EQ(std::memcmp(f.data(*e), ids.data(), 24), 0);
  EXPECT_EQ(f.find("empty")->bytes, 0u);
  EXPECT_EQ(f.find("nope"), nullptr);
}

TEST(Safetensors, OverwriteIsAtomicAndLeavesNoTemporaries) {
  std::string dir = tempDir(), path = dir + "/p.safetensors";
  float a = 1, b = 2;
  std::string err;
  ASSERT_TRUE(writeSafetensors(path, {{"x", "F32", {1}, &a}}, {}, err));
  ASSERT_TRUE(writeSafetensors(path, {{"x", "F32", {1}, &b}}, {}, err));
  SafetensorsFile f;
  ASSERT_TRUE(f.open(path, err)) << err;
  EXPECT_EQ(*static_cast<const float *>(f.data(*f.find("x"))), 2.f);
  EXPECT_EQ(filesIn(dir), 1);
  // A failing write (duplicate name) leaves the old file and no temporary.
  std::string before = slurp(path);
  EXPECT_FALSE(writeSafetensors(path, {{"x", "F32", {1}, &a}, {"x", "F32", {1}, &a}},
                                {}, err));
  EXPECT_NE(err.find("duplicate"), std::string::npos) << err;
  EXPECT_NE(err.find(path), std::string::npos) << err;
  EXPECT_EQ(slurp(path), before);
  EXPECT_EQ(filesIn(dir), 1);
  struct stat st;
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_NE(st.st_mode & 0044, 0u) << "not left at mkstemp's 0600";
}

TEST(Safetensors, WriteErrorsNameFileAndTensor) {
  std::string err;
  float a = 0;
  EXPECT_FALSE(writeSafetensors("/nonexistent-dir/x.safetensors",
                                {{"x", "F32", {1}, &a}}, {}, err));
  EXPECT_NE(err.find("/nonexistent-dir/x.safetensors"), std::string::npos) << err;
  std::string dir = tempDir();
  EXPECT_FALSE(writeSafetensors(dir + "/y", {{"bad", "Q7", {1}, &a}}, {}, err));
  EXPECT_NE(err.find("'bad'"), std::string::npos) << err;
  EXPECT_NE(err.find("Q7"), std::string::npos) << err;
  EXPECT_EQ(filesIn(dir), 0);
}

TEST(Safetensors, RejectsMalformedFiles) {
  std::string dir = tempDir();
  struct Case {
    const char *what;
    std::string bytes;
    const char *expect; // substring of the error
  } cases[] = {
      {"short", std::string("abc"), "shorter"},
      {"huge header", rawFile("{}", 0).replace(0, 8, std::string("\xff\xff\xff\xff\0\0\0\0", 8)), "header length"},
      {"bad json", rawFile("{\"a\": ", 0), "malformed JSON"},
      {"not object", rawFile("[1,2]", 0), "not a JSON object"},
      {"missing keys", rawFile(R"({"w": {"dtype": "F32"}})", 0), "'w'"},
      {"bad dtype", rawFile(R"({"w": {"dtype": "X9", "shape": [1], "data_offsets": [0, 4]}})", 4), "unsupported dtype"},
      {"size mismatch", rawFile(R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 4]}})", 4), "needs 8 bytes"},
      {"out of bounds", rawFile(R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})", 4), "outside"},
      {"negative dim", rawFile(R"({"w": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}})", 4), "dimension"},
      {"overlap", rawFile(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}, "b": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})", 8), "overlaps"},
      {"metadata", rawFile(R"({"__metadata__": {"k": 1}})", 0), "__metadata__"},
  };
  for (const Case &c : cases) {
    std::string path = dir + "/bad.safetensors";
    spit(path, c.bytes);
    SafetensorsFile f;
    std::string err;
    EXPECT_FALSE(f.open(path, err)) << c.what;
    EXPECT_NE(err.find(path), std::string::npos) << c.what << ": " << err;
    EXPECT_NE(err.find(c.expect), std::string::npos) << c.what << ": " << err;
    EXPECT_EQ(err.find('\n'), std::string::npos) << c.what;
  }
  SafetensorsFile f;
  std::string err;
  EXPECT_FALSE(f.open(dir + "/missing.safetensors", err));
  EXPECT_NE(err.find("missing.safetensors"), std::string::npos);
}

TEST(Safetensors, ReadsOtherWritersLayout) {
  // Keys in any order, offsets not in key order, no padding, metadata first.
  std::string dir = tempDir(), path = dir + "/o.safetensors";
  std::string hdr = R"({"__metadata__":{"format":"pt"},"z":{"dtype":"I64","shape":[1],"data_offsets":[0,8]},"a":{"dtype":"F32","shape":[1,1],"data_offsets":[8,12]}})";
  std::string bytes = rawFile(hdr, 0);
  int64_t z = -5;
  float a = 0.5f;
  bytes.append(reinterpret_cast<const char *>(&z), 8);
  bytes.append(reinterpret_cast<const char *>(&a), 4);
  spit(path, bytes);
  SafetensorsFile f;
  std::string err;
  ASSERT_TRUE(f.open(path, err)) << err;
  EXPECT_EQ(f.entries()[0].name, "z");
  EXPECT_EQ(*static_cast<const int64_t *>(f.data(*f.find("z"))), -5);
  EXPECT_EQ(*static_cast<const float *>(f.data(*f.find("a"))), 0.5f);
}

// hc/base/files.h: the content hash behind checkpoint checksums and the
// library's init_hash, and file identity behind "outputs never overwrite
// inputs".
TEST(Files, HashFileIsTheContentHashOfItsBytes) {
  std::string d = tempDir();
  for (std::size_t n : {0u, 1u, 7u, 8u, 13u, 4099u}) {
    std::string bytes;
    for (std::size_t i = 0; i < n; ++i)
      bytes.push_back(static_cast<char>(i * 131 + 7));
    std::string p = d + "/h" + std::to_string(n);
    std::ofstream(p, std::ios::binary) << bytes;
    uint64_t h = 0;
    std::string err;
    ASSERT_TRUE(hashFile(p, h, err)) << err;
    EXPECT_EQ(h, contentHash(kContentHashSeed, bytes.data(), bytes.size())) << n;
  }
}

TEST(Files, HashFileSeesEveryByteAcrossChunks) {
  // 8 MiB chunks: a file of two and a bit chunks, one byte changed in each.
  std::string d = tempDir();
  std::string bytes(2 * (8u << 20) + 5, '\0');
  for (std::size_t i = 0; i < bytes.size(); ++i)
    bytes[i] = static_cast<char>((i * 2654435761u) >> 13);
  std::string p = d + "/big";
  std::ofstream(p, std::ios::binary) << bytes;
  uint64_t base = 0, h = 0;
  std::string err;
  ASSERT_TRUE(hashFile(p, base, err)) << err;
  const std::size_t chunk = 8u << 20;
  for (std::size_t at : {std::size_t{0}, chunk - 1, chunk,
                         bytes.size() - 1}) {
    std::string changed = bytes;
    changed[at] ^= 1;
    std::ofstream(p, std::ios::binary | std::ios::trunc) << changed;
    ASSERT_TRUE(hashFile(p, h, err)) << err;
    EXPECT_NE(h, base) << "byte " << at;
  }
  EXPECT_FALSE(hashFile(d + "/missing", h, err));
  EXPECT_NE(err.find("missing: cannot open"), std::string::npos) << err;
}

// The reference: contentHash folded over whole 8 MiB chunks, then the last
// partial one (an empty stream: one empty chunk), as hashFile defines it.
static uint64_t chunkedHash(const std::string &bytes) {
  const std::size_t chunk = ContentHasher::kChunk;
  uint64_t h = kContentHashSeed;
  std::size_t at = 0;
  for (; bytes.size() - at >= chunk; at += chunk)
    h = contentHash(h, bytes.data() + at, chunk);
  if (at < bytes.size() || bytes.empty())
    h = contentHash(h, bytes.data() + at, bytes.size() - at);
  return h;
}

TEST(Files, ContentHasherInAnyPiecesIsHashFile) {
  const std::size_t chunk = ContentHasher::kChunk;
  for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{8},
                        std::size_t{13}, chunk - 1, chunk, chunk + 3, 2 * chunk,
                        2 * chunk + 5}) {
    std::string bytes(n, '\0');
    for (std::size_t i = 0; i < n; ++i)
      bytes[i] = static_cast<char>((i * 2654435761u) >> 11);
    const uint64_t want = chunkedHash(bytes);
    // Pieces: whole, odd sizes that straddle words and chunks, and bytes.
    for (std::size_t piece : {n + 1, std::size_t{3}, std::size_t{1000003}, chunk + 1}) {
      ContentHasher hasher;
      for (std::size_t at = 0; at < n; at += piece)
        hasher.add(bytes.data() + at, std::min(piece, n - at));
      EXPECT_EQ(hasher.finish(), want) << n << " bytes in pieces of " << piece;
    }
    if (n <= 13) {
      ContentHasher hasher;
      for (char c : bytes)
        hasher.add(&c, 1);
      EXPECT_EQ(hasher.finish(), want) << n << " bytes one at a time";
    }
  }
}

TEST(Safetensors, WriterHashesWhatItWrites) {
  std::string d = tempDir();
  std::vector<float> a(3 << 20), b(5);  // a straddles an 8 MiB chunk
  for (std::size_t i = 0; i < a.size(); ++i)
    a[i] = static_cast<float>(i % 977) * 0.5f;
  std::string err;
  uint64_t written = 0, read = 0;
  ASSERT_TRUE(writeSafetensors(d + "/w.safetensors",
                               {{"a", "F32", {3, 1 << 20}, a.data()}, {"b", "F32", {5}, b.data()}},
                               {{"k", "v"}}, err, -1, &written)) << err;
  ASSERT_TRUE(hashFile(d + "/w.safetensors", read, err)) << err;
  EXPECT_EQ(written, read);
}

TEST(Files, SameFileByIdentityNotSpelling) {
  std::string d = tempDir();
  std::ofstream(d + "/a") << "a";
  std::ofstream(d + "/b") << "a";
  ASSERT_EQ(::link((d + "/a").c_str(), (d + "/hard").c_str()), 0);
  ASSERT_EQ(::symlink("a", (d + "/soft").c_str()), 0);
  EXPECT_TRUE(sameFile(d + "/a", d + "/./a"));
  EXPECT_TRUE(sameFile(d + "/a", d + "/hard"));
  EXPECT_TRUE(sameFile(d + "/soft", d + "/a"));
  EXPECT_FALSE(sameFile(d + "/a", d + "/b"));      // same bytes, other file
  EXPECT_FALSE(sameFile(d + "/a", d + "/absent")); // a missing file is none
}

namespace {
// This process's resident file-backed pages (RssFile), in KiB; -1 unknown.
long rssFileKb() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("RssFile:", 0) == 0)
      return std::strtol(line.c_str() + 8, nullptr, 10);
  return -1;
}
} // namespace

// Loading tensor by tensor and releasing each keeps the file from staying
// resident beside the copy (hc-run's parameter and checkpoint loading):
// release drops a tensor's pages from this process, and its data reads the
// same afterwards (faulted back in from the file). Neighbours sharing a
// page with a released tensor keep their bytes.
TEST(Safetensors, ReleaseDropsResidentPagesAndKeepsData) {
  std::string dir = tempDir(), path = dir + "/big.safetensors";
  const std::size_t n = 8u << 20;  // 32 MiB of float
  std::vector<float> big(n), small = {1.f, 2.f, 3.f};
  for (std::size_t i = 0; i < n; ++i)
    big[i] = static_cast<float>(i % 1000) * 0.5f;
  std::string err;
  ASSERT_TRUE(writeSafetensors(path,
                               {{"a", "F32", {3}, small.data()},
                                {"big", "F32", {static_cast<int64_t>(n)}, big.data()},
                                {"z", "F32", {3}, small.data()}},
                               {}, err))
      << err;
  SafetensorsFile f;
  ASSERT_TRUE(f.open(path, err)) << err;
  const SafetensorsEntry &e = *f.find("big");
  volatile float sum = 0;
  for (std::size_t i = 0; i < n; i += 1024)
    sum = sum + static_cast<const float *>(f.data(e))[i];
  long before = rssFileKb();
  f.release(e);
  long after = rssFileKb();
  if (before >= 0) {
    EXPECT_GE(before - after, 30 * 1024) << "RssFile " << before << " -> " << after << " KiB";
  }
  EXPECT_EQ(std::memcmp(f.data(e), big.data(), n * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(f.data(*f.find("a")), small.data(), 12), 0);
  EXPECT_EQ(std::memcmp(f.data(*f.find("z")), small.data(), 12), 0);
  f.release(*f.find("a"));
  EXPECT_EQ(std::memcmp(f.data(*f.find("z")), small.data(), 12), 0);
}
