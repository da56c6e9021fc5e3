// Parsing and resolving Einsum equations (see EinsumEquation.h).
#include "EinsumEquation.h"

#include <algorithm>
#include <cctype>
#include <map>

namespace castor::onnx_import {
namespace {

// One term of the equation: its letters and where its ellipsis stands among them (-1: none).
struct Term {
  std::vector<int> letters;
  int ellipsisAt = -1;
};

std::optional<Term> parseTerm(const std::string &text, std::string &why) {
  Term t;
  for (size_t i = 0; i < text.size();) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (std::isalpha(c)) {
      t.letters.push_back(c);
      ++i;
    } else if (text.compare(i, 3, "...") == 0 && t.ellipsisAt < 0) {
      t.ellipsisAt = int(t.letters.size());
      i += 3;
    } else {
      why = "the term '" + text + "' has an unexpected '" + std::string(1, char(c)) + "'";
      return std::nullopt;
    }
  }
  return t;
}

// The term's labels with its ellipsis expanded to `dims` labels of the broadcast ellipsis of `total`.
std::vector<int> expand(const Term &t, int64_t dims, int64_t total) {
  std::vector<int> labels(t.letters.begin(), t.letters.end());
  if (t.ellipsisAt >= 0) {
    std::vector<int> ellipsis;
    for (int64_t k = total - dims; k < total; ++k)
      ellipsis.push_back(kEllipsisLabel + int(k));
    labels.insert(labels.begin() + t.ellipsisAt, ellipsis.begin(), ellipsis.end());
  }
  return labels;
}

} // namespace

std::string einsumLabelName(int label) {
  if (label >= kEllipsisLabel)
    return "ellipsis dimension " + std::to_string(label - kEllipsisLabel);
  return "'" + std::string(1, char(label)) + "'";
}

std::optional<EinsumLabels> resolveEinsum(const std::string &equation, const std::vector<int64_t> &ranks,
                                          std::string &why) {
  std::string eq;
  for (char c : equation)
    if (!std::isspace(static_cast<unsigned char>(c)))
      eq += c;
  const size_t arrow = eq.find("->");
  if (arrow != std::string::npos && eq.find("->", arrow + 2) != std::string::npos) {
    why = "the equation '" + equation + "' has more than one '->'";
    return std::nullopt;
  }
  const std::string lhs = eq.substr(0, arrow);
  std::vector<Term> terms;
  for (size_t start = 0;;) {
    const size_t comma = lhs.find(',', start);
    auto t = parseTerm(lhs.substr(start, comma == std::string::npos ? std::string::npos : comma - start), why);
    if (!t)
      return std::nullopt;
    terms.push_back(*t);
    if (comma == std::string::npos)
      break;
    start = comma + 1;
  }
  if (terms.size() != ranks.size()) {
    why = "the equation '" + equation + "' has " + std::to_string(terms.size()) + " input terms for " +
          std::to_string(ranks.size()) + " inputs";
    return std::nullopt;
  }
  // The ellipsis' dimensions in each operand and over all of them.
  std::vector<int64_t> ellipsisDims(terms.size(), 0);
  int64_t total = 0;
  for (size_t i = 0; i < terms.size(); ++i) {
    const int64_t letters = int64_t(terms[i].letters.size());
    const bool ellipsis = terms[i].ellipsisAt >= 0;
    if (letters > ranks[i] || (!ellipsis && letters != ranks[i])) {
      why = "input " + std::to_string(i) + " has rank " + std::to_string(ranks[i]) + " but its term names " +
            std::to_string(letters) + " axes" + (ellipsis ? " besides '...'" : "");
      return std::nullopt;
    }
    ellipsisDims[i] = ellipsis ? ranks[i] - letters : 0;
    total = std::max(total, ellipsisDims[i]);
  }
  EinsumLabels r;
  std::map<int, int> count;
  for (size_t i = 0; i < terms.size(); ++i) {
    r.inputs.push_back(expand(terms[i], ellipsisDims[i], total));
    for (int l : terms[i].letters)
      ++count[l];
  }
  if (arrow == std::string::npos) {
    r.output = expand(Term{{}, 0}, total, total);
    for (auto [label, n] : count) // std::map: in character order
      if (n == 1)
        r.output.push_back(label);
    return r;
  }
  auto out = parseTerm(eq.substr(arrow + 2), why);
  if (!out)
    return std::nullopt;
  if (out->ellipsisAt < 0 && total > 0) {
    why = "the inputs have '...' dimensions and the output names none";
    return std::nullopt;
  }
  r.output = expand(*out, total, total);
  for (size_t i = 0; i < out->letters.size(); ++i) {
    const int l = out->letters[i];
    if (!count.count(l)) {
      why = "the output's label " + einsumLabelName(l) + " is in no input";
      return std::nullopt;
    }
    if (std::count(out->letters.begin(), out->letters.end(), l) > 1) {
      why = "the output's label " + einsumLabelName(l) + " repeats";
      return std::nullopt;
    }
  }
  return r;
}

} // namespace castor::onnx_import
