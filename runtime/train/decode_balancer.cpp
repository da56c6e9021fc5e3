#include "train/decode_balancer.h"

#include <algorithm>

namespace castor::train {

bool DecodeBalancer::update(double hostWaitMs, double deviceWaitMs) {
  if (++sinceChange_ <= lag_)
    return false;
  int direction = 0;
  // A batch that came late from the host also came late to the device's decoder, which the
  // launch then waited for as well: a wait for the host decides alone.
  if (hostWaitMs > kWaitMs)
    direction = -1;
  else if (deviceWaitMs > kWaitMs)
    direction = +1;
  if (direction == 0)
    return false;
  if (direction_ != 0 && direction != direction_)
    move_ = std::max(kSmallestMove, move_ / 2);
  const double next = std::clamp(share_ + direction * move_, 0.0, 1.0);
  direction_ = direction;
  sinceChange_ = 0;
  if (next == share_)
    return false;
  share_ = next;
  return true;
}

} // namespace castor::train
