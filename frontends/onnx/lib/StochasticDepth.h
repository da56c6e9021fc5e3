// torchvision's StochasticDepth (drop path, "row" mode) as exported in training mode:
//   u = RandomUniformLike(zeros [N, 1, ..., 1]); keep = Less(u, p); m = Cast(keep, float);
//   m = Div(m, p); y = Mul(x, m)
// The chain is recognised before conversion and replaced by one per-sample dropout of x with
// ratio 1 - p, which draws its mask from the dropout op's seeded generator.
#pragma once

#include "OnnxModel.h"

#include <map>
#include <string>
#include <set>
#include <vector>

namespace castor::onnx_import {

struct DropPath {
  int dataInput = 0;            // which input of the final Mul is x
  double ratio = 0.0;           // 1 - p
  std::string maskLike;         // RandomUniformLike's input, [N, 1, ..., 1] (folded at import)
};

struct DropPaths {
  std::set<const onnx::NodeProto *> absorbed;             // RandomUniformLike, Less, Cast, Div
  std::map<const onnx::NodeProto *, DropPath> replaced;   // the final Mul
};

// Every complete chain of the pattern; nodes of an incomplete one are left alone (and refused
// later as unsupported).
DropPaths findDropPaths(const OnnxModel &model, const std::string &baseDir);

} // namespace castor::onnx_import
