// safetensors reading and writing: initial parameters, checkpoints, saved
// gradients. The format PyTorch users read (huggingface safetensors):
//   u64 little-endian N | N bytes of JSON header | raw tensor bytes
// header = {"NAME": {"dtype": "F32", "shape": [..], "data_offsets": [b, e]},
//           ..., "__metadata__": {"key": "value"}}, offsets relative to the
// byte after the header. Little-endian, C order.
//
// Reading memory-maps the file (a DiT-XL/2 checkpoint is 2.7 GB) and checks
// every entry (known dtype, size = product of shape x item size, offsets in
// bounds and not overlapping). Writing is atomic: a temporary file in the
// destination folder, fsync, rename over the destination, fsync the folder;
// on any failure the destination is untouched. Errors name the file and,
// where one is at fault, the tensor.
#ifndef HC_BASE_SAFETENSORS_H
#define HC_BASE_SAFETENSORS_H

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace hc::rt {

// "F32", "F64", "I64", "I32", "U8", "BOOL", "F16", "BF16": bytes per element,
// or 0 for a dtype this reader does not know.
std::size_t safetensorsItemSize(const std::string &dtype);

struct SafetensorsEntry {
  std::string name;
  std::string dtype;            // as in the file, e.g. "F32"
  std::vector<int64_t> shape;   // empty for a scalar
  std::size_t offset = 0;       // from the start of the data section
  std::size_t bytes = 0;
  std::size_t numElements() const;
};

// A read-only, memory-mapped safetensors file.
class SafetensorsFile {
public:
  SafetensorsFile() = default;
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile &) = delete;
  SafetensorsFile &operator=(const SafetensorsFile &) = delete;

  // Maps and validates `path`. False + a one-line `error` naming the file.
  bool open(const std::string &path, std::string &error);

  const std::string &path() const { return path_; }
  // Entries in file (offset) order.
  const std::vector<SafetensorsEntry> &entries() const { return entries_; }
  const SafetensorsEntry *find(const std::string &name) const;
  const void *data(const SafetensorsEntry &e) const {
    return data_ + e.offset;
  }
  const std::map<std::string, std::string> &metadata() const {
    return metadata_;
  }
  // Drops the pages holding `e` from this process's memory (they stay in
  // the page cache; reading data(e) again faults them back in). Loading
  // tensor by tensor and releasing each one keeps at most one tensor of a
  // file resident beside the copy it was loaded into.
  void release(const SafetensorsEntry &e) const;

private:
  std::string path_;
  void *map_ = nullptr;
  std::size_t mapSize_ = 0;
  const char *data_ = nullptr;
  std::vector<SafetensorsEntry> entries_;
  std::map<std::string, std::size_t> index_;
  std::map<std::string, std::string> metadata_;
};

// One tensor to write; `data` holds bytes = numElements x itemSize(dtype).
struct SafetensorsTensorRef {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
  const void *data = nullptr;
};

// Writes the tensors in the given order (names must be unique, not
// "__metadata__"), atomically. False + a one-line `error` naming the file.
// `crashAfterBytes` >= 0 is a test hook (checkpoint.cpp reads it from the
// environment): the process is SIGKILLed once that many bytes of the
// temporary file are written, as a machine crash would leave it.
bool writeSafetensors(const std::string &path,
                      const std::vector<SafetensorsTensorRef> &tensors,
                      const std::map<std::string, std::string> &metadata,
                      std::string &error, int64_t crashAfterBytes = -1,
                      uint64_t *fileHash = nullptr);  // hashFile's value, computed while writing

} // namespace hc::rt

#endif // HC_BASE_SAFETENSORS_H
