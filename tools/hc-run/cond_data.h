// Conditioning beyond labels (models/conditioning.py): which of a graph's
// inputs are conditionings, and the NPY files (--cond NAME=FILE.npy) that
// feed them sample by sample, aligned with --data.
//
//   vector:NAME:D    NAME float32 [B, D], NAME_drop float32 [B]
//   concat:NAME:C    NAME float32 [B, C, H, W] (x_t's H and W), no drop input:
//                    its null form is a zero field, made by the trainer
//   tokens:NAME:L:D  NAME float32 [B, L, D], NAME_drop float32 [B]
//
// NAME_drop = 1 selects the graph's learned null form of that sample.
#ifndef HC_RUN_COND_DATA_H
#define HC_RUN_COND_DATA_H

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace hcrun {

struct Description;
class MappedNpy;

// One --cond NAME=FILE.npy (or --val-cond) as given.
struct CondFlag {
  std::string name, path;
};
// "NAME=FILE.npy" -> CondFlag; refuses (exit 2) anything else, and a NAME
// given twice in `seen`.
CondFlag parseCondFlag(const std::string &flag, const std::string &value,
                       const std::vector<CondFlag> &seen);

// Element i of a sample whose rows (its last axis, `width` values) are read
// mirrored left-right when `mirror` (--hflip): column c from width - 1 - c.
inline std::size_t mirroredIndex(std::size_t i, bool mirror, std::size_t width) {
  return mirror ? i - i % width + (width - 1 - i % width) : i;
}

// "NAME=<value(flag)>,..." over `flags` (already ordered by name); `none`
// when there are none. For identities, checkpoints and messages.
std::string joinCondFlags(const std::vector<CondFlag> &flags,
                          const std::function<std::string(const CondFlag &)> &value,
                          const std::string &none);

enum class CondKind { Vector, Field, Tokens };
const char *condKindName(CondKind k);

// One conditioning input of a graph.
struct CondInput {
  std::string name;
  CondKind kind = CondKind::Vector;
  int input = -1;      // NAME's position in the description's inputs
  int dropInput = -1;  // NAME_drop's; -1 for fields
  std::vector<int64_t> sampleShape;  // NAME's shape without the batch
  std::size_t elems = 0;             // per sample
  bool graphDrops = false;  // the graph's own random draws drop it (hc-run does not)
  // "vector [5]", "field [2,8,8]", "tokens [7,16]": for messages.
  std::string describe() const;
  // One sample's input: `src` (mirrored left-right when `mirror`), or the
  // null form when `null`: a zero field, or the source with *drop = 1 (the
  // graph swaps in its learned null embedding). *drop is 0 otherwise.
  void write(const float *src, bool null, bool mirror, float *out, float *drop) const;
};

// The graph's conditionings, in dit_config.conds' order where the metadata
// lists them (each checked against the inputs), else found from the inputs
// themselves: an input NAME beside NAME_drop (rank 2: a vector, rank 3:
// tokens), or a float32 [B, C, H, W] input of x_t's H and W (a field).
// `isOwn(name)` says which inputs are the graph's own (x_t, t, ...); any
// other input that is none of these is refused, naming it and `own` (the
// inputs isOwn accepts, in words). Throws Error(2).
std::vector<CondInput> condInputsOf(const Description &d, const std::string &lib,
                                    const std::vector<int64_t> &xtShape,
                                    bool (*isOwn)(const std::string &), const std::string &own);

// The files feeding a graph's conditionings: one per CondInput, each
// float32 [N, sample shape] with N = `samples` (the data's count).
class CondData {
public:
  CondData();
  ~CondData();
  // Opens and checks `given` against `graph`: every conditioning must be
  // given and every given name must be one; shape, dtype and count as --data
  // is checked. `flag` names the flag in errors ("--cond", "--val-cond"),
  // `dataFlag` the file the count comes from; samples < 0: the first file's
  // count, which the others must share. Throws Error(2).
  void open(const std::vector<CondFlag> &given, const std::vector<CondInput> &graph,
            int64_t samples, const std::string &flag, const std::string &dataFlag,
            const std::string &lib);
  std::size_t size() const { return files_.size(); }
  int64_t samples() const { return samples_; }
  // Sample `row` of conditioning k (graph order).
  const float *row(std::size_t k, int64_t row) const;
  const MappedNpy &file(std::size_t k) const { return *files_[k]; }
  // "" when row `row` of every file is finite, else one line naming the
  // file, the sample and the element.
  std::string nonFinite(int64_t row) const;

private:
  std::string flag_;
  int64_t samples_ = 0;
  std::vector<std::unique_ptr<MappedNpy>> files_;
  std::vector<std::size_t> elems_;
};

} // namespace hcrun

#endif // HC_RUN_COND_DATA_H
