// TensorBoard event files (hc-run --tensorboard DIR), written directly: the
// TFRecord framing (length, masked CRC-32C of the length, the record, its
// masked CRC-32C) around Event protocol buffers holding scalar summaries.
// No TensorFlow or protobuf library: the three messages used are encoded by
// hand (tensorflow/core/util/event.proto, framework/summary.proto).
#ifndef HC_RUN_TENSORBOARD_H
#define HC_RUN_TENSORBOARD_H

#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace hcrun {

// CRC-32C (Castagnoli), and TFRecord's mask of it.
uint32_t crc32c(const void *data, std::size_t n);
uint32_t maskedCrc32c(const void *data, std::size_t n);

class TensorBoardWriter {
public:
  // Creates DIR when missing (its parent must exist) and a new event file in
  // it, events.out.tfevents.<seconds>.<host>.<pid>, never following a link
  // nor replacing a file; its first record is the file_version event.
  // Throws Error(2) naming the flag and what is wrong.
  void open(const std::string &dir);
  bool isOpen() const { return file_ != nullptr; }
  // One event at `step` with these scalars; flushed so that a TensorBoard
  // watching the folder sees it at once. Throws Error(1) when a write fails.
  void scalars(int64_t step, const std::vector<std::pair<std::string, double>> &values);
  void close();
  ~TensorBoardWriter() { close(); }
  const std::string &path() const { return path_; }

private:
  void record(const std::string &event);
  std::FILE *file_ = nullptr;
  std::string path_;
};

} // namespace hcrun

#endif // HC_RUN_TENSORBOARD_H
