// The frames replicas exchange over TCP (runtime/dist/README.md describes the protocol).
//
// Every frame starts with a 24-byte header, little-endian: magic "CSTR", kind (u32), sequence
// number of the collective (u64), payload length (u64); the payload follows.
#pragma once

#include "dist/communicator.h"

#include <array>
#include <cstdint>
#include <optional>
#include <string>

namespace castor::dist::wire {

constexpr uint32_t kMagic = 0x52545343; // "CSTR" in little-endian bytes
constexpr uint32_t kProtocolVersion = 1;
constexpr size_t kHeaderBytes = 24;
// Longest abort text read (a longer one is cut).
constexpr size_t kMaxAbortBytes = 4096;

enum class Kind : uint32_t {
  Hello = 1,   // replica -> 0 at start-up: HelloPayload
  Welcome = 2, // 0 -> replica once all have connected: no payload
  Abort = 3,   // 0 -> replica: the text of why the job's collectives stop
  Call = 4,    // replica -> 0: CallPayload, the collective it entered
  Proceed = 5, // 0 -> replica: every replica entered the same collective
  Data = 6,    // either way: the buffer's bytes
};
const char *kindName(Kind kind);

struct Header {
  Kind kind;
  uint64_t sequence; // the collective's number (0 at start-up)
  uint64_t bytes;    // payload length
};
using HeaderBytes = std::array<uint8_t, kHeaderBytes>;
HeaderBytes encodeHeader(const Header &header);
// nullopt when the bytes do not start with the magic (not a Castor replica).
std::optional<Header> decodeHeader(const HeaderBytes &bytes);

struct HelloPayload {
  uint32_t version = kProtocolVersion;
  int32_t rank = 0;
  int32_t worldSize = 0;
};
constexpr size_t kHelloBytes = 12;
std::array<uint8_t, kHelloBytes> encodeHello(const HelloPayload &hello);
HelloPayload decodeHello(const std::array<uint8_t, kHelloBytes> &bytes);

enum class Collective : uint32_t { AllReduce = 1, Broadcast = 2, Barrier = 3 };
const char *collectiveName(Collective collective); // "all_reduce", "broadcast", "barrier"

// What a replica is about to do; replica 0 compares everyone's before any data moves.
struct CallPayload {
  Collective collective = Collective::Barrier;
  uint32_t dtype = 0; // plan::DType, all_reduce only
  uint32_t op = 0;    // ReduceOp, all_reduce only
  int32_t root = 0;   // broadcast only
  uint64_t bytes = 0; // the buffer's length
};
constexpr size_t kCallBytes = 24;
std::array<uint8_t, kCallBytes> encodeCall(const CallPayload &call);
CallPayload decodeCall(const std::array<uint8_t, kCallBytes> &bytes);

// Empty when replica `otherRank`'s call (at collective `otherSequence`) matches replica 0's;
// otherwise what differs, for an error message.
std::string callMismatch(const CallPayload &mine, uint64_t mySequence, const CallPayload &other,
                         uint64_t otherSequence, int otherRank);

} // namespace castor::dist::wire
