// Plan files: round trip, and every kind of bad plan refused with a clear message.
#include "plan_builder.h"

#include "core/session.h"
#include "plan/plan_io.h"
#include "plan/plan_validator.h"
#include "plan/sha256.h"

#include <google/protobuf/util/message_differencer.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <unistd.h>

using namespace castor;
using castor::test::PlanBuilder;
using Catch::Matchers::Contains;

namespace {

std::string tempPath(const std::string &name) {
  return "/tmp/castor_test_" + std::to_string(::getpid()) + "_" + name;
}

std::vector<uint8_t> readBytes(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void writeBytes(const std::string &path, const std::vector<uint8_t> &bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char *>(bytes.data()), long(bytes.size()));
}

// conv2d (with bias) -> relu: a small valid plan.
PlanBuilder convPlan() {
  PlanBuilder b;
  auto x = b.tensor("x", {1, 2, 5, 5}, plan::Tensor::INPUT);
  auto w = b.tensor("conv.weight", {4, 2, 3, 3}, plan::Tensor::PARAMETER);
  auto bias = b.tensor("conv.bias", {4}, plan::Tensor::PARAMETER);
  auto y = b.tensor("y", {1, 4, 3, 3}, plan::Tensor::ACTIVATION);
  auto z = b.tensor("z", {1, 4, 3, 3}, plan::Tensor::OUTPUT);
  b.kernel("conv2d", {x, w, bias}, {y},
           {{"strides", plan::intsAttr({1, 1})}, {"pads", plan::intsAttr({0, 0, 0, 0})}}).set_name("conv");
  b.kernel("relu", {y}, {z});
  b.parameter("conv.weight", w, plan::Parameter::KAIMING_NORMAL, 18, 36);
  b.parameter("conv.bias", bias, plan::Parameter::ZEROS);
  return b;
}

} // namespace

TEST_CASE("plan file round trip", "[plan]") {
  PlanBuilder b = convPlan();
  REQUIRE(plan::validatePlan(b.plan).message() == "");
  std::string path = tempPath("roundtrip.plan");
  Status w = plan::writePlanFile(b.plan, path);
  REQUIRE(w.message() == "");
  auto bytes = readBytes(path);
  REQUIRE(bytes.size() > plan::kContainerHeaderBytes);
  CHECK(std::string(bytes.begin(), bytes.begin() + 8) == "CASTORPL");

  auto r = plan::readPlanFile(path);
  REQUIRE(r.message() == "");
  CHECK(google::protobuf::util::MessageDifferencer::Equals(*r, b.plan));
  CHECK(r->kernels(0).attrs().at("strides").ints().values_size() == 2);
  // Writing again replaces the file atomically and leaves no temporary behind.
  REQUIRE(plan::writePlanFile(b.plan, path).isOk());
  CHECK(readBytes(path) == bytes);
  std::remove(path.c_str());
}

TEST_CASE("bad plan files are refused with their reason", "[plan]") {
  PlanBuilder b = convPlan();
  auto encoded = plan::encodePlan(b.plan);
  REQUIRE(encoded.isOk());
  std::vector<uint8_t> good = *encoded;
  std::string path = tempPath("bad.plan");

  SECTION("wrong magic") {
    auto bad = good;
    bad[0] = 'X';
    writeBytes(path, bad);
    auto r = plan::readPlanFile(path);
    REQUIRE_FALSE(r.isOk());
    CHECK_THAT(r.message(), Contains("not a Castor plan"));
  }
  SECTION("not a plan at all") {
    writeBytes(path, {'h', 'e', 'l', 'l', 'o'});
    CHECK_THAT(plan::readPlanFile(path).message(), Contains("not a Castor plan"));
  }
  SECTION("wrong container version names both versions") {
    auto bad = good;
    bad[8] = 7;
    writeBytes(path, bad);
    auto r = plan::readPlanFile(path);
    REQUIRE_FALSE(r.isOk());
    CHECK_THAT(r.message(), Contains("version 7") && Contains("version 1"));
  }
  SECTION("wrong format version inside the payload") {
    plan::Plan p = b.plan;
    p.set_format_version(2);
    REQUIRE(plan::writePlanFile(p, path).isOk());
    auto r = plan::readPlanFile(path);
    CHECK_THAT(r.message(), Contains("format version 2") && Contains("version 1"));
  }
  SECTION("truncated file names expected and actual sizes") {
    auto bad = good;
    bad.resize(bad.size() - 10);
    writeBytes(path, bad);
    auto r = plan::readPlanFile(path);
    REQUIRE_FALSE(r.isOk());
    uint64_t payload = good.size() - plan::kContainerHeaderBytes;
    CHECK_THAT(r.message(), Contains("truncated") && Contains(std::to_string(payload)) &&
                                Contains(std::to_string(payload - 10)));
  }
  SECTION("truncated header") {
    writeBytes(path, std::vector<uint8_t>(good.begin(), good.begin() + 16));
    CHECK_THAT(plan::readPlanFile(path).message(), Contains("truncated"));
  }
  SECTION("a flipped byte fails the checksum") {
    auto bad = good;
    bad[plan::kContainerHeaderBytes + (bad.size() - plan::kContainerHeaderBytes) / 2] ^= 0x01;
    writeBytes(path, bad);
    auto r = plan::readPlanFile(path);
    REQUIRE_FALSE(r.isOk());
    CHECK_THAT(r.message(), Contains("corrupt"));
  }
  SECTION("missing file") {
    CHECK_THAT(plan::readPlanFile(path + ".absent").message(), Contains("cannot open"));
  }
  std::remove(path.c_str());
}

TEST_CASE("the validator refuses inconsistent plans before any memory is touched", "[plan]") {
  PlanBuilder b = convPlan();
  REQUIRE(plan::validatePlan(b.plan).isOk());
  plan::Plan p = b.plan;
  std::string expected;

  SECTION("out-of-bounds slot") {
    p.mutable_tensors(4)->set_offset(p.arena_bytes());
    expected = "out of bounds";
  }
  SECTION("slot overflowing the arena's end") {
    p.set_arena_bytes(p.tensors(4).offset() + 100);
    expected = "out of bounds";
  }
  SECTION("misaligned offset") {
    p.mutable_tensors(3)->set_offset(p.tensors(3).offset() + 128);
    expected = "misaligned";
  }
  SECTION("byte size disagreeing with shape and dtype") {
    p.mutable_tensors(1)->set_bytes(p.tensors(1).bytes() - 4);
    expected = "needs 288 bytes";
  }
  SECTION("overlapping live tensors") {
    // The conv output y is live while the relu writes z: they may not share bytes.
    p.mutable_tensors(4)->set_offset(p.tensors(3).offset());
    expected = "overlap";
  }
  SECTION("a parameter overlapping an activation") {
    p.mutable_tensors(2)->set_offset(p.tensors(3).offset());
    expected = "overlap";
  }
  SECTION("conv2d output shape disagreeing with the shape rules") {
    p.mutable_tensors(3)->set_shape(2, 4); // [1, 4, 4, 3] instead of [1, 4, 3, 3]
    p.mutable_tensors(3)->set_bytes(4 * 4 * 3 * 4);
    expected = "conv2d 'conv'";
  }
  SECTION("conv2d filter channels disagreeing with the input") {
    p.mutable_tensors(1)->set_shape(1, 3);
    p.mutable_tensors(1)->set_bytes(4 * 3 * 3 * 3 * 4);
    expected = "input channels";
  }
  SECTION("unknown tensor id") {
    p.mutable_kernels(1)->set_inputs(0, 99);
    expected = "tensor id 99 does not exist";
  }
  SECTION("an activation read before it is written") {
    std::swap(*p.mutable_kernels(0), *p.mutable_kernels(1));
    expected = "before any kernel writes it";
  }
  SECTION("unknown attribute") {
    (*p.mutable_kernels(0)->mutable_attrs())["stride"] = plan::intsAttr({2, 2});
    expected = "unknown attribute 'stride'";
  }
  SECTION("attribute of the wrong type") {
    (*p.mutable_kernels(0)->mutable_attrs())["pads"] = plan::stringAttr("same");
    expected = "'pads' must be an int list";
  }
  SECTION("kaiming init without fan_out") {
    p.mutable_parameters(0)->set_fan_out(0);
    expected = "fan_out";
  }
  SECTION("unsupported format version") {
    p.set_format_version(9);
    expected = "format version 9";
  }
  SECTION("reserve beyond the workspace limit") {
    p.set_workspace_limit_bytes(1 << 20);
    p.set_reserve_bytes((1 << 20) + 1);
    expected = "beyond the workspace limit";
  }
  Status s = plan::validatePlan(p);
  REQUIRE_FALSE(s.isOk());
  CHECK_THAT(s.message(), Contains(expected));

  // A session refuses the same plan before it allocates or runs anything.
  auto session = Session::create(p, createCpuBackend(), {});
  REQUIRE_FALSE(session.isOk());
  CHECK_THAT(session.message(), Contains("invalid plan") && Contains(expected));
}

TEST_CASE("live ranges follow the kernel order", "[plan]") {
  PlanBuilder b = convPlan();
  auto r = plan::computeLiveRanges(b.plan);
  CHECK(r[0].begin == -1); // input x: from the start to the conv
  CHECK(r[0].end == 0);
  CHECK(r[1].begin == -1); // parameters: the whole step
  CHECK(r[1].end == 2);
  CHECK(r[3].begin == 0); // y: conv .. relu
  CHECK(r[3].end == 1);
  CHECK(r[4].begin == 1); // output z: relu .. end
  CHECK(r[4].end == 2);
}

TEST_CASE("slots of tensors whose lifetimes do not meet may share bytes", "[plan]") {
  PlanBuilder b;
  auto x = b.tensor("x", {64}, plan::Tensor::INPUT);
  auto a = b.tensor("a", {64}, plan::Tensor::ACTIVATION);
  auto c = b.tensor("c", {64}, plan::Tensor::ACTIVATION);
  auto d = b.tensor("d", {64}, plan::Tensor::OUTPUT, plan::F32, 0); // reuses x's slot: x is dead by then
  b.kernel("relu", {x}, {a});
  b.kernel("sigmoid", {a}, {c});
  b.kernel("relu", {c}, {d});
  CHECK(plan::validatePlan(b.plan).message() == "");
}

TEST_CASE("SHA-256 gives FIPS 180-2's digests, whole or in pieces", "[plan]") {
  using plan::sha256;
  using plan::toHex;
  CHECK(toHex(sha256("", 0)) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(toHex(sha256("abc", 3)) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  const std::string twoBlocks = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
  CHECK(toHex(sha256(twoBlocks.data(), twoBlocks.size())) ==
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  // A million 'a', fed in uneven pieces that straddle the 64-byte blocks.
  plan::Sha256 h;
  const std::string a(1000, 'a');
  for (size_t done = 0, piece = 1; done < 1000000; piece = piece % 997 + 1) {
    const size_t n = std::min(piece, 1000000 - done);
    h.update(a.data(), n);
    done += n;
  }
  CHECK(toHex(h.finish()) == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}
