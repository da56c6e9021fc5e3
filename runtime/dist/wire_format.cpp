#include "dist/wire_format.h"

#include <iterator>

namespace castor::dist::wire {

namespace {

template <size_t N> void put(std::array<uint8_t, N> &out, size_t at, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i)
    out[at + size_t(i)] = uint8_t(value >> (8 * i));
}
template <size_t N> uint64_t get(const std::array<uint8_t, N> &in, size_t at, int bytes) {
  uint64_t value = 0;
  for (int i = 0; i < bytes; ++i)
    value |= uint64_t(in[at + size_t(i)]) << (8 * i);
  return value;
}

std::string bytesText(uint64_t bytes, const CallPayload &call) {
  std::string text = std::to_string(bytes) + " bytes";
  size_t size = reducibleDTypeSize(plan::DType(call.dtype));
  if (call.collective == Collective::AllReduce && size > 0)
    text += " (" + std::to_string(bytes / size) + " values)";
  return text;
}

} // namespace

const char *kindName(Kind kind) {
  static constexpr const char *kNames[] = {"hello", "welcome", "abort", "call", "proceed", "data"};
  const uint32_t i = uint32_t(kind) - 1; // the kinds count from 1
  return i < std::size(kNames) ? kNames[i] : "unknown";
}

const char *collectiveName(Collective collective) {
  static constexpr const char *kNames[] = {"all_reduce", "broadcast", "barrier"};
  const uint32_t i = uint32_t(collective) - 1;
  return i < std::size(kNames) ? kNames[i] : "an unknown collective";
}

HeaderBytes encodeHeader(const Header &header) {
  HeaderBytes out{};
  put(out, 0, kMagic, 4);
  put(out, 4, uint32_t(header.kind), 4);
  put(out, 8, header.sequence, 8);
  put(out, 16, header.bytes, 8);
  return out;
}

std::optional<Header> decodeHeader(const HeaderBytes &bytes) {
  if (get(bytes, 0, 4) != kMagic)
    return std::nullopt;
  return Header{Kind(get(bytes, 4, 4)), get(bytes, 8, 8), get(bytes, 16, 8)};
}

std::array<uint8_t, kHelloBytes> encodeHello(const HelloPayload &hello) {
  std::array<uint8_t, kHelloBytes> out{};
  put(out, 0, hello.version, 4);
  put(out, 4, uint32_t(hello.rank), 4);
  put(out, 8, uint32_t(hello.worldSize), 4);
  return out;
}

HelloPayload decodeHello(const std::array<uint8_t, kHelloBytes> &bytes) {
  return {uint32_t(get(bytes, 0, 4)), int32_t(uint32_t(get(bytes, 4, 4))), int32_t(uint32_t(get(bytes, 8, 4)))};
}

std::array<uint8_t, kCallBytes> encodeCall(const CallPayload &call) {
  std::array<uint8_t, kCallBytes> out{};
  put(out, 0, uint32_t(call.collective), 4);
  put(out, 4, call.dtype, 4);
  put(out, 8, call.op, 4);
  put(out, 12, uint32_t(call.root), 4);
  put(out, 16, call.bytes, 8);
  return out;
}

CallPayload decodeCall(const std::array<uint8_t, kCallBytes> &bytes) {
  return {Collective(get(bytes, 0, 4)), uint32_t(get(bytes, 4, 4)), uint32_t(get(bytes, 8, 4)),
          int32_t(uint32_t(get(bytes, 12, 4))), get(bytes, 16, 8)};
}

std::string callMismatch(const CallPayload &mine, uint64_t mySequence, const CallPayload &other,
                         uint64_t otherSequence, int otherRank) {
  const std::string them = "replica " + std::to_string(otherRank);
  const std::string mineName = collectiveName(mine.collective);
  if (other.collective != mine.collective)
    return them + " called " + collectiveName(other.collective) + " where replica 0 called " + mineName +
           " (collective #" + std::to_string(mySequence) + ")";
  if (otherSequence != mySequence)
    return them + " is at collective #" + std::to_string(otherSequence) + ", replica 0 at #" +
           std::to_string(mySequence) + ": the replicas did not call the same collectives";
  if (mine.collective == Collective::AllReduce) {
    if (other.dtype != mine.dtype)
      return them + "'s all_reduce is over " + plan::dtypeName(plan::DType(other.dtype)) + ", replica 0's over " +
             plan::dtypeName(plan::DType(mine.dtype));
    if (other.op != mine.op)
      return them + "'s all_reduce takes the " + reduceOpName(ReduceOp(other.op)) + ", replica 0's the " +
             reduceOpName(ReduceOp(mine.op));
  }
  if (mine.collective == Collective::Broadcast && other.root != mine.root)
    return them + " broadcasts from replica " + std::to_string(other.root) + ", replica 0 from replica " +
           std::to_string(mine.root);
  if (other.bytes != mine.bytes)
    return them + "'s " + mineName + " holds " + bytesText(other.bytes, other) + ", replica 0's " +
           bytesText(mine.bytes, mine);
  return "";
}

} // namespace castor::dist::wire
