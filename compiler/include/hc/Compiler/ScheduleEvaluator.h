// Float64 evaluation of a schedule-level step (`hcs` dialect): the planned
// arenas, strided views, kernel calls and their order run exactly as the
// generated code runs them, but every hcs.call is computed by the reference
// evaluator's float64 semantics of the graph op it names. It checks the
// schedule (lowering, buffer plan, views, in-place updates) against the
// graph-level step without the float32 rounding of the runtime kernels.
#ifndef HC_COMPILER_SCHEDULEEVALUATOR_H
#define HC_COMPILER_SCHEDULEEVALUATOR_H

#include "hc/Compiler/Evaluator.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace hc {

class ScheduleEvaluator {
public:
  ScheduleEvaluator();
  ~ScheduleEvaluator();

  // Sizes the arenas for `step` (the function hc-lower-to-schedule made;
  // the module must outlive this object). Persistent arenas start at zero.
  bool init(mlir::func::FuncOp step, std::string &error);

  // Named persistent buffers: parameters "NAME", optimizer state
  // ("adamw.m:NAME", "adamw.step", ...), gradients "grad:NAME".
  std::vector<std::string> tensorNames() const;
  bool setTensor(const std::string &name, const EvalTensor &value,
                 std::string &error);
  bool getTensor(const std::string &name, EvalTensor &value,
                 std::string &error) const;

  // One step on one rank, `inputs` in hcs.input index order: activations and gradients are poisoned with NaN
  // first, so a read of anything the step did not write shows in the result.
  bool run(const std::vector<EvalTensor> &inputs, double &loss,
           std::string &error);

private:
  struct Impl;
  std::unique_ptr<Impl> impl;
};

} // namespace hc

#endif // HC_COMPILER_SCHEDULEEVALUATOR_H
