// The passes that lower a castor function to plan-level form, declared in PlanPasses.td:
// castor-select-kernels, castor-plan-views, then castor-plan-memory.
#pragma once

#include "castor/Dialect/CastorDialect.h"

#include "mlir/Pass/Pass.h"

namespace castor {

#define GEN_PASS_DECL
#include "castor/Plan/PlanPasses.h.inc"

#define GEN_PASS_REGISTRATION
#include "castor/Plan/PlanPasses.h.inc"

} // namespace castor
