#include "runtime/dataset_files.h"

#include <zlib.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <ostream>
#include <sstream>
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

/// One subfolder of JPEG files per class (MindSpore's ImageFolderDataset): every file's
/// dimensions from its JPEG header (read, not decoded) and its size.
struct FolderListing {
  std::vector<fs::path> classes, paths;
  std::vector<std::int32_t> labels;
  std::vector<std::int64_t> sizes, mtimes;  ///< per file: bytes, modification time (ns since the epoch)
};

/// An image folder's class subfolders and their files, sorted (dot files skipped).
FolderListing list_image_folder(const fs::path& dir) {
  FolderListing l;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_directory() && e.path().filename().string()[0] != '.') l.classes.push_back(e.path());
  std::sort(l.classes.begin(), l.classes.end());
  for (std::size_t k = 0; k < l.classes.size(); ++k) {
    const auto& c = l.classes[k];
    std::vector<fs::path> mine;
    for (const auto& e : fs::directory_iterator(c))
      if (e.is_regular_file() && e.path().filename().string()[0] != '.') mine.push_back(e.path());
    if (mine.empty())
      throw sim::InputError("dataset", "dataset",
                            c.string() +
                                ": an empty class folder (an image folder holds JPEG files in every class "
                                "subfolder); remove it or add its images");
    std::sort(mine.begin(), mine.end());
    l.paths.insert(l.paths.end(), mine.begin(), mine.end());
    l.labels.insert(l.labels.end(), mine.size(), static_cast<std::int32_t>(k));
  }
  return l;
}

/// Each file's size and modification time, for the header index.
void stat_files(FolderListing& l) {
  l.sizes.reserve(l.paths.size());
  l.mtimes.reserve(l.paths.size());
  for (const auto& p : l.paths) {
    l.sizes.push_back(static_cast<std::int64_t>(fs::file_size(p)));
    l.mtimes.push_back(static_cast<std::int64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(fs::last_write_time(p).time_since_epoch()).count()));
  }
}

constexpr const char* kIndexMagic = "# ascendsim image-folder index v1";

/// The geometry of every file from `index`, if it describes `l` exactly (same files in the same
/// order, same sizes and modification times); empty if it is stale. Throws InputError for a file
/// that is not such an index.
std::vector<workloads::DatasetSpec::Geometry> read_index(const std::string& index, const fs::path& dir,
                                                         const FolderListing& l) {
  std::ifstream f(index);
  if (!f) throw sim::InputError("dataset_index", "dataset_index", index + ": cannot be read");
  std::string line;
  auto bad = [&](std::size_t at, const std::string& what) {
    return sim::InputError("dataset_index", "dataset_index",
                           index + ":" + std::to_string(at) + ": " + what +
                               " — not an image-folder index written by ascendsim; delete it (it is rebuilt) or "
                               "name another file");
  };
  if (!std::getline(f, line) || line.rfind(kIndexMagic, 0) != 0) throw bad(1, "no index header");
  std::vector<workloads::DatasetSpec::Geometry> out;
  out.reserve(l.paths.size());
  bool stale = false;
  for (std::size_t at = 2; std::getline(f, line); ++at) {
    std::istringstream row(line);
    std::int64_t size = 0, mtime = 0, h = 0, w = 0, c = 0;
    std::string rel;
    if (!(row >> size >> mtime >> h >> w >> c) || !std::getline(row >> std::ws, rel) || rel.empty() || size < 0 ||
        h <= 0 || w <= 0 || c <= 0)
      throw bad(at, "expected: size, mtime, height, width, channels, path");
    const std::size_t i = out.size();
    if (i >= l.paths.size() || fs::path(rel) != l.paths[i].lexically_relative(dir) || size != l.sizes[i] ||
        mtime != l.mtimes[i])
      stale = true;
    out.push_back({h, w, c, size});
  }
  if (stale || out.size() != l.paths.size()) return {};
  return out;
}

/// Writes the index of `l` with its files' geometry `g` (a temporary file renamed into place).
void write_index(const std::string& index, const fs::path& dir, const FolderListing& l,
                 const std::vector<workloads::DatasetSpec::Geometry>& g) {
  const std::string tmp = index + ".tmp";
  {
    std::ofstream f(tmp);
    if (!f) throw sim::InputError("dataset_index", "dataset_index", index + ": cannot be written");
    f << kIndexMagic << "\t" << dir.string() << "\t" << g.size() << " files\n";
    for (std::size_t i = 0; i < g.size(); ++i)
      f << l.sizes[i] << ' ' << l.mtimes[i] << ' ' << g[i].height << ' ' << g[i].width << ' ' << g[i].channels << ' '
        << l.paths[i].lexically_relative(dir).string() << '\n';
    if (!f) throw sim::InputError("dataset_index", "dataset_index", index + ": cannot be written");
  }
  fs::rename(tmp, index);
}

workloads::DatasetSpec load_image_folder(const fs::path& dir, std::ostream* progress, const std::string& index) {
  FolderListing listing = list_image_folder(dir);
  const auto& classes = listing.classes;
  const auto& paths = listing.paths;
  auto files = std::make_shared<std::vector<workloads::DatasetSpec::Geometry>>();
  if (!index.empty()) {
    stat_files(listing);
    if (fs::exists(index)) *files = read_index(index, dir, listing);
    if (files->empty() && progress && fs::exists(index))
      *progress << index << ": the folder changed since it was written; reading the headers again\n";
  }
  const bool indexed = !files->empty();
  if (!indexed) files->reserve(paths.size());
  using clock = std::chrono::steady_clock;
  auto last = clock::now();
  const auto start = last;
  std::string buf;
  for (std::size_t i = 0; i < paths.size() && !indexed; ++i) {
    const fs::path& p = paths[i];
    std::ifstream f(p, std::ios::binary);
    if (!f) throw sim::InputError(p.string() + ": cannot open");
    const auto size = static_cast<std::int64_t>(fs::file_size(p));
    workloads::JpegHeader h;
    for (std::size_t want : {std::size_t{4096}, std::size_t{65536}, static_cast<std::size_t>(size)}) {
      buf.resize(std::min<std::size_t>(want, static_cast<std::size_t>(size)));
      f.seekg(0);
      f.read(buf.data(), static_cast<std::streamsize>(buf.size()));
      buf.resize(static_cast<std::size_t>(f.gcount()));
      h = workloads::parse_jpeg_header(buf, buf.size() >= static_cast<std::size_t>(size));
      if (h.status != workloads::JpegHeader::Status::NeedMore) break;
    }
    if (h.status != workloads::JpegHeader::Status::Found)
      throw sim::InputError("dataset", "dataset",
                            p.string() + ": " + (h.problem.empty() ? std::string("truncated JPEG header") : h.problem) +
                                " — an image folder holds only JPEG files");
    files->push_back({h.height, h.width, h.channels, size});
    if (progress && clock::now() - last > std::chrono::seconds(1)) {
      last = clock::now();
      const double s = std::chrono::duration<double>(last - start).count();
      *progress << "\rreading JPEG headers: " << i + 1 << "/" << paths.size() << " files ("
                << static_cast<std::int64_t>(static_cast<double>(i + 1) / s) << " files/s)   " << std::flush;
    }
  }
  if (progress && std::chrono::duration<double>(clock::now() - start).count() > 1)
    *progress << "\r" << std::string(60, ' ') << "\r" << std::flush;
  if (!index.empty() && !indexed) write_index(index, dir, listing, *files);
  workloads::DatasetSpec d;
  d.format = workloads::DatasetFormat::ImageFolder;
  d.encoded = true;
  d.samples = static_cast<std::int64_t>(files->size());
  d.classes = static_cast<std::int64_t>(classes.size());
  double hs = 0, ws = 0, cs = 0, bytes = 0;
  for (const auto& g : *files) {
    hs += static_cast<double>(g.height);
    ws += static_cast<double>(g.width);
    cs += static_cast<double>(g.channels);
    bytes += static_cast<double>(g.file_bytes);
  }
  const auto n = static_cast<double>(files->size());
  d.height = static_cast<std::int64_t>(std::lround(hs / n));
  d.width = static_cast<std::int64_t>(std::lround(ws / n));
  d.channels = static_cast<std::int64_t>(std::lround(cs / n));
  d.record_bytes = static_cast<std::int64_t>(std::lround(bytes / n));
  d.files = std::move(files);
  return d;
}

}  // namespace

workloads::DatasetSpec load_dataset_dir(const std::string& dir_name, std::ostream* progress, const std::string& index) {
  const fs::path dir(dir_name);
  if (!fs::is_directory(dir)) throw sim::InputError("dataset", "dataset", dir_name + ": not a directory");
  try {
    if (fs::is_regular_file(dir / "train-tokens.bin")) {  // a token stream: a sequence model's records
      workloads::DatasetSpec spec;
      spec.format = workloads::DatasetFormat::MindRecord;
      spec.source = dir_name;
      spec.samples =
          static_cast<std::int64_t>(fs::file_size(dir / "train-tokens.bin") / 4);  // tokens (windows: the model's)
      spec.height = spec.channels = 1;
      spec.width = 1;
      spec.record_bytes = 4;
      spec.token_stream = true;
      return spec;
    }
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
    for (const auto& e : fs::directory_iterator(dir))
      if (e.is_directory() && e.path().filename().string()[0] != '.') {
        auto spec = load_image_folder(dir, progress, index);
        spec.source = dir_name;
        return spec;
      }
  } catch (const std::runtime_error& e) {
    if (dynamic_cast<const sim::InputError*>(&e)) throw;
    throw sim::InputError(e.what());
  }
  throw sim::InputError("dataset", "dataset",
                        dir_name +
                            ": no MNIST idx files (train-images-idx3-ubyte[.gz], train-labels-idx1-ubyte[.gz]), "
                            "CIFAR-10 binary batches (data_batch_*.bin), class folders of JPEG files (an image "
                            "folder) or a token stream (train-tokens.bin, little-endian int32) found");
}

}  // namespace ascendsim::runtime

namespace ascendsim::runtime {

namespace {
std::uint32_t big_endian(const std::string& s, std::size_t at) {
  return (static_cast<std::uint32_t>(static_cast<unsigned char>(s[at])) << 24) |
         (static_cast<std::uint32_t>(static_cast<unsigned char>(s[at + 1])) << 16) |
         (static_cast<std::uint32_t>(static_cast<unsigned char>(s[at + 2])) << 8) |
         static_cast<std::uint32_t>(static_cast<unsigned char>(s[at + 3]));
}
}  // namespace

DatasetValues load_dataset_values(const std::string& dir_name, bool test) {
  const fs::path dir(dir_name);
  if (!fs::is_directory(dir)) throw sim::InputError("dataset", "dataset", dir_name + ": not a directory");
  DatasetValues v;
  const fs::path token_file = dir / (test ? "test-tokens.bin" : "train-tokens.bin");
  if (fs::is_regular_file(token_file)) {  // a token stream
    std::ifstream f(token_file, std::ios::binary);
    const std::string raw((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    if (raw.size() % 4 != 0 || raw.size() < 8)
      throw sim::InputError(token_file.string() + ": " + std::to_string(raw.size()) +
                            " bytes, not a stream of two or more little-endian int32 tokens");
    v.tokens.resize(raw.size() / 4);
    for (std::size_t i = 0; i < v.tokens.size(); ++i) {
      const auto* b = reinterpret_cast<const unsigned char*>(raw.data() + 4 * i);
      v.tokens[i] =
          static_cast<std::int32_t>(static_cast<std::uint32_t>(b[0]) | static_cast<std::uint32_t>(b[1]) << 8 |
                                    static_cast<std::uint32_t>(b[2]) << 16 | static_cast<std::uint32_t>(b[3]) << 24);
      if (v.tokens[i] < 0) throw sim::InputError(token_file.string() + ": token " + std::to_string(i) + " is negative");
      v.classes = std::max<std::int64_t>(v.classes, v.tokens[i] + 1);
    }
    return v;
  }
  const std::string prefix = test ? "t10k" : "train";
  const fs::path images = find_one(dir, prefix + "-images-idx3-ubyte");
  const fs::path labels = find_one(dir, prefix + "-labels-idx1-ubyte");
  if (!images.empty() && !labels.empty()) {
    GzFile img(images);
    GzFile lbl(labels);
    const std::string ih = img.read(16), lh = lbl.read(8);
    if (ih.size() < 16 || big_endian(ih, 0) != 0x803)
      throw sim::InputError(images.string() + ": not an MNIST idx3 image file (bad header)");
    if (lh.size() < 8 || big_endian(lh, 0) != 0x801)
      throw sim::InputError(labels.string() + ": not an MNIST idx1 label file (bad header)");
    const std::int64_t n = big_endian(ih, 4);
    v.height = big_endian(ih, 8);
    v.width = big_endian(ih, 12);
    v.channels = 1;
    v.classes = 10;
    if (big_endian(lh, 4) != n)
      throw sim::InputError(labels.string() + ": " + std::to_string(big_endian(lh, 4)) + " labels for " +
                            std::to_string(n) + " images in " + images.string());
    const std::string px = img.read(static_cast<std::size_t>(n * v.height * v.width));
    const std::string lb = lbl.read(static_cast<std::size_t>(n));
    if (static_cast<std::int64_t>(px.size()) != n * v.height * v.width)
      throw sim::InputError(images.string() + ": truncated (" + std::to_string(px.size()) + " pixel bytes of " +
                            std::to_string(n * v.height * v.width) + ")");
    if (static_cast<std::int64_t>(lb.size()) != n) throw sim::InputError(labels.string() + ": truncated");
    v.pixels.assign(px.begin(), px.end());
    for (char c : lb) {
      const auto l = static_cast<std::int32_t>(static_cast<unsigned char>(c));
      if (l >= 10) throw sim::InputError(labels.string() + ": label " + std::to_string(l) + " is not a digit class");
      v.labels.push_back(l);
    }
    return v;
  }
  // CIFAR-10: records of one label byte and 32x32 pixels per channel plane (R, G, B).
  fs::path cifar = dir;
  const bool has_cifar = fs::is_directory(dir / "cifar-10-batches-bin") || [&] {
    for (const auto& e : fs::directory_iterator(dir))
      if (e.path().extension() == ".bin") return true;
    return false;
  }();
  if (!has_cifar && images.empty() && labels.empty()) {
    bool folder = false;
    for (const auto& e : fs::directory_iterator(dir))
      folder = folder || (e.is_directory() && e.path().filename().string()[0] != '.');
    if (folder) {
      if (test)
        throw sim::InputError(
            "dataset", "dataset",
            dir_name + ": an image folder has no test split here; --eval needs MNIST or CIFAR-10 files");
      FolderListing l = list_image_folder(dir);
      for (const auto& p : l.paths) v.files.push_back(p.string());
      v.labels = std::move(l.labels);
      v.channels = 3;
      v.classes = static_cast<std::int64_t>(l.classes.size());
      return v;
    }
  }
  if (fs::is_directory(dir / "cifar-10-batches-bin")) cifar = dir / "cifar-10-batches-bin";
  std::vector<fs::path> files;
  if (fs::is_directory(cifar))
    for (const auto& e : fs::directory_iterator(cifar)) {
      const std::string name = e.path().filename().string();
      if (e.is_regular_file() && (test ? name == "test_batch.bin" : name.rfind("data_batch_", 0) == 0) &&
          e.path().extension() == ".bin")
        files.push_back(e.path());
    }
  if (files.empty())
    throw sim::InputError("dataset", "dataset",
                          dir_name + ": no " + (test ? "test" : "training") + " split found (" +
                              (test ? "t10k-images-idx3-ubyte[.gz] and t10k-labels-idx1-ubyte[.gz], or test_batch.bin"
                                    : "train-images-idx3-ubyte[.gz] and train-labels-idx1-ubyte[.gz], or "
                                      "data_batch_*.bin") +
                              ")");
  std::sort(files.begin(), files.end());
  v.height = v.width = 32;
  v.channels = 3;
  v.classes = 10;
  constexpr std::size_t kRecord = 1 + 3 * 32 * 32;
  for (const auto& p : files) {
    GzFile f(p);
    const std::string data = f.rest();
    if (data.size() % kRecord != 0)
      throw sim::InputError(p.string() + ": " + std::to_string(data.size()) + " bytes is not a whole number of " +
                            std::to_string(kRecord) + "-byte CIFAR-10 records");
    for (std::size_t r = 0; r < data.size(); r += kRecord) {
      const auto l = static_cast<std::int32_t>(static_cast<unsigned char>(data[r]));
      if (l >= 10)
        throw sim::InputError(p.string() + ": record " + std::to_string(r / kRecord) + " has label " +
                              std::to_string(l) + " (CIFAR-10 has 10 classes)");
      v.labels.push_back(l);
      for (std::size_t i = 0; i < 32 * 32; ++i)
        for (std::size_t c = 0; c < 3; ++c) v.pixels.push_back(static_cast<std::uint8_t>(data[r + 1 + c * 1024 + i]));
    }
  }
  return v;
}

}  // namespace ascendsim::runtime
