// Converters of ONNX ops that Castor composes from its own ops (ComposedConverters.cpp): the
// composition's gradient is the op's, so no new kernel or VJP is needed.
#pragma once

#include "NodeImporter.h"

namespace castor::onnx_import {

// PRelu: relu(x) + slope * (x - relu(x)), the slope a trained tensor broadcast over x.
mlir::LogicalResult convertPRelu(NodeImporter &n);

} // namespace castor::onnx_import
