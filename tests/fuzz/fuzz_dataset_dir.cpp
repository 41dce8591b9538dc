// Dataset directories as users give them: the input is written as a gzip-compressed (or plain)
// idx images file next to a valid labels file, or as a CIFAR-10 batch, and the directory is read
// with the same code as `--dataset`.
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "runtime/dataset_files.h"
#include "tests/fuzz/fuzz_common.h"

namespace {
namespace fs = std::filesystem;

fs::path scratch() {
  static const fs::path dir = fs::temp_directory_path() / ("ascendsim_fuzz_" + std::to_string(::getpid()));
  return dir;
}

void write(const fs::path& p, const std::string& bytes) { std::ofstream(p, std::ios::binary) << bytes; }
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const fs::path dir = scratch();
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string body = ascendsim::fuzz::as_string(data + 1, size - 1);
  switch (data[0] % 3) {
    case 0:  // gzip (or anything) as the images file; 10 valid labels
      write(dir / "train-images-idx3-ubyte.gz", body);
      write(dir / "train-labels-idx1-ubyte", std::string("\0\0\x08\x01\0\0\0\x0a", 8) + std::string(10, '\x03'));
      break;
    case 1:  // plain labels file next to a valid header of 10 images of 1x1
      write(dir / "train-images-idx3-ubyte",
            std::string("\0\0\x08\x03\0\0\0\x0a\0\0\0\x01\0\0\0\x01", 16) + std::string(10, '\x7f'));
      write(dir / "train-labels-idx1-ubyte", body);
      break;
    default:  // a CIFAR-10 batch
      write(dir / "data_batch_1.bin", body);
      break;
  }
  ascendsim::fuzz::expect_accept_or_reject([&] { ascendsim::runtime::load_dataset_dir(dir.string()); });
  return 0;
}
