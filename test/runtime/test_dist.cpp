// The communication layer of data-parallel training (runtime/dist): the launcher's environment,
// and the TCP communicator with its replicas as threads of this process on 127.0.0.1: exact
// rank-order sums on every replica, and bounded, named failures when a replica goes missing.
#include "dist/communicator.h"
#include "dist/launch_env.h"
#include "dist/socket_io.h"
#include "dist/tcp_communicator.h"
#include "dist/wire_format.h"

#include "castor/float_convert.h"

#include <catch2/catch.hpp>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <thread>

using namespace castor;
using namespace castor::dist;
using namespace std::chrono_literals;

namespace {

// Clears the launcher variables for one test and puts back what was there.
class LauncherEnvironment {
public:
  LauncherEnvironment() {
    for (const char *name : kNames) {
      if (const char *value = std::getenv(name))
        saved_[name] = value;
      ::unsetenv(name);
    }
  }
  ~LauncherEnvironment() {
    for (const char *name : kNames) {
      auto it = saved_.find(name);
      if (it != saved_.end())
        ::setenv(name, it->second.c_str(), 1);
      else
        ::unsetenv(name);
    }
  }
  void set(const char *name, const char *value) { ::setenv(name, value, 1); }

private:
  static constexpr const char *kNames[] = {"RANK",         "WORLD_SIZE",   "LOCAL_RANK",   "MASTER_ADDR",
                                           "MASTER_PORT",  "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"};
  std::map<std::string, std::string> saved_;
};

std::string envError(const std::function<void(LauncherEnvironment &)> &setUp) {
  LauncherEnvironment env;
  setUp(env);
  auto parsed = replicaEnvFromEnvironment();
  return parsed ? std::string("(no error)") : parsed.message();
}

int freePort() {
  auto listener = listenOn(0);
  REQUIRE(listener);
  return listeningPort(*listener);
}

ReplicaEnv replica(int rank, int world, int port) { return {rank, world, rank, "127.0.0.1", port}; }

// Runs body(rank) on `world` threads at once; Catch's checks stay on this thread, after.
template <typename Body> void onThreads(int world, Body body) {
  std::vector<std::thread> threads;
  for (int rank = 0; rank < world; ++rank)
    threads.emplace_back([&body, rank] { body(rank); });
  for (auto &t : threads)
    t.join();
}

double secondsSince(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// Values over many magnitudes, so that the order of the sum shows in its bits.
std::vector<double> mixedValues(int rank, size_t count) {
  std::vector<double> values(count);
  uint64_t state = 0x9E3779B97F4A7C15ull * uint64_t(rank + 1);
  for (auto &v : values) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    double unit = double(state >> 11) * 0x1.0p-53 * 2.0 - 1.0;
    int exponent = int((state >> 3) % 17) - 8;
    v = unit * std::pow(10.0, exponent);
  }
  return values;
}

template <typename T> bool sameBits(const std::vector<T> &a, const std::vector<T> &b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

} // namespace

TEST_CASE("replicaEnvFromEnvironment reads torchrun's and Slurm's variables", "[dist]") {
  SECTION("nothing set: one replica alone") {
    LauncherEnvironment env;
    auto parsed = replicaEnvFromEnvironment();
    REQUIRE(parsed);
    CHECK(parsed->rank == 0);
    CHECK(parsed->worldSize == 1);
    CHECK(parsed->localRank == 0);
    CHECK(parsed->masterAddr.empty());
  }
  SECTION("torchrun") {
    LauncherEnvironment env;
    env.set("RANK", "5");
    env.set("WORLD_SIZE", "8");
    env.set("LOCAL_RANK", "1");
    env.set("MASTER_ADDR", "node17");
    env.set("MASTER_PORT", "29500");
    auto parsed = replicaEnvFromEnvironment();
    REQUIRE(parsed);
    CHECK(parsed->rank == 5);
    CHECK(parsed->worldSize == 8);
    CHECK(parsed->localRank == 1);
    CHECK(parsed->masterAddr == "node17");
    CHECK(parsed->masterPort == 29500);
  }
  SECTION("Slurm") {
    LauncherEnvironment env;
    env.set("SLURM_PROCID", "3");
    env.set("SLURM_NTASKS", "4");
    env.set("SLURM_LOCALID", "3");
    env.set("MASTER_ADDR", "10.0.0.1");
    env.set("MASTER_PORT", "1234");
    auto parsed = replicaEnvFromEnvironment();
    REQUIRE(parsed);
    CHECK(parsed->rank == 3);
    CHECK(parsed->worldSize == 4);
    CHECK(parsed->localRank == 3);
    CHECK(parsed->masterAddr == "10.0.0.1");
    CHECK(parsed->masterPort == 1234);
  }
  SECTION("torchrun under Slurm: torchrun's variables win; LOCAL_RANK defaults to RANK") {
    LauncherEnvironment env;
    env.set("SLURM_PROCID", "0");
    env.set("SLURM_NTASKS", "1");
    env.set("RANK", "1");
    env.set("WORLD_SIZE", "2");
    env.set("MASTER_ADDR", "localhost");
    env.set("MASTER_PORT", "29500");
    auto parsed = replicaEnvFromEnvironment();
    REQUIRE(parsed);
    CHECK(parsed->rank == 1);
    CHECK(parsed->worldSize == 2);
    CHECK(parsed->localRank == 1);
  }
  SECTION("a single Slurm task needs no master") {
    LauncherEnvironment env;
    env.set("SLURM_PROCID", "0");
    env.set("SLURM_NTASKS", "1");
    auto parsed = replicaEnvFromEnvironment();
    REQUIRE(parsed);
    CHECK(parsed->worldSize == 1);
  }
}

TEST_CASE("replicaEnvFromEnvironment names the variable at fault", "[dist]") {
  auto torchrun = [](const char *rank, const char *world) {
    return [rank, world](LauncherEnvironment &env) {
      env.set("RANK", rank);
      env.set("WORLD_SIZE", world);
      env.set("MASTER_ADDR", "127.0.0.1");
      env.set("MASTER_PORT", "29500");
    };
  };
  using Catch::Matchers::Contains;
  CHECK_THAT(envError(torchrun("4", "4")), Contains("RANK=4 is not below WORLD_SIZE=4"));
  CHECK_THAT(envError(torchrun("x", "4")), Contains("RANK='x' is not an integer"));
  CHECK_THAT(envError(torchrun("1", "4 ")), Contains("WORLD_SIZE='4 ' is not an integer"));
  CHECK_THAT(envError(torchrun("-1", "4")), Contains("RANK='-1' is out of range"));
  CHECK_THAT(envError(torchrun("0", "0")), Contains("WORLD_SIZE='0' is out of range"));
  CHECK_THAT(envError(torchrun("0", "99999999999999999999")), Contains("WORLD_SIZE='99999999999999999999' is out of range"));
  CHECK_THAT(envError([](LauncherEnvironment &env) { env.set("RANK", "0"); }),
             Contains("RANK is set but WORLD_SIZE is not"));
  CHECK_THAT(envError([](LauncherEnvironment &env) { env.set("WORLD_SIZE", "2"); }),
             Contains("WORLD_SIZE is set but RANK is not"));
  CHECK_THAT(envError([&](LauncherEnvironment &env) {
               torchrun("1", "2")(env);
               env.set("LOCAL_RANK", "two");
             }),
             Contains("LOCAL_RANK='two' is not an integer"));
  CHECK_THAT(envError([&](LauncherEnvironment &env) {
               torchrun("1", "2")(env);
               env.set("MASTER_PORT", "70000");
             }),
             Contains("MASTER_PORT='70000' is out of range"));
  CHECK_THAT(envError([&](LauncherEnvironment &env) {
               torchrun("1", "2")(env);
               env.set("MASTER_PORT", "port");
             }),
             Contains("MASTER_PORT='port' is not an integer"));
  CHECK_THAT(envError([&](LauncherEnvironment &env) {
               torchrun("1", "2")(env);
               ::unsetenv("MASTER_ADDR");
             }),
             Contains("MASTER_ADDR is not set"));
  CHECK_THAT(envError([&](LauncherEnvironment &env) {
               torchrun("1", "2")(env);
               ::unsetenv("MASTER_PORT");
             }),
             Contains("MASTER_PORT is not set"));
  CHECK_THAT(envError([](LauncherEnvironment &env) {
               env.set("SLURM_PROCID", "1");
               env.set("SLURM_NTASKS", "2");
             }),
             Contains("MASTER_ADDR is not set") && Contains("scontrol show hostnames"));
  CHECK_THAT(envError([](LauncherEnvironment &env) {
               env.set("SLURM_PROCID", "2");
               env.set("SLURM_NTASKS", "2");
               env.set("MASTER_ADDR", "n1");
               env.set("MASTER_PORT", "1");
             }),
             Contains("SLURM_PROCID=2 is not below SLURM_NTASKS=2"));
  CHECK_THAT(envError([](LauncherEnvironment &env) { env.set("SLURM_PROCID", "0"); }),
             Contains("SLURM_PROCID is set but SLURM_NTASKS is not"));
}

TEST_CASE("LocalCommunicator and a TcpCommunicator of one replica leave the data as it is", "[dist]") {
  std::vector<float> data{1.5f, -2.0f};
  LocalCommunicator local;
  CHECK(local.allReduce(data.data(), data.size(), plan::F32, ReduceOp::Sum));
  CHECK(local.broadcast(data.data(), 8, 0));
  CHECK(local.barrier());
  CHECK_FALSE(local.allReduce(data.data(), data.size(), plan::DTYPE_UNSPECIFIED, ReduceOp::Sum));
  auto alone = TcpCommunicator::connect(ReplicaEnv{}, 500ms);
  REQUIRE(alone);
  CHECK((*alone)->worldSize() == 1);
  CHECK((*alone)->allReduce(data.data(), data.size(), plan::F32, ReduceOp::Sum));
  CHECK((*alone)->barrier());
  CHECK(data == std::vector<float>{1.5f, -2.0f});
}

TEST_CASE("TcpCommunicator: all_reduce sums in rank order, the same bits on every replica", "[dist]") {
  constexpr int kWorld = 3;
  // Big enough for several 1 MiB pieces (f64: 3.2 MB).
  constexpr size_t kCount = 400000;
  const int port = freePort();

  struct Results {
    std::string error;
    std::vector<float> f32, f32Max;
    std::vector<double> f64;
    std::vector<int64_t> i64;
    std::vector<uint16_t> f16, bf16;
    std::vector<uint8_t> fromRoot0, fromRoot2;
    std::vector<float> empty;
  };
  std::vector<Results> results(kWorld);
  auto inputs = [](int rank, Results &r) {
    auto values = mixedValues(rank, kCount);
    for (double v : values) {
      r.f32.push_back(float(v));
      r.f64.push_back(v);
      r.f16.push_back(doubleToHalf(v * 1e-4));
      r.bf16.push_back(doubleToBFloat16(v));
    }
    r.i64 = {int64_t(rank) * 1000 - 7, std::numeric_limits<int64_t>::max(), -int64_t(rank)};
    r.f32Max = {float(rank), -float(rank), rank == 1 ? NAN : 0.0f, -1e30f};
    r.fromRoot0.assign(100, uint8_t(rank));
    r.fromRoot2.assign(3 << 20, uint8_t(10 + rank)); // 3 MiB: several pieces through replica 0
  };
  onThreads(kWorld, [&](int rank) {
    Results &r = results[size_t(rank)];
    inputs(rank, r);
    auto comm = TcpCommunicator::connect(replica(rank, kWorld, port), 5s);
    if (!comm) {
      r.error = comm.message();
      return;
    }
    Communicator &c = **comm;
    Status s = c.allReduce(r.f32.data(), kCount, plan::F32, ReduceOp::Sum);
    if (s)
      s = c.allReduce(r.f64.data(), kCount, plan::F64, ReduceOp::Sum);
    if (s)
      s = c.allReduce(r.i64.data(), r.i64.size(), plan::I64, ReduceOp::Sum);
    if (s)
      s = c.allReduce(r.f16.data(), kCount, plan::F16, ReduceOp::Sum);
    if (s)
      s = c.allReduce(r.bf16.data(), kCount, plan::BF16, ReduceOp::Sum);
    if (s)
      s = c.allReduce(r.f32Max.data(), r.f32Max.size(), plan::F32, ReduceOp::Max);
    if (s)
      s = c.allReduce(r.empty.data(), 0, plan::F32, ReduceOp::Sum);
    if (s)
      s = c.broadcast(r.fromRoot0.data(), r.fromRoot0.size(), 0);
    if (s)
      s = c.broadcast(r.fromRoot2.data(), r.fromRoot2.size(), 2);
    if (s)
      s = c.barrier();
    if (!s)
      r.error = s.message();
  });
  for (int rank = 0; rank < kWorld; ++rank) {
    INFO("replica " << rank);
    REQUIRE(results[size_t(rank)].error == "");
  }

  // The expected results, added here in rank order.
  std::vector<Results> in(kWorld);
  for (int rank = 0; rank < kWorld; ++rank)
    inputs(rank, in[size_t(rank)]);
  Results want = in[0];
  for (size_t i = 0; i < kCount; ++i) {
    float f32 = in[0].f32[i], f16 = halfToFloat(in[0].f16[i]), bf16 = bfloat16ToFloat(in[0].bf16[i]);
    double f64 = in[0].f64[i];
    for (int rank = 1; rank < kWorld; ++rank) {
      f32 += in[size_t(rank)].f32[i];
      f64 += in[size_t(rank)].f64[i];
      f16 += halfToFloat(in[size_t(rank)].f16[i]);
      bf16 += bfloat16ToFloat(in[size_t(rank)].bf16[i]);
    }
    want.f32[i] = f32;
    want.f64[i] = f64;
    want.f16[i] = floatToHalf(f16);
    want.bf16[i] = floatToBFloat16(bf16);
  }
  // i64 wraps: INT64_MAX * 3 = INT64_MAX - 2 (mod 2^64).
  want.i64 = {-7 + 993 + 1993, std::numeric_limits<int64_t>::max() - 2, -3};
  want.fromRoot0.assign(100, 0);
  want.fromRoot2.assign(3 << 20, 12);

  // The order of the sum shows: summed the other way round, the f32 bits would differ.
  size_t orderMatters = 0;
  for (size_t i = 0; i < kCount; ++i)
    orderMatters += float(in[2].f32[i] + in[1].f32[i]) + in[0].f32[i] != want.f32[i];
  CHECK(orderMatters > 0);

  for (int rank = 0; rank < kWorld; ++rank) {
    INFO("replica " << rank);
    const Results &got = results[size_t(rank)];
    CHECK(sameBits(got.f32, want.f32));
    CHECK(sameBits(got.f64, want.f64));
    CHECK(got.i64 == want.i64);
    CHECK(got.f16 == want.f16);
    CHECK(got.bf16 == want.bf16);
    REQUIRE(got.f32Max.size() == 4);
    CHECK(got.f32Max[0] == 2.0f);
    CHECK(got.f32Max[1] == 0.0f);
    CHECK(std::isnan(got.f32Max[2])); // replica 1's NaN is not hidden
    CHECK(got.f32Max[3] == -1e30f);
    CHECK(got.fromRoot0 == want.fromRoot0);
    CHECK(got.fromRoot2 == want.fromRoot2);
  }
}

TEST_CASE("TcpCommunicator: many collectives in a row stay in step", "[dist]") {
  const int port = freePort();
  constexpr int kWorld = 4, kRounds = 200;
  std::vector<std::string> errors(kWorld);
  std::vector<std::vector<int64_t>> sums(kWorld);
  onThreads(kWorld, [&](int rank) {
    auto comm = TcpCommunicator::connect(replica(rank, kWorld, port), 5s);
    if (!comm) {
      errors[size_t(rank)] = comm.message();
      return;
    }
    for (int round = 0; round < kRounds; ++round) {
      std::vector<int64_t> values{rank, round};
      Status s = (*comm)->allReduce(values.data(), values.size(), plan::I64, ReduceOp::Sum);
      if (s && round % 10 == 0)
        s = (*comm)->barrier();
      if (s && round % 7 == 0)
        s = (*comm)->broadcast(values.data(), sizeof(int64_t), round % kWorld);
      if (!s) {
        errors[size_t(rank)] = s.message();
        return;
      }
      sums[size_t(rank)].push_back(values[0] + values[1]);
    }
  });
  std::vector<int64_t> want;
  for (int round = 0; round < kRounds; ++round)
    want.push_back(0 + 1 + 2 + 3 + kWorld * round);
  for (int rank = 0; rank < kWorld; ++rank) {
    INFO("replica " << rank);
    CHECK(errors[size_t(rank)] == "");
    CHECK(sums[size_t(rank)] == want);
  }
}

TEST_CASE("TcpCommunicator: a replica that never connects fails the start-up within the timeout", "[dist]") {
  const int port = freePort();
  std::vector<std::string> errors(2);
  std::vector<double> seconds(2);
  auto start = Clock::now();
  onThreads(2, [&](int rank) { // replica 2 of 3 never starts
    auto comm = TcpCommunicator::connect(replica(rank, 3, port), 500ms);
    errors[size_t(rank)] = comm ? "(connected)" : comm.message();
    seconds[size_t(rank)] = secondsSince(start);
  });
  INFO(errors[0] << "\n" << errors[1]);
  CHECK_THAT(errors[0], Catch::Matchers::Contains("replica 2 did not connect to replica 0") &&
                            Catch::Matchers::Contains("within 0.5 s"));
  CHECK_THAT(errors[1], Catch::Matchers::Contains("replica 0 gave up on start-up: replica 2 did not connect"));
  CHECK(seconds[0] < 2.0);
  CHECK(seconds[1] < 2.0);

  // Nobody listens at all: the replica gives up after its timeout.
  start = Clock::now();
  auto lonely = TcpCommunicator::connect(replica(1, 2, freePort()), 300ms);
  REQUIRE_FALSE(lonely);
  CHECK_THAT(lonely.message(), Catch::Matchers::Contains("replica 1 could not connect to replica 0 at 127.0.0.1:"));
  CHECK(secondsSince(start) < 2.0);
}

TEST_CASE("TcpCommunicator: the handshake refuses a world-size mismatch and a duplicate rank", "[dist]") {
  using Catch::Matchers::Contains;
  {
    const int port = freePort();
    std::vector<std::string> errors(2);
    onThreads(2, [&](int rank) {
      auto comm = TcpCommunicator::connect(replica(rank, rank == 0 ? 3 : 2, port), 2s);
      errors[size_t(rank)] = comm ? "(connected)" : comm.message();
    });
    CHECK_THAT(errors[0], Contains("replica 1 was started with a world size of 2, replica 0 with 3"));
    CHECK_THAT(errors[1], Contains("replica 0 gave up on start-up: replica 1 was started with a world size of 2"));
  }
  {
    const int port = freePort();
    std::vector<std::string> errors(3);
    onThreads(3, [&](int thread) {
      auto comm = TcpCommunicator::connect(replica(thread == 0 ? 0 : 1, 3, port), 2s);
      errors[size_t(thread)] = comm ? "(connected)" : comm.message();
    });
    CHECK_THAT(errors[0], Contains("two replicas claim rank 1"));
    CHECK_THAT(errors[1] + errors[2], Contains("replica 0 gave up on start-up: two replicas claim rank 1"));
  }
}

TEST_CASE("TcpCommunicator: replicas that disagree on a collective all get an error saying how", "[dist]") {
  const int port = freePort();
  std::vector<std::string> errors(3), later(3);
  onThreads(3, [&](int rank) {
    auto comm = TcpCommunicator::connect(replica(rank, 3, port), 2s);
    if (!comm) {
      errors[size_t(rank)] = comm.message();
      return;
    }
    std::vector<float> data(rank == 1 ? 50 : 100, 1.0f);
    Status s = (*comm)->allReduce(data.data(), data.size(), plan::F32, ReduceOp::Sum);
    errors[size_t(rank)] = s ? "(reduced)" : s.message();
    Status again = (*comm)->barrier();
    later[size_t(rank)] = again ? "(passed)" : again.message();
  });
  for (int rank = 0; rank < 3; ++rank) {
    INFO("replica " << rank);
    CHECK_THAT(errors[size_t(rank)],
               Catch::Matchers::Contains("replica 1's all_reduce holds 200 bytes (50 values), replica 0's 400 bytes "
                                         "(100 values)"));
    CHECK_THAT(later[size_t(rank)], Catch::Matchers::Contains("the communicator stopped at an earlier error"));
  }
}

TEST_CASE("TcpCommunicator: a replica calling another collective is named", "[dist]") {
  const int port = freePort();
  std::vector<std::string> errors(3);
  onThreads(3, [&](int rank) {
    auto comm = TcpCommunicator::connect(replica(rank, 3, port), 2s);
    if (!comm) {
      errors[size_t(rank)] = comm.message();
      return;
    }
    std::vector<uint16_t> data(8, 0);
    Status s = rank == 2 ? (*comm)->barrier() : (*comm)->allReduce(data.data(), data.size(), plan::F16, ReduceOp::Max);
    errors[size_t(rank)] = s ? "(passed)" : s.message();
  });
  for (int rank = 0; rank < 3; ++rank) {
    INFO("replica " << rank);
    CHECK_THAT(errors[size_t(rank)],
               Catch::Matchers::Contains("replica 2 called barrier where replica 0 called all_reduce (collective #1)"));
  }
}

TEST_CASE("TcpCommunicator: a replica that leaves or stalls mid-all_reduce is named on the others", "[dist]") {
  using Catch::Matchers::Contains;
  SECTION("it closes its connection") {
    const int port = freePort();
    std::vector<std::string> errors(3);
    std::vector<double> seconds(3);
    onThreads(3, [&](int rank) {
      auto comm = TcpCommunicator::connect(replica(rank, 3, port), 500ms);
      if (!comm) {
        errors[size_t(rank)] = comm.message();
        return;
      }
      if (rank == 1)
        return; // leaves: its communicator closes
      std::vector<double> data(1000, 1.0);
      auto start = Clock::now();
      Status s = (*comm)->allReduce(data.data(), data.size(), plan::F64, ReduceOp::Sum);
      seconds[size_t(rank)] = secondsSince(start);
      errors[size_t(rank)] = s ? "(reduced)" : s.message();
    });
    CHECK_THAT(errors[0], Contains("replica 1 closed the connection during all_reduce"));
    CHECK_THAT(errors[2], Contains("replica 0 gave up on all_reduce: replica 1 closed the connection during all_reduce"));
    CHECK(seconds[0] < 1.5);
    CHECK(seconds[2] < 1.5);
  }
  SECTION("it stays connected but never calls all_reduce") {
    const int port = freePort();
    std::vector<std::string> errors(3);
    std::vector<double> seconds(3);
    std::atomic<int> finished{0};
    onThreads(3, [&](int rank) {
      auto comm = TcpCommunicator::connect(replica(rank, 3, port), 500ms);
      if (!comm) {
        errors[size_t(rank)] = comm.message();
        ++finished;
        return;
      }
      if (rank == 1) { // silent, but holding its connection open until the others have given up
        for (auto start = Clock::now(); finished < 2 && secondsSince(start) < 10;)
          std::this_thread::sleep_for(10ms);
        return;
      }
      std::vector<float> data(10, 1.0f);
      auto start = Clock::now();
      Status s = (*comm)->allReduce(data.data(), data.size(), plan::F32, ReduceOp::Sum);
      seconds[size_t(rank)] = secondsSince(start);
      errors[size_t(rank)] = s ? "(reduced)" : s.message();
      ++finished;
    });
    CHECK_THAT(errors[0], Contains("no message from replica 1 within 0.5 s during all_reduce"));
    CHECK_THAT(errors[2], Contains("replica 0 gave up on all_reduce: no message from replica 1 within 0.5 s"));
    CHECK(seconds[0] < 1.5);
    CHECK(seconds[2] < 1.5);
  }
  SECTION("it closes halfway through sending its buffer") {
    // Replica 2 here is a stand-in speaking the wire protocol by hand, so that it can stop mid-frame.
    const int port = freePort();
    constexpr size_t kCount = 1 << 20; // 4 MiB of f32: several pieces
    std::vector<std::string> errors(3);
    onThreads(3, [&](int rank) {
      if (rank < 2) {
        auto comm = TcpCommunicator::connect(replica(rank, 3, port), 500ms);
        if (!comm) {
          errors[size_t(rank)] = comm.message();
          return;
        }
        std::vector<float> data(kCount, 1.0f);
        Status s = (*comm)->allReduce(data.data(), data.size(), plan::F32, ReduceOp::Sum);
        errors[size_t(rank)] = s ? "(reduced)" : s.message();
        return;
      }
      auto socket = connectBefore("127.0.0.1", port, Clock::now() + 2s);
      if (!socket) {
        errors[2] = socket.message();
        return;
      }
      auto sendFrame = [&](wire::Kind kind, uint64_t sequence, const void *payload, size_t bytes, size_t sent) {
        auto header = wire::encodeHeader({kind, sequence, bytes});
        (void)writeExact(*socket, header.data(), header.size(), Clock::now() + 2s);
        (void)writeExact(*socket, payload, sent, Clock::now() + 2s);
      };
      auto skipFrame = [&] {
        wire::HeaderBytes header;
        return readExact(*socket, header.data(), header.size(), Clock::now() + 2s).ok();
      };
      auto hello = wire::encodeHello({wire::kProtocolVersion, 2, 3});
      sendFrame(wire::Kind::Hello, 0, hello.data(), hello.size(), hello.size());
      if (!skipFrame()) // welcome
        return;
      auto call = wire::encodeCall({wire::Collective::AllReduce, plan::F32, uint32_t(ReduceOp::Sum), 0, kCount * 4});
      sendFrame(wire::Kind::Call, 1, call.data(), call.size(), call.size());
      if (!skipFrame()) // proceed
        return;
      std::vector<float> half(kCount / 2, 1.0f);
      sendFrame(wire::Kind::Data, 1, half.data(), kCount * 4, half.size() * 4);
      socket->close();
      errors[2] = "(left)";
    });
    CHECK(errors[2] == "(left)");
    CHECK_THAT(errors[0], Contains("replica 2 closed the connection during all_reduce"));
    CHECK_THAT(errors[1], Contains("replica 0 gave up on all_reduce: replica 2 closed the connection during all_reduce"));
  }
  SECTION("replica 0 itself leaves") {
    const int port = freePort();
    std::vector<std::string> errors(3);
    onThreads(3, [&](int rank) {
      auto comm = TcpCommunicator::connect(replica(rank, 3, port), 500ms);
      if (!comm || rank == 0) {
        errors[size_t(rank)] = comm ? "(left)" : comm.message();
        return;
      }
      Status s = (*comm)->barrier();
      errors[size_t(rank)] = s ? "(passed)" : s.message();
    });
    CHECK_THAT(errors[1], Contains("replica 0 closed the connection during barrier"));
    CHECK_THAT(errors[2], Contains("replica 0 closed the connection during barrier"));
  }
}
