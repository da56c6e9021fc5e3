// All ops of the castor dialect.
#pragma once

#include "castor/Dialect/CastorDialect.h"

#define GET_OP_CLASSES
#include "castor/Dialect/NNOps.h.inc"
#define GET_OP_CLASSES
#include "castor/Dialect/TensorOps.h.inc"
#define GET_OP_CLASSES
#include "castor/Dialect/ElementwiseOps.h.inc"
#define GET_OP_CLASSES
#include "castor/Dialect/BackwardOps.h.inc"
#define GET_OP_CLASSES
#include "castor/Dialect/OptimizerOps.h.inc"
#define GET_OP_CLASSES
#include "castor/Dialect/FusedOps.h.inc"
