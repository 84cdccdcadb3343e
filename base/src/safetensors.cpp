#include "hc/base/safetensors.h"
#include "hc/base/files.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <csignal>
#include <cstdio>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace hc::rt {

std::size_t safetensorsItemSize(const std::string &dtype) {
  if (dtype == "F32" || dtype == "I32" || dtype == "U32")
    return 4;
  if (dtype == "F64" || dtype == "I64" || dtype == "U64")
    return 8;
  if (dtype == "F16" || dtype == "BF16" || dtype == "I16" || dtype == "U16")
    return 2;
  if (dtype == "U8" || dtype == "I8" || dtype == "BOOL")
    return 1;
  return 0;
}

std::size_t SafetensorsEntry::numElements() const {
  std::size_t n = 1;
  for (int64_t d : shape)
    n *= static_cast<std::size_t>(d);
  return n;
}

void SafetensorsFile::release(const SafetensorsEntry &e) const {
  if (!map_ || e.bytes == 0)
    return;
  // Whole pages around the tensor: the mapping is read-only, so a page a
  // neighbour shares just faults back in from the file when it is read.
  const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  const char *base = static_cast<const char *>(map_);
  const std::size_t at = static_cast<std::size_t>(data_ + e.offset - base);
  std::size_t lo = at / page * page;
  std::size_t hi = std::min(mapSize_, at + e.bytes);
  madvise(const_cast<char *>(base) + lo, hi - lo, MADV_DONTNEED);
}

SafetensorsFile::~SafetensorsFile() {
  if (map_)
    munmap(map_, mapSize_);
}

const SafetensorsEntry *SafetensorsFile::find(const std::string &name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &entries_[it->second];
}

namespace {
constexpr uint64_t kMaxHeader = 100u << 20; // as the reference implementation


std::string shapeString(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i)
    s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "]";
}
} // namespace

bool SafetensorsFile::open(const std::string &path, std::string &error) {
  path_ = path;
  auto fail = [&](const std::string &why) {
    error = path + ": " + why;
    return false;
  };
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return fail(std::string("cannot open: ") + std::strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return fail("not a regular file");
  }
  std::size_t size = static_cast<std::size_t>(st.st_size);
  if (size < 8) {
    ::close(fd);
    return fail("not a safetensors file (" + std::to_string(size) +
                " bytes, shorter than the 8-byte header length)");
  }
  void *m = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (m == MAP_FAILED)
    return fail(std::string("cannot map: ") + std::strerror(errno));
  map_ = m;
  mapSize_ = size;
  const unsigned char *b = static_cast<const unsigned char *>(m);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i)
    n = (n << 8) | b[i];
  if (n > kMaxHeader || n > size - 8)
    return fail("not a safetensors file (header length " + std::to_string(n) +
                " does not fit in " + std::to_string(size) + " bytes)");
  data_ = reinterpret_cast<const char *>(b) + 8 + n;
  std::size_t dataSize = size - 8 - n;

  nlohmann::json header;
  try {
    header = nlohmann::json::parse(reinterpret_cast<const char *>(b) + 8,
                                   reinterpret_cast<const char *>(b) + 8 + n);
  } catch (const nlohmann::json::exception &e) {
    return fail(std::string("malformed JSON header: ") + e.what());
  }
  if (!header.is_object())
    return fail("malformed header: not a JSON object");
  entries_.clear();
  index_.clear();
  metadata_.clear();
  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string &name = it.key();
    const nlohmann::json &v = it.value();
    if (name == "__metadata__") {
      if (!v.is_object())
        return fail("__metadata__ is not an object");
      for (auto m2 = v.begin(); m2 != v.end(); ++m2) {
        if (!m2.value().is_string())
          return fail("__metadata__ value of '" + m2.key() +
                      "' is not a string");
        metadata_[m2.key()] = m2.value().get<std::string>();
      }
      continue;
    }
    auto bad = [&](const std::string &why) {
      return fail("tensor '" + name + "': " + why);
    };
    if (!v.is_object() || !v.contains("dtype") || !v.contains("shape") ||
        !v.contains("data_offsets"))
      return bad("entry needs dtype, shape and data_offsets");
    SafetensorsEntry e;
    e.name = name;
    if (!v["dtype"].is_string())
      return bad("dtype is not a string");
    e.dtype = v["dtype"].get<std::string>();
    std::size_t item = safetensorsItemSize(e.dtype);
    if (item == 0)
      return bad("unsupported dtype '" + e.dtype + "'");
    if (!v["shape"].is_array())
      return bad("shape is not an array");
    long double elems = 1;
    for (const auto &d : v["shape"]) {
      if (!d.is_number_integer() || d.get<int64_t>() < 0)
        return bad("shape has a dimension that is not a non-negative integer");
      e.shape.push_back(d.get<int64_t>());
      elems *= static_cast<long double>(e.shape.back());
    }
    const auto &off = v["data_offsets"];
    if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() ||
        !off[1].is_number_unsigned())
      return bad("data_offsets must be two non-negative integers");
    uint64_t begin = off[0].get<uint64_t>(), end = off[1].get<uint64_t>();
    if (begin > end || end > dataSize)
      return bad("data_offsets [" + std::to_string(begin) + ", " +
                 std::to_string(end) + "] outside the " +
                 std::to_string(dataSize) + "-byte data section");
    if (elems * item != static_cast<long double>(end - begin))
      return bad(e.dtype + " " + shapeString(e.shape) + " needs " +
                 std::to_string(static_cast<unsigned long long>(elems * item)) +
                 " bytes, data_offsets give " + std::to_string(end - begin));
    e.offset = begin;
    e.bytes = end - begin;
    entries_.push_back(std::move(e));
  }
  std::sort(entries_.begin(), entries_.end(),
            [](const SafetensorsEntry &a, const SafetensorsEntry &b2) {
              return a.offset < b2.offset ||
                     (a.offset == b2.offset && a.bytes < b2.bytes);
            });
  for (std::size_t i = 0; i < entries_.size(); ++i) {
    if (i > 0 && entries_[i].bytes > 0 &&
        entries_[i].offset < entries_[i - 1].offset + entries_[i - 1].bytes)
      return fail("tensor '" + entries_[i].name + "' overlaps tensor '" +
                  entries_[i - 1].name + "'");
    index_[entries_[i].name] = i;
  }
  return true;
}

bool writeSafetensors(const std::string &path,
                      const std::vector<SafetensorsTensorRef> &tensors,
                      const std::map<std::string, std::string> &metadata,
                      std::string &error, int64_t crashAfterBytes, uint64_t *fileHash) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) {
    nlohmann::ordered_json md = nlohmann::ordered_json::object();
    for (const auto &kv : metadata)
      md[kv.first] = kv.second;
    header["__metadata__"] = md;
  }
  std::vector<std::size_t> sizes;
  std::size_t offset = 0;
  for (const auto &t : tensors) {
    auto bad = [&](const std::string &why) {
      error = path + ": tensor '" + t.name + "': " + why;
      return false;
    };
    if (t.name.empty() || t.name == "__metadata__")
      return bad("invalid tensor name");
    if (header.contains(t.name))
      return bad("duplicate tensor name");
    std::size_t item = safetensorsItemSize(t.dtype);
    if (item == 0)
      return bad("unsupported dtype '" + t.dtype + "'");
    std::size_t n = item;
    for (int64_t d : t.shape) {
      if (d < 0)
        return bad("negative dimension");
      n *= static_cast<std::size_t>(d);
    }
    if (n > 0 && !t.data)
      return bad("no data");
    nlohmann::ordered_json e;
    e["dtype"] = t.dtype;
    e["shape"] = t.shape;
    e["data_offsets"] = {offset, offset + n};
    header[t.name] = e;
    sizes.push_back(n);
    offset += n;
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const nlohmann::json::exception &e) {
    error = path + ": cannot encode header: " + e.what();
    return false;
  }
  text.append((8 - text.size() % 8) % 8, ' ');
  unsigned char len[8];
  uint64_t n = text.size();
  for (int i = 0; i < 8; ++i)
    len[i] = static_cast<unsigned char>(n >> (8 * i));

  AtomicFile f;
  if (!f.open(path, error))
    return false;
  f.crashAfterBytes = crashAfterBytes;
  ContentHasher hasher;
  if (fileHash)
    f.hasher = &hasher;
  bool ok = f.write(len, 8) && f.write(text.data(), text.size());
  for (std::size_t i = 0; ok && i < tensors.size(); ++i)
    ok = f.write(tensors[i].data, sizes[i]);
  if (!ok) {
    error = f.error();
    return false;
  }
  if (fileHash)
    *fileHash = hasher.finish();
  return f.commit(error);
}

} // namespace hc::rt
