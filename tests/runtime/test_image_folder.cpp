// Image folders (MindSpore's ImageFolderDataset): epoch length from the files, each sample's
// costs from its own JPEG header and size, bad files named.
#include <turbojpeg.h>

#include <filesystem>
#include <fstream>
#include <limits>

#include <gtest/gtest.h>

#include "runtime/dataset_files.h"
#include "runtime/image_ops.h"
#include "sim/api.h"
#include "sim/core/error.h"
#include "tests/test_support.h"
#include "workloads/dataset.h"

namespace ascendsim {
namespace {

namespace fs = std::filesystem;

struct TempDir {
  fs::path path;
  explicit TempDir(const std::string& name) : path(fs::temp_directory_path() / ("ascendsim_" + name)) {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
};

std::string read_file(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

void write_file(const fs::path& p, const std::string& s) { std::ofstream(p, std::ios::binary) << s; }

std::string jpeg(int w, int h) {
  const auto j = runtime::image::encode_jpeg(runtime::image::synthetic_photo(w, h, 3), w, h);
  return std::string(j.begin(), j.end());
}

TEST(ImageFolder, EverySamplesGeometryComesFromItsOwnHeader) {
  TempDir d("imgfolder_geometry");
  ASSERT_EQ(runtime::image::write_image_folder(d.path.string(), 3, 5, 11), 15);
  const workloads::DatasetSpec spec = runtime::load_dataset_dir(d.path.string());
  EXPECT_EQ(spec.format, workloads::DatasetFormat::ImageFolder);
  EXPECT_EQ(spec.samples, 15);
  EXPECT_EQ(spec.classes, 3);
  ASSERT_TRUE(spec.files && spec.files->size() == 15u);
  // In class order, files sorted: each as libjpeg-turbo reads its header, and its size on disk.
  std::size_t i = 0;
  tjhandle tj = tjInitDecompress();
  for (int c = 0; c < 3; ++c)
    for (int k = 0; k < 5; ++k, ++i) {
      const fs::path p = d.path / ("class" + std::to_string(c)) / ("img" + std::to_string(k) + ".jpg");
      const std::string bytes = read_file(p);
      int w = 0, h = 0, sub = 0, space = 0;
      ASSERT_EQ(tjDecompressHeader3(tj, reinterpret_cast<const unsigned char*>(bytes.data()),
                                    static_cast<unsigned long>(bytes.size()), &w, &h, &sub, &space),
                0);
      const auto g = spec.sample(static_cast<std::int64_t>(i));
      EXPECT_EQ(g.width, w) << p;
      EXPECT_EQ(g.height, h) << p;
      EXPECT_EQ(g.channels, 3);
      EXPECT_EQ(g.file_bytes, static_cast<std::int64_t>(bytes.size()));
    }
  tjDestroy(tj);
}

TEST(ImageFolder, TheSizeEstimateIsTheFilesAsWritten) {
  // make-image-folder compares the estimate with the free space before writing: from its first 8
  // files, each rounded up to the block, times the files, and a block per class folder.
  TempDir d("imgfolder_estimate");
  ASSERT_EQ(runtime::image::write_image_folder(d.path.string(), 4, 16, 2), 64);
  std::int64_t blocks = 4 * 4096, bytes = 0;
  for (const auto& e : fs::recursive_directory_iterator(d.path))
    if (e.is_regular_file()) {
      bytes += static_cast<std::int64_t>(e.file_size());
      blocks += (static_cast<std::int64_t>(e.file_size()) + 4095) / 4096 * 4096;
    }
  // Every file sampled: exact.
  EXPECT_EQ(runtime::image::estimate_image_folder_bytes(4, 16, 2, 64, 4096), blocks);
  // Eight sampled: within a quarter of what was written (the sides vary by +-25% each).
  const std::int64_t est = runtime::image::estimate_image_folder_bytes(4, 16, 2);
  EXPECT_NEAR(static_cast<double>(est), static_cast<double>(blocks), 0.25 * static_cast<double>(blocks));
  EXPECT_GT(est, bytes);
  // Sizes no disk holds saturate instead of overflowing.
  EXPECT_EQ(runtime::image::estimate_image_folder_bytes(4'000'000'000, 4'000'000'000, 2),
            std::numeric_limits<std::int64_t>::max());
}

TEST(ImageFolder, AHeaderBehindALargeExifSegmentIsFound) {
  // SOI, then a 65,000-byte APP1 segment before the frame header: more than the first read.
  const std::string j = jpeg(123, 77);
  std::string app1 = "\xFF\xE1";
  const std::size_t len = 65000;
  app1 += static_cast<char>(len >> 8);
  app1 += static_cast<char>(len & 0xFF);
  app1 += std::string(len - 2, 'e');
  TempDir d("imgfolder_exif");
  fs::create_directories(d.path / "a");
  write_file(d.path / "a" / "x.jpg", j.substr(0, 2) + app1 + j.substr(2));
  const auto spec = runtime::load_dataset_dir(d.path.string());
  EXPECT_EQ(spec.sample(0).width, 123);
  EXPECT_EQ(spec.sample(0).height, 77);
}

TEST(ImageFolder, TheEpochAndThePipelineFollowTheFiles) {
  TempDir small("imgfolder_small"), large("imgfolder_large");
  for (int c = 0; c < 2; ++c) {
    fs::create_directories(small.path / std::to_string(c));
    fs::create_directories(large.path / std::to_string(c));
    for (int i = 0; i < 9; ++i) {
      write_file(small.path / std::to_string(c) / (std::to_string(i) + ".jpg"), jpeg(200, 150));
      write_file(large.path / std::to_string(c) / (std::to_string(i) + ".jpg"), jpeg(800, 600));
    }
  }
  sim::RunRequest r;
  r.config = test::config_request();
  r.workload = "resnet50";
  r.batch_size = 4;
  r.strategies = {runtime::Strategy::LoopSink};
  r.dataset = small.path.string();
  const auto a = sim::run(r).report()["runs"][0];
  EXPECT_EQ(a["steps"], 18 / 4);  // 18 files, batches of 4, the remainder dropped
  r.dataset = large.path.string();
  const auto b = sim::run(r).report()["runs"][0];
  // Sixteen times the pixels to decode and larger files: the same pipeline delivers fewer batches.
  EXPECT_LT(b["data"]["pipeline_batches_per_s"].get<double>(), 0.5 * a["data"]["pipeline_batches_per_s"].get<double>());
  // LeNet-5 reads MNIST, not JPEGs.
  r.workload = "lenet5";
  EXPECT_THROW(sim::run(r), sim::InputError);
}

TEST(ImageFolder, SlowStorageMakesTheReaderTheBoundAndASourceCacheHelpsLaterEpochs) {
  TempDir d("imgfolder_storage");
  ASSERT_EQ(runtime::image::write_image_folder(d.path.string(), 4, 16, 2), 64);
  sim::RunRequest r;
  r.config = test::config_request();
  r.workload = "resnet50";
  r.batch_size = 8;
  r.epochs = 3;
  r.strategies = {runtime::Strategy::DataSink};
  r.dataset = d.path.string();
  // 5 ms per file, one read at a time: 25 batches/s can never be read faster than 1 / (8 x 5 ms).
  r.config.sets = {"storage.file_latency_us=5000", "storage.parallel_reads=1"};
  const auto slow = sim::run(r).report()["runs"][0];
  const double per_batch = 8 * 5e-3;
  EXPECT_LE(slow["data"]["pipeline_batches_per_s"].get<double>(), 1 / per_batch);
  EXPECT_GT(slow["data"]["pipeline_batches_per_s"].get<double>(), 0.9 / per_batch);
  EXPECT_TRUE(slow["data"]["data_bound"].get<bool>());
  EXPECT_NE(slow["data"]["advice"].get<std::string>().find("source reader is the bottleneck"), std::string::npos);
  // Eight reads in flight: eight times the rate of the reader's storage part.
  r.config.sets = {"storage.file_latency_us=5000", "storage.parallel_reads=8"};
  const auto parallel = sim::run(r).report()["runs"][0];
  EXPECT_GT(parallel["data"]["pipeline_batches_per_s"].get<double>(),
            4 * slow["data"]["pipeline_batches_per_s"].get<double>());
  // A cache after the source: the first epoch reads storage (and writes the cache), later ones
  // read memory.
  r.config.sets = {"storage.file_latency_us=5000", "storage.parallel_reads=1", "pipeline.cache=source"};
  const auto cached = sim::run(r).report()["runs"][0];
  const auto epochs = cached["epoch_time_s"];
  ASSERT_EQ(epochs.size(), 3u);
  EXPECT_LT(epochs[1].get<double>(), 0.5 * epochs[0].get<double>());
  EXPECT_LT(epochs[2].get<double>(), 0.5 * epochs[0].get<double>());
}

TEST(DataCache, TheSeedsNfsTableInDirection) {
  // Seed 004: MobileNetV2 on 4 devices reading ImageNet from NFS, a cache after the source. Its
  // table: the first epoch 1649 s without the cache, 3384 s with it (every sample is inserted);
  // later epochs 458 s without (the files come from the page cache, each open revalidated on
  // the NFS server), 421 s with (read from the cache server's memory).
  sim::RunRequest r;
  r.config = test::config_request();
  r.config.config_file = std::string(ASCENDSIM_SOURCE_DIR) + "/configs/storage-nfs.yaml";
  r.workload = "mobilenetv2";
  r.batch_size = 256;
  r.devices = 4;
  r.epochs = 3;
  r.steps_per_epoch = 20;
  r.strategies = {runtime::Strategy::LoopSink};
  auto epochs = [&](const std::string& cache) {
    r.config.sets = {"storage.parallel_reads=1", "pipeline.cache=" + cache};
    const auto e = sim::run(r).report()["runs"][0]["epoch_time_s"];
    EXPECT_EQ(e.size(), 3u);
    return e;
  };
  const auto plain = epochs("none"), cached = epochs("source");
  EXPECT_GT(cached[0].get<double>(), plain[0].get<double>());  // the first epoch pays the inserts
  for (int e = 1; e < 3; ++e) {
    EXPECT_LT(cached[e].get<double>(), plain[e].get<double>()) << e;       // later ones read memory
    EXPECT_LT(plain[e].get<double>(), 0.5 * plain[0].get<double>()) << e;  // the page cache
  }
  // Without a page cache every epoch reads NFS; with one too small for the shard, so do the
  // samples it cannot hold.
  r.config.sets = {"storage.parallel_reads=1", "storage.page_cache_gib=0"};
  const auto uncached = sim::run(r).report()["runs"][0]["epoch_time_s"];
  // (MobileNetV2's shuffle buffer of 1000 rows, 4 batches of 256, makes the first epoch read 4
  // batches more and the last, whose batches the buffer already holds, 4 fewer: the three epochs
  // still read 3 x 20 batches.)
  const double e0 = uncached[0].get<double>(), e1 = uncached[1].get<double>(), e2 = uncached[2].get<double>();
  EXPECT_NEAR(e0, e1 * (20 + 4) / 20, 0.05 * e0);
  EXPECT_NEAR(e0 + e1 + e2, 3 * e1, 0.05 * 3 * e1);
  // The synthetic JPEGs average 42 KB: 54 GB for ImageNet, so 25 GiB hold about half of each shard.
  r.config.sets = {"storage.parallel_reads=1", "storage.page_cache_gib=25"};
  const auto half = sim::run(r).report()["runs"][0]["epoch_time_s"];
  EXPECT_LT(half[1].get<double>(), e1);
  EXPECT_GT(half[1].get<double>(), plain[1].get<double>());
}

TEST(DataCache, ItNeverHoldsMoreThanItsSizeSpillsTheRestAndRefusesToFollowARandomOp) {
  TempDir d("imgfolder_cache");
  ASSERT_EQ(runtime::image::write_image_folder(d.path.string(), 2, 16, 4), 32);
  sim::RunRequest r;
  r.config = test::config_request();
  r.workload = "resnet50";
  r.batch_size = 4;
  r.epochs = 3;
  r.strategies = {runtime::Strategy::DataSink};
  r.dataset = d.path.string();
  // A source cache of 1 MB: the raw files average about 40 kB, so it holds some 25 of the 32.
  const double capacity = 1.0 / 1024;  // GiB
  r.config.sets = {"pipeline.cache=source", "pipeline.cache_gib=" + std::to_string(capacity)};
  const auto small = sim::run(r).report()["runs"][0]["data"]["cache_detail"];
  EXPECT_LE(small["memory_bytes"].get<double>(), capacity * 1073741824.0);
  EXPECT_GT(small["memory_bytes"].get<double>(),
            0.8 * capacity * 1073741824.0 - small["bytes_per_sample"].get<double>());
  EXPECT_EQ(small["spilled_bytes"].get<double>(), 0.0);
  EXPECT_LT(small["later_epoch_hit_fraction"].get<double>(), 1.0);
  // Spilling: the rest goes to local disk, every later read hits.
  r.config.sets.push_back("pipeline.cache_spilling=true");
  const auto spill = sim::run(r).report()["runs"][0]["data"]["cache_detail"];
  EXPECT_EQ(spill["memory_bytes"], small["memory_bytes"]);
  EXPECT_GT(spill["spilled_bytes"].get<double>(), 0.0);
  EXPECT_NEAR(spill["memory_bytes"].get<double>() + spill["spilled_bytes"].get<double>(),
              32 * spill["bytes_per_sample"].get<double>(), 1.0);
  EXPECT_EQ(spill["later_epoch_hit_fraction"], 1.0);
  // The ranks of a server share its cache: each of 2 ranks gets half.
  r.devices = 2;
  r.config.sets = {"pipeline.cache=source", "pipeline.cache_gib=" + std::to_string(capacity)};
  const auto shared = sim::run(r).report()["runs"][0]["data"]["cache_detail"];
  EXPECT_LE(shared["memory_bytes"].get<double>(), capacity * 1073741824.0 / 2);
  r.devices = 1;
  // After RandomCropDecodeResize (ResNet's recipe's first op): refused with the reason ...
  r.config.sets = {"pipeline.cache=map", "pipeline.cache_after=2"};
  try {
    sim::run(r);
    ADD_FAILURE() << "accepted";
  } catch (const sim::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("RandomCropDecodeResize, a random augmentation"), std::string::npos)
        << e.what();
  }
  // ... or accepted on request, with a warning in the verdict.
  r.config.sets.push_back("pipeline.cache_allow_random=true");
  const auto allowed = sim::run(r).report()["runs"][0]["data"];
  EXPECT_TRUE(allowed["cache_detail"]["randomness_lost"].get<bool>());
  EXPECT_NE(allowed["verdict"].get<std::string>().find("replays the first epoch's augmentation"), std::string::npos);
  // Before the first random op there is nothing to hold: refused, pointing at the source cache.
  r.config.sets = {"pipeline.cache=map"};
  try {
    sim::run(r);
    ADD_FAILURE() << "accepted";
  } catch (const sim::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("pipeline.cache=source"), std::string::npos) << e.what();
  }
  // (A map cache after deterministic ops, LeNet's: PipelineTest.CacheMakesLaterEpochsFaster...)
}

TEST(ImageFolder, AHeaderIndexIsWrittenReadAndRebuiltWhenTheFolderChanges) {
  TempDir d("imgfolder_index");
  ASSERT_EQ(runtime::image::write_image_folder(d.path.string(), 3, 4, 5), 12);
  const std::string index = (d.path.parent_path() / "imgfolder_index.headers").string();
  fs::remove(index);
  const auto scanned = runtime::load_dataset_dir(d.path.string(), nullptr, index);
  ASSERT_TRUE(fs::exists(index));
  std::ifstream f(index);
  std::string first;
  std::getline(f, first);
  EXPECT_EQ(first.rfind("# ascendsim image-folder index v1", 0), 0u);
  // Read back: the same geometry for every file.
  const auto indexed = runtime::load_dataset_dir(d.path.string(), nullptr, index);
  ASSERT_EQ(indexed.samples, scanned.samples);
  for (std::int64_t i = 0; i < scanned.samples; ++i) {
    EXPECT_EQ(indexed.sample(i).height, scanned.sample(i).height) << i;
    EXPECT_EQ(indexed.sample(i).width, scanned.sample(i).width) << i;
    EXPECT_EQ(indexed.sample(i).file_bytes, scanned.sample(i).file_bytes) << i;
  }
  EXPECT_EQ(indexed.record_bytes, scanned.record_bytes);
  // A file added: the index is stale, the folder is scanned again and the index rewritten.
  fs::copy_file(d.path / "class0" / "img0.jpg", d.path / "class1" / "zz_extra.jpg");
  const auto grown = runtime::load_dataset_dir(d.path.string(), nullptr, index);
  EXPECT_EQ(grown.samples, 13);
  std::ifstream g(index);
  std::int64_t lines = 0;
  for (std::string l; std::getline(g, l);) ++lines;
  EXPECT_EQ(lines, 14);  // the header and 13 files
  // Not an index: refused, naming the file and what to do; the file is left alone.
  { std::ofstream(index) << "class,file\n"; }
  try {
    runtime::load_dataset_dir(d.path.string(), nullptr, index);
    FAIL() << "a file that is not an index was read";
  } catch (const sim::InputError& e) {
    EXPECT_NE(std::string(e.what()).find(index + ":1"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("delete it"), std::string::npos) << e.what();
  }
  std::ifstream h(index);
  std::string kept;
  std::getline(h, kept);
  EXPECT_EQ(kept, "class,file");
  fs::remove(index);
}

TEST(ImageFolder, BadFilesAndFoldersAreNamed) {
  auto error_of = [](const fs::path& dir) {
    try {
      runtime::load_dataset_dir(dir.string());
    } catch (const sim::InputError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  const std::string good = jpeg(64, 48);
  {
    TempDir d("imgfolder_text");
    fs::create_directories(d.path / "cat");
    write_file(d.path / "cat" / "a.jpg", good);
    write_file(d.path / "cat" / "notes.txt", "not an image");
    const std::string e = error_of(d.path);
    EXPECT_NE(e.find("notes.txt: not a JPEG file"), std::string::npos) << e;
  }
  {
    TempDir d("imgfolder_truncated");
    fs::create_directories(d.path / "cat");
    write_file(d.path / "cat" / "cut.jpg", good.substr(0, 20));
    const std::string e = error_of(d.path);
    EXPECT_NE(e.find("cut.jpg: truncated"), std::string::npos) << e;
  }
  {
    TempDir d("imgfolder_empty_class");
    fs::create_directories(d.path / "cat");
    fs::create_directories(d.path / "dog");
    write_file(d.path / "cat" / "a.jpg", good);
    const std::string e = error_of(d.path);
    EXPECT_NE(e.find("dog: an empty class folder"), std::string::npos) << e;
  }
  {
    TempDir d("imgfolder_no_classes");
    write_file(d.path / "a.jpg", good);
    const std::string e = error_of(d.path);
    EXPECT_NE(e.find("class folders of JPEG files"), std::string::npos) << e;
  }
  // A corrupt segment length is named too, and a JPEG without a frame header.
  EXPECT_EQ(workloads::parse_jpeg_header(std::string("\xFF\xD8\xFF\xE0\x00\x01", 6), true).status,
            workloads::JpegHeader::Status::Bad);
  EXPECT_EQ(workloads::parse_jpeg_header(std::string("\xFF\xD8\xFF\xDA\x00\x08", 6), true).problem,
            "no frame header (SOF) before the image data");
}

}  // namespace
}  // namespace ascendsim
