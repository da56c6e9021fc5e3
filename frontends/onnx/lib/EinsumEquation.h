// An ONNX Einsum equation resolved against its operands' ranks: every axis of every operand and
// of the output gets a label. Letters are their character codes; the dimensions an ellipsis
// stands for get labels kEllipsisLabel + k, numbered over the broadcast ellipsis of all operands
// (right-aligned, as NumPy broadcasts them).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace castor::onnx_import {

constexpr int kEllipsisLabel = 256;

struct EinsumLabels {
  std::vector<std::vector<int>> inputs; // per operand, per axis
  std::vector<int> output;
};

// The labels of `equation` ("bhid,bhjd->bhij", "...ij,...jk", spaces allowed) for operands of
// `ranks`; without "->" the output is the ellipsis' dimensions then the letters that occur once,
// in alphabetical order (NumPy's implicit mode). nullopt with `why` set for a malformed equation
// or one that does not fit the ranks. Repeated labels within an operand are returned as they are.
std::optional<EinsumLabels> resolveEinsum(const std::string &equation, const std::vector<int64_t> &ranks,
                                          std::string &why);

// "'i'" for a letter, "ellipsis dimension k" for a dimension of the ellipsis.
std::string einsumLabelName(int label);

} // namespace castor::onnx_import
