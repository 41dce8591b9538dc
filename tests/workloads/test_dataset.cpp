#include <set>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "workloads/dataset.h"

namespace ascendsim::workloads {
namespace {

using ::testing::HasSubstr;

std::string be32(std::uint32_t v) {
  return {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8), static_cast<char>(v)};
}

std::string labels(std::uint32_t n, unsigned char bad_at = 255) {
  std::string s = be32(0x801) + be32(n);
  for (std::uint32_t i = 0; i < n; ++i) s += static_cast<char>(i == bad_at ? 12 : i % 10);
  return s;
}

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

TEST(MnistIdx, ParsesHeaderAndCounts) {
  const std::string header = be32(0x803) + be32(100) + be32(28) + be32(28);
  const DatasetSpec d = parse_mnist("img", header, 100 * 28 * 28, "lbl", labels(100));
  EXPECT_EQ(d.samples, 100);
  EXPECT_EQ(d.height, 28);
  EXPECT_EQ(d.width, 28);
  EXPECT_EQ(d.channels, 1);
  EXPECT_EQ(d.record_bytes, 784);
}

TEST(MnistIdx, RejectsBadFilesNamingThem) {
  const std::string header = be32(0x803) + be32(100) + be32(28) + be32(28);
  EXPECT_THAT(message_of([&] { parse_mnist("img", be32(0x801) + be32(1) + be32(1) + be32(1), 1, "lbl", labels(1)); }),
              HasSubstr("img: not an idx3"));
  EXPECT_THAT(message_of([&] { parse_mnist("img", header, 100 * 784 - 5, "lbl", labels(100)); }),
              HasSubstr("truncated"));
  // 4 images of 2^31 x 2^31 pixels: 2^64 bytes, which a 64-bit product wraps to 0.
  const std::string huge = be32(0x803) + be32(4) + be32(0x80000000u) + be32(0x80000000u);
  EXPECT_THAT(message_of([&] { parse_mnist("img", huge, 0, "lbl", labels(4)); }), HasSubstr("more than 2^63"));
  EXPECT_THAT(message_of([&] { parse_mnist("img", header, 100 * 784, "lbl", labels(99)); }),
              HasSubstr("99 labels for 100 images"));
  EXPECT_THAT(message_of([&] { parse_mnist("img", header, 100 * 784, "lbl", labels(100, 7)); }),
              HasSubstr("label 12 of sample 7"));
  EXPECT_THAT(message_of([&] { parse_mnist("img", header, 100 * 784, "lbl", labels(100).substr(0, 50)); }),
              HasSubstr("lbl: header promises 100 labels"));
  EXPECT_THAT(message_of([&] { parse_mnist("img", std::string(2, '\0'), 0, "lbl", labels(1)); }),
              HasSubstr("img: truncated"));
}

TEST(Cifar10Binary, ParsesRecordsAndRejectsBadOnes) {
  std::string batch;
  for (int r = 0; r < 20; ++r) batch += static_cast<char>(r % 10) + std::string(3072, '\x7f');
  const DatasetSpec d = parse_cifar10({{"data_batch_1.bin", batch}, {"data_batch_2.bin", batch}});
  EXPECT_EQ(d.samples, 40);
  EXPECT_EQ(d.channels, 3);
  EXPECT_THAT(message_of([&] {
                parse_cifar10({{"data_batch_1.bin", batch.substr(0, 5000)}});
              }),
              HasSubstr("data_batch_1.bin: 5000 bytes is not a whole number"));
  std::string bad = batch;
  bad[3073 * 4] = 11;
  EXPECT_THAT(message_of([&] { parse_cifar10({{"b.bin", bad}}); }), HasSubstr("record 4 has label 11"));
}

TEST(SyntheticJpeg, SizesVaryDeterministicallyAroundTheMean) {
  const DatasetSpec d = synthetic_imagenet();
  EXPECT_EQ(d.samples, 1281167);
  std::set<std::int64_t> widths;
  double mean_pixels = 0;
  for (std::int64_t i = 0; i < 1000; ++i) {
    const auto g = d.sample(i);
    EXPECT_EQ(g.height, d.sample(i).height);  // deterministic
    EXPECT_GE(g.width, 300);
    EXPECT_LE(g.width, 500);
    widths.insert(g.width);
    mean_pixels += static_cast<double>(g.height * g.width) / 1000;
  }
  EXPECT_GT(widths.size(), 100u);
  EXPECT_NEAR(mean_pixels, 350.0 * 400.0, 0.05 * 350 * 400);
}

TEST(DataRecipe, CacheGoesAfterTheDeterministicPrefix) {
  DataRecipe r;
  r.maps = {{MapOpType::Decode}, {MapOpType::RandomCrop, 0, 0, 0.5}, {MapOpType::Resize, 224, 224}};
  EXPECT_EQ(r.first_random(), 1u);
  r.maps = {{MapOpType::Resize, 32, 32}, {MapOpType::Rescale}};
  EXPECT_EQ(r.first_random(), 2u);
}

}  // namespace
}  // namespace ascendsim::workloads
