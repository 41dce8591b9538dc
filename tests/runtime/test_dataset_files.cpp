#include <zlib.h>

#include <filesystem>
#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "runtime/dataset_files.h"
#include "sim/core/error.h"
#include "workloads/workload.h"

namespace ascendsim::runtime {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

std::string be32(std::uint32_t v) {
  return {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8), static_cast<char>(v)};
}

class DatasetFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    m_dir = fs::temp_directory_path() / ("ascendsim_data_" + std::to_string(::getpid()) + "_" +
                                         ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(m_dir);
  }
  void TearDown() override { fs::remove_all(m_dir); }

  void write(const std::string& name, const std::string& bytes, bool gz) {
    const std::string path = (m_dir / name).string();
    if (gz) {
      gzFile f = gzopen(path.c_str(), "wb");
      gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size()));
      gzclose(f);
    } else {
      std::ofstream(path, std::ios::binary) << bytes;
    }
  }

  void write_mnist(std::uint32_t n, bool gz, std::int64_t drop_image_bytes = 0) {
    std::string images = be32(0x803) + be32(n) + be32(28) + be32(28) + std::string(n * 784, '\x10');
    images.resize(images.size() - static_cast<std::size_t>(drop_image_bytes));
    std::string labels = be32(0x801) + be32(n);
    for (std::uint32_t i = 0; i < n; ++i) labels += static_cast<char>(i % 10);
    const std::string ext = gz ? ".gz" : "";
    write("train-images-idx3-ubyte" + ext, images, gz);
    write("train-labels-idx1-ubyte" + ext, labels, gz);
  }

  std::string error_of() {
    try {
      load_dataset_dir(m_dir.string());
    } catch (const sim::InputError& e) {
      return e.what();
    }
    return "";
  }

  fs::path m_dir;
};

TEST_F(DatasetFilesTest, EpochLengthComesFromPlainAndGzipIdxFiles) {
  for (bool gz : {false, true}) {
    fs::remove_all(m_dir);
    fs::create_directories(m_dir);
    write_mnist(1000, gz);
    const auto d = load_dataset_dir(m_dir.string());
    EXPECT_EQ(d.samples, 1000) << gz;
    EXPECT_EQ(d.format, workloads::DatasetFormat::MnistIdx);
    auto w = workloads::make_workload("lenet5", 32);
    w.data.dataset = d;
    EXPECT_EQ(w.steps_per_epoch(), 1000 / 32);  // drop_remainder
  }
}

TEST_F(DatasetFilesTest, TruncatedAndCorruptFilesAreRejected) {
  write_mnist(50, false, 100);
  EXPECT_THAT(error_of(), HasSubstr("truncated"));
  fs::remove_all(m_dir);
  fs::create_directories(m_dir);
  write_mnist(50, true);
  // Cut the gzip stream in half.
  const fs::path gz = m_dir / "train-images-idx3-ubyte.gz";
  fs::resize_file(gz, fs::file_size(gz) / 2);
  EXPECT_THAT(error_of(), HasSubstr("train-images-idx3-ubyte.gz"));
  fs::remove(m_dir / "train-images-idx3-ubyte.gz");
  EXPECT_THAT(error_of(), HasSubstr("not its images file"));
}

TEST_F(DatasetFilesTest, Cifar10BatchesAndEmptyDirectories) {
  EXPECT_THAT(error_of(), HasSubstr("no MNIST idx files"));
  std::string batch;
  for (int r = 0; r < 64; ++r) batch += static_cast<char>(r % 10) + std::string(3072, '\x01');
  fs::create_directories(m_dir / "cifar-10-batches-bin");
  std::ofstream(m_dir / "cifar-10-batches-bin" / "data_batch_1.bin", std::ios::binary) << batch;
  std::ofstream(m_dir / "cifar-10-batches-bin" / "data_batch_2.bin", std::ios::binary) << batch;
  const auto d = load_dataset_dir(m_dir.string());
  EXPECT_EQ(d.samples, 128);
  EXPECT_EQ(d.format, workloads::DatasetFormat::Cifar10Binary);
  EXPECT_THROW(load_dataset_dir((m_dir / "missing").string()), sim::InputError);
}

TEST(FashionMnist, DebianPackageGives1875StepsPerEpoch) {
  const char* dir = "/usr/share/datasets/fashion-mnist";
  if (!fs::exists(fs::path(dir) / "train-images-idx3-ubyte.gz"))
    GTEST_SKIP() << "dataset-fashion-mnist is not installed (scripts/install-deps.sh installs it)";
  const auto d = load_dataset_dir(dir);
  EXPECT_EQ(d.samples, 60000);
  EXPECT_EQ(d.height, 28);
  auto w = workloads::make_workload("lenet5", 32);
  w.data.dataset = d;
  EXPECT_EQ(w.steps_per_epoch(), 1875);
}

}  // namespace
}  // namespace ascendsim::runtime
