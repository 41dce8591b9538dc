// `make-image-folder`: an image folder of photo-like JPEGs, written whole or not at all.

#include <sys/stat.h>
#include <sys/statvfs.h>
#include <system_error>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <string>

#include <fmt/format.h>

#include "runtime/image_ops.h"
#include "sim/commands/commands.h"
#include "sim/commands/options.h"
#include "sim/core/error.h"
#include "sim/core/stop.h"
#include "sim/outputs.h"
#include "sim/report/report.h"
#include "sim/system.h"

namespace ascendsim::sim::cli {

int cmd_make_image_folder(int argc, char* argv[]) {
  namespace fs = std::filesystem;
  po::options_description desc("options");
  std::string dir;
  std::int64_t classes = 10, per_class = 100;
  std::uint64_t seed = 1;
  desc.add_options()("help,h", "show this help")("out", po::value(&dir)->required(), "the folder to create")(
      "classes", po::value(&classes)->default_value(classes), "class subfolders")(
      "per-class", po::value(&per_class)->default_value(per_class), "JPEG files per class")(
      "seed", seed_value(seed), "seed of the sizes and contents");
  if (!parse(argc, argv, desc, "make-image-folder")) return 0;
  // A folder is a dataset for a run: up to a million files, in up to 100,000 classes.
  constexpr std::int64_t kMaxClasses = 100'000, kMaxFiles = 1'000'000;
  if (classes < 1 || classes > kMaxClasses)
    throw InputError(fmt::format("--classes {}: give 1 to {} class folders", classes, kMaxClasses));
  if (per_class < 1 || per_class > kMaxFiles / classes)
    throw InputError(
        fmt::format("--per-class {}: give 1 to {} files per class ({} files at most in all, here {} "
                    "classes)",
                    per_class, kMaxFiles / classes, kMaxFiles, classes));
  std::error_code ec;
  if (fs::exists(dir, ec) && !(fs::is_directory(dir, ec) && fs::is_empty(dir, ec)))
    throw InputError("--out " + dir + ": exists and is not an empty folder; give a new folder");
  // The folder is written under a staging name beside it and renamed into place when whole; its
  // missing parents are made, and removed again if the command fails.
  Outputs parents;
  const fs::path target = fs::absolute(dir, ec).lexically_normal();
  const fs::path real = (target.has_filename() ? target : target.parent_path());
  parents.directory(real.parent_path().string(), "--out");
  struct statvfs vfs {};
  if (::statvfs(real.parent_path().c_str(), &vfs) == 0) {
    const auto free = static_cast<std::int64_t>(vfs.f_bavail) * static_cast<std::int64_t>(vfs.f_frsize);
    const std::int64_t need = runtime::image::estimate_image_folder_bytes(classes, per_class, seed, 8,
                                                                          static_cast<std::int64_t>(vfs.f_frsize));
    if (need > free)
      throw InputError("--out " + dir + ": " + std::to_string(classes * per_class) + " images would take about " +
                       format_bytes(static_cast<double>(need)) + " but the file system has " +
                       format_bytes(static_cast<double>(free)) + " free; give fewer --classes or --per-class");
  }
  std::string staging = (real.parent_path() / ("." + real.filename().string() + ".XXXXXX")).string();
  if (::mkdtemp(staging.data()) == nullptr)
    throw InputError("--out " + dir + ": cannot create a folder in " + real.parent_path().string() + ": " +
                     std::strerror(errno));
  std::int64_t n = 0;
  try {
    n = runtime::image::write_image_folder(staging, static_cast<int>(classes), static_cast<int>(per_class), seed,
                                           [] { check_stop(); });
    ::chmod(
        staging.c_str(), 0777 & ~[] {
          const mode_t m = ::umask(0);
          ::umask(m);
          return m;
        }());
    check_stop();
    if (::rename(staging.c_str(), real.c_str()) != 0)
      throw InputError("--out " + dir + ": cannot put the folder in place: " + std::strerror(errno));
  } catch (const std::exception& e) {
    fs::remove_all(staging, ec);
    if (dynamic_cast<const Stopped*>(&e) || dynamic_cast<const InputError*>(&e)) throw;
    throw InputError("--out " + dir + ": " + e.what() + "; nothing was left behind");
  }
  parents.commit();
  std::cout << "wrote " << n << " JPEG files in " << classes << " class folders under " << dir << "\n";
  return 0;
}

}  // namespace ascendsim::sim::cli
