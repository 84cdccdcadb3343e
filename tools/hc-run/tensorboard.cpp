// TensorBoard event files: see tensorboard.h.
#include "tensorboard.h"

#include "common.h"

#include "hc/base/files.h"

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace hcrun {

namespace {

// Table-driven CRC-32C, reflected polynomial 0x82F63B78.
struct Crc32cTable {
  uint32_t t[256];
  Crc32cTable() {
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k)
        c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
      t[i] = c;
    }
  }
};

// Protocol-buffer encoding of the fields used: varints, fixed 32/64-bit
// values and length-delimited bytes, each behind its key (field << 3 | wire).
void varint(std::string &out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}
void key(std::string &out, int field, int wire) { varint(out, static_cast<uint64_t>(field) << 3 | wire); }
template <class T> void fixed(std::string &out, int field, T v) {
  key(out, field, sizeof(T) == 8 ? 1 : 5);
  char bytes[sizeof(T)];
  std::memcpy(bytes, &v, sizeof(T));  // little-endian, as x86-64 stores it
  out.append(bytes, sizeof(T));
}
void bytesField(std::string &out, int field, const std::string &b) {
  key(out, field, 2);
  varint(out, b.size());
  out += b;
}

// Event { double wall_time = 1; int64 step = 2; string file_version = 3;
//         Summary summary = 5; }
std::string eventHeader(int64_t step) {
  std::string e;
  const double wall = std::chrono::duration<double>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  fixed<double>(e, 1, wall);
  key(e, 2, 0);
  varint(e, static_cast<uint64_t>(step));
  return e;
}

} // namespace

uint32_t crc32c(const void *data, std::size_t n) {
  static const Crc32cTable table;
  const auto *p = static_cast<const unsigned char *>(data);
  uint32_t c = 0xffffffffu;
  for (std::size_t i = 0; i < n; ++i)
    c = table.t[(c ^ p[i]) & 0xff] ^ (c >> 8);
  return c ^ 0xffffffffu;
}

uint32_t maskedCrc32c(const void *data, std::size_t n) {
  const uint32_t c = crc32c(data, n);
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

void TensorBoardWriter::open(const std::string &dir) {
  if (hc::rt::isSymlink(dir))
    usageError("--tensorboard " + dir + " is a symbolic link, which hc-run does not "
               "write through: remove it or choose another folder");
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST)
    usageError("--tensorboard " + dir + ": cannot create the folder: " +
               std::strerror(errno));
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    usageError("--tensorboard " + dir + " is not a folder");
  char host[256] = "host";
  ::gethostname(host, sizeof host - 1);
  const long long now = static_cast<long long>(std::time(nullptr));
  path_ = dir + "/events.out.tfevents." + std::to_string(now) + "." + host + "." +
          std::to_string(::getpid());
  int fd = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                  0644);
  file_ = fd >= 0 ? fdopen(fd, "w") : nullptr;
  if (!file_)
    usageError("--tensorboard " + dir + ": cannot create " + path_ + ": " +
               std::strerror(errno));
  std::string e = eventHeader(0);
  bytesField(e, 3, "brain.Event:2");
  record(e);
}

void TensorBoardWriter::record(const std::string &event) {
  char head[12];
  const uint64_t n = event.size();
  std::memcpy(head, &n, 8);
  const uint32_t lengthCrc = maskedCrc32c(head, 8);
  std::memcpy(head + 8, &lengthCrc, 4);
  const uint32_t dataCrc = maskedCrc32c(event.data(), event.size());
  if (std::fwrite(head, 1, 12, file_) != 12 ||
      std::fwrite(event.data(), 1, event.size(), file_) != event.size() ||
      std::fwrite(&dataCrc, 1, 4, file_) != 4 || std::fflush(file_) != 0)
    throw Error(1, "--tensorboard " + path_ + ": write failed: " + std::strerror(errno));
}

void TensorBoardWriter::scalars(int64_t step,
                                const std::vector<std::pair<std::string, double>> &values) {
  if (!file_)
    return;
  // Summary { repeated Value value = 1; }
  // Value { string tag = 1; float simple_value = 2; }
  std::string summary;
  for (const auto &[tag, v] : values) {
    std::string value;
    bytesField(value, 1, tag);
    fixed<float>(value, 2, static_cast<float>(v));
    bytesField(summary, 1, value);
  }
  std::string e = eventHeader(step);
  bytesField(e, 5, summary);
  record(e);
}

void TensorBoardWriter::close() {
  if (file_)
    std::fclose(file_);
  file_ = nullptr;
}

} // namespace hcrun
