// The checks of a host-only test program: expect() prints each failed check and counts it;
// verdict() prints the summary and gives the exit status.
#pragma once

#include <cstdio>
#include <string>

namespace castor::test {

inline int &failedChecks() {
  static int n = 0;
  return n;
}

inline void expect(bool ok, const std::string &what) {
  if (!ok) {
    std::printf("FAIL %s\n", what.c_str());
    ++failedChecks();
  }
}

inline int verdict() {
  if (failedChecks()) {
    std::printf("%d FAILED\n", failedChecks());
    return 1;
  }
  std::printf("all passed\n");
  return 0;
}

} // namespace castor::test
