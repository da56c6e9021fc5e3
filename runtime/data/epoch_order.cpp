#include "data/epoch_order.h"

#include "data/random_streams.h"

#include <algorithm>
#include <numeric>
#include <string>

namespace castor::data {

std::vector<int64_t> shuffledOrder(uint64_t seed, uint32_t tag, int64_t epoch, int64_t count) {
  std::vector<int64_t> order(static_cast<size_t>(count));
  std::iota(order.begin(), order.end(), 0);
  const auto key = dataKey(seed, tag);
  for (int64_t i = count - 1; i > 0; --i) {
    auto w = weights::philox4x32_10({uint32_t(i), uint32_t(uint64_t(i) >> 32), uint32_t(epoch), 0}, key);
    const int64_t j = std::min(int64_t(u53(w[0], w[1]) * double(i + 1)), i);
    std::swap(order[size_t(i)], order[size_t(j)]);
  }
  return order;
}

void saveEpochPosition(DataPosition &position, int64_t epoch, int64_t cursor) {
  position["castor.data.epoch"] = std::to_string(epoch);
  position["castor.data.cursor"] = std::to_string(cursor);
}

Status restoreEpochPosition(const DataPosition &position, const char *what, int64_t &epoch, int64_t &cursor) {
  auto e = position.find("castor.data.epoch"), c = position.find("castor.data.cursor");
  if (e == position.end() || c == position.end())
    return Status::error(std::string("the state file holds no ") + what +
                         " position (castor.data.epoch, castor.data.cursor)");
  epoch = std::stoll(e->second);
  cursor = std::stoll(c->second);
  return Status::ok();
}

} // namespace castor::data
