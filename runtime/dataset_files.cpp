#include "runtime/dataset_files.h"

#include <zlib.h>

#include <algorithm>
#include <filesystem>
#include <stdexcept>
#include <vector>

#include "sim/core/error.h"

namespace ascendsim::runtime {

namespace fs = std::filesystem;

namespace {

/// gzip-aware reader (zlib reads plain files unchanged).
class GzFile {
 public:
  explicit GzFile(const fs::path& p) : m_path(p.string()), m_file(gzopen(m_path.c_str(), "rb")) {
    if (!m_file) throw sim::InputError(m_path + ": cannot open");
    gzbuffer(m_file, 1 << 17);
  }
  ~GzFile() {
    if (m_file) gzclose(m_file);
  }
  GzFile(const GzFile&) = delete;
  GzFile& operator=(const GzFile&) = delete;

  /// Up to `n` bytes (fewer at the end of the file).
  std::string read(std::size_t n) {
    std::string out(n, '\0');
    std::size_t got = 0;
    while (got < n) {
      const int r = gzread(m_file, out.data() + got, static_cast<unsigned>(std::min<std::size_t>(n - got, 1 << 30)));
      if (r < 0) fail();
      if (r == 0) break;
      got += static_cast<std::size_t>(r);
    }
    out.resize(got);
    return out;
  }
  /// Bytes left, read and discarded.
  std::int64_t skip_rest() {
    std::vector<char> buf(1 << 20);
    std::int64_t total = 0;
    for (;;) {
      const int r = gzread(m_file, buf.data(), static_cast<unsigned>(buf.size()));
      if (r < 0) fail();
      if (r == 0) return total;
      total += r;
    }
  }
  std::string rest() {
    std::string out;
    for (std::string chunk = read(1 << 20); !chunk.empty(); chunk = read(1 << 20)) out += chunk;
    return out;
  }

 private:
  [[noreturn]] void fail() {
    int err = 0;
    const char* msg = gzerror(m_file, &err);
    throw sim::InputError(m_path + ": corrupt or truncated (" + std::string(msg ? msg : "read error") + ")");
  }
  std::string m_path;
  gzFile m_file;
};

fs::path find_one(const fs::path& dir, const std::string& stem) {
  for (const char* ext : {"", ".gz"}) {
    const fs::path p = dir / (stem + ext);
    if (fs::is_regular_file(p)) return p;
  }
  return {};
}

}  // namespace

workloads::DatasetSpec load_dataset_dir(const std::string& dir_name) {
  const fs::path dir(dir_name);
  if (!fs::is_directory(dir)) throw sim::InputError("dataset", "dataset", dir_name + ": not a directory");
  try {
    const fs::path images = find_one(dir, "train-images-idx3-ubyte");
    const fs::path labels = find_one(dir, "train-labels-idx1-ubyte");
    if (!images.empty() || !labels.empty()) {
      if (images.empty() || labels.empty())
        throw sim::InputError(dir_name + ": found " + (images.empty() ? labels : images).filename().string() +
                              " but not its " + (images.empty() ? "images" : "labels") + " file");
      GzFile img(images);
      const std::string header = img.read(16);
      const std::int64_t tail = img.skip_rest();
      GzFile lbl(labels);
      auto spec = workloads::parse_mnist(images.string(), header, tail, labels.string(), lbl.rest());
      spec.source = dir_name;
      return spec;
    }
    fs::path cifar = dir;
    if (fs::is_directory(dir / "cifar-10-batches-bin")) cifar = dir / "cifar-10-batches-bin";
    std::vector<fs::path> batch_files;
    for (const auto& e : fs::directory_iterator(cifar)) {
      const std::string name = e.path().filename().string();
      if (e.is_regular_file() && name.rfind("data_batch_", 0) == 0 && e.path().extension() == ".bin")
        batch_files.push_back(e.path());
    }
    if (!batch_files.empty()) {
      std::sort(batch_files.begin(), batch_files.end());
      std::vector<std::pair<std::string, std::string>> batches;
      for (const auto& p : batch_files) {
        GzFile f(p);
        batches.emplace_back(p.string(), f.rest());
      }
      auto spec = workloads::parse_cifar10(batches);
      spec.source = dir_name;
      return spec;
    }
  } catch (const std::runtime_error& e) {
    if (dynamic_cast<const sim::InputError*>(&e)) throw;
    throw sim::InputError(e.what());
  }
  throw sim::InputError("dataset", "dataset",
                        dir_name +
                            ": no MNIST idx files (train-images-idx3-ubyte[.gz], train-labels-idx1-ubyte[.gz]) or "
                            "CIFAR-10 binary batches (data_batch_*.bin) found");
}

}  // namespace ascendsim::runtime
