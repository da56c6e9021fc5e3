// Shape arithmetic evaluated at import. Exporters leave the computation of reshape targets,
// slice bounds and attention scales in the graph (Shape, Gather, Unsqueeze, Concat, Div, ...).
// Every shape is static once the batch is fixed, so such a node whose inputs are known at import
// is evaluated here and its output becomes a constant; only tensor math reaches the dialect.
#pragma once

#include "NodeImporter.h"

namespace castor::onnx_import {

enum class FoldResult {
  Folded,      // the output is now a constant
  NotConstant, // an input depends on the data; the node must be converted instead
  Failed,      // the node's inputs were known but it is invalid (error recorded)
};

// Whether an op type has an evaluator here.
bool hasFolder(const std::string &opType);

// Whether the op only computes on known values (Shape, Range, Equal, ...): such a node that
// cannot be folded is refused, since Castor has no kernel for it.
bool isFoldOnly(const std::string &opType);

// Evaluates `node` when every input is known: a Constant node's value, an integer initializer,
// an earlier folded output, or (for Shape and Size) any value of static type.
FoldResult foldNode(ImportState &state, const onnx::NodeProto &node);

// The first input of `node` that is not known at import, for error messages.
std::string firstUnknownInput(ImportState &state, const onnx::NodeProto &node);

} // namespace castor::onnx_import
