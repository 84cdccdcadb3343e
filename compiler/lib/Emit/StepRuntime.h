// The fixed part of every generated step library: the context, the
// interpreter loop over the emitted tables (per cluster on a CFTP plan) and
// the step ABI's entry points. EmitStep.cpp writes the tables before it.
#ifndef HC_COMPILER_EMIT_STEPRUNTIME_H
#define HC_COMPILER_EMIT_STEPRUNTIME_H

namespace hc {
const char *stepRuntimeSource();
} // namespace hc

#endif // HC_COMPILER_EMIT_STEPRUNTIME_H
