// The share of each batch the host decodes while the device decodes the rest (--host-decode-share
// auto): moved after each step toward whichever side the step did not wait for. The step waits
// for the host when its batch was not made in time (then less goes to the host, whatever else
// waited: the device's decoding of a late batch starts late too), and for the device decoder when
// its launch alone had to wait for the decoding to be enqueued (then more goes to the host).
// Batches are made a few ahead, so a change shows a few steps later: the balancer waits that long
// between changes, and halves its move each time the direction turns, down to a floor.
#pragma once

#include <cstdint>

namespace castor::train {

class DecodeBalancer {
public:
  // `share` to start from; changes `lag` steps apart at least.
  DecodeBalancer(double share, int64_t lag) : share_(share), lag_(lag) {}
  double share() const { return share_; }
  // After a step: the milliseconds it waited for the host's batch and for the device's decoding.
  // Returns whether the share changed.
  bool update(double hostWaitMs, double deviceWaitMs);

  static constexpr double kWaitMs = 0.5;   // waits below this are noise
  static constexpr double kFirstMove = 0.1, kSmallestMove = 0.01;

private:
  double share_;
  int64_t lag_, sinceChange_ = 0;
  double move_ = kFirstMove;
  int direction_ = 0; // of the last change: -1 less on the host, +1 more
};

} // namespace castor::train
