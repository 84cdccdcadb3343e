// The sampler's model-call inputs (sample_mode.h's SamplerInputs).
#include "sample_mode.h"

#include <algorithm>

namespace hcrun {

SamplerInputs::SamplerInputs(const Description &d, const std::vector<CondInput> &conds,
                             bool flowTime, int64_t perCall, bool guided, int64_t nullClass,
                             bool nullLabel, const std::vector<bool> &nullConds,
                             const std::vector<int64_t> &labels, const CondData &data,
                             const std::vector<int64_t> &condRow)
    : conds_(conds), labels_(labels), condRow_(condRow), data_(data), flowTime_(flowTime), guided_(guided), nullLabel_(nullLabel),
      perCall_(perCall), nullClass_(nullClass), nullConds_(nullConds) {
  const TensorSpec *x = d.input("x_t");
  batch_ = x->shape[0];
  d_ = static_cast<int64_t>(x->numElements()) / batch_;
  xt_.assign(static_cast<std::size_t>(batch_ * d_), 0.0f);
  tf_.assign(static_cast<std::size_t>(batch_), 0.0f);
  t_.assign(static_cast<std::size_t>(batch_), 0);
  y_.assign(static_cast<std::size_t>(batch_), 0);
  for (const CondInput &c : conds) {
    cond_.emplace_back(static_cast<std::size_t>(batch_) * c.elems, 0.0f);
    drop_.emplace_back(static_cast<std::size_t>(batch_), 0.0f);
  }
  ptrs_.assign(d.inputs.size(), nullptr);
  for (std::size_t i = 0; i < d.inputs.size(); ++i) {
    const std::string &n = d.inputs[i].name;
    if (n == "x_t")
      ptrs_[i] = xt_.data();
    else if (n == "t")
      ptrs_[i] = flowTime_ ? static_cast<const void *>(tf_.data()) : t_.data();
    else if (n == "y")
      ptrs_[i] = y_.data();
  }
  for (std::size_t k = 0; k < conds.size(); ++k) {
    ptrs_[conds[k].input] = cond_[k].data();
    if (conds[k].dropInput >= 0)
      ptrs_[conds[k].dropInput] = drop_[k].data();
  }
  for (std::size_t i = 0; i < ptrs_.size(); ++i)
    if (!ptrs_[i])  // modelFacts() accepted only these inputs
      throw Error(1, "sampler input '" + d.inputs[i].name + "' has no buffer");
}

void SamplerInputs::setChunk(int64_t first, int64_t n) {
  std::fill(xt_.begin(), xt_.end(), 0.0f);
  for (int64_t j = 0; j < perCall_; ++j) {
    const bool real = j < n;
    y_[j] = real && !labels_.empty() ? labels_[first + j] : 0;
    if (guided_)
      y_[perCall_ + j] = nullLabel_ ? nullClass_ : y_[j];
    for (std::size_t k = 0; k < conds_.size(); ++k) {
      const CondInput &c = conds_[k];
      float *row = &cond_[k][static_cast<std::size_t>(j) * c.elems];
      if (real)
        c.write(data_.row(k, condRow_[first + j]), false, false, row, &drop_[k][j]);
      else
        std::fill(row, row + c.elems, 0.0f), drop_[k][j] = 0.0f;
      // The guided twin: the same condition, or its null form.
      if (guided_)
        c.write(row, nullConds_[k], false,
                &cond_[k][static_cast<std::size_t>(perCall_ + j) * c.elems],
                &drop_[k][perCall_ + j]);
    }
  }
}

void SamplerInputs::setImage(int64_t j, const float *x) {
  std::copy(x, x + d_, xt_.begin() + j * d_);
  if (guided_)
    std::copy(x, x + d_, xt_.begin() + (perCall_ + j) * d_);
}

void SamplerInputs::setTime(double t) {
  std::fill(tf_.begin(), tf_.end(), static_cast<float>(t));
  std::fill(t_.begin(), t_.end(), static_cast<int64_t>(t));
}

void SamplerInputs::dump(const std::string &dir) const {
  writeNpyOrFail(dir + "/y.npy", "i8", {batch_}, y_.data());
  for (std::size_t k = 0; k < conds_.size(); ++k) {
    std::vector<int64_t> shape = {batch_};
    shape.insert(shape.end(), conds_[k].sampleShape.begin(), conds_[k].sampleShape.end());
    writeNpyOrFail(dir + "/cond_" + conds_[k].name + ".npy", "f4", shape, cond_[k].data());
    if (conds_[k].dropInput >= 0)
      writeNpyOrFail(dir + "/cond_" + conds_[k].name + "_drop.npy", "f4", {batch_},
                     drop_[k].data());
  }
}

} // namespace hcrun
