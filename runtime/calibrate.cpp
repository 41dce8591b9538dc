#include "runtime/calibrate.h"

#include <turbojpeg.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>

#include "runtime/image_ops.h"

namespace ascendsim::runtime {

LinearFit fit_linear(const std::vector<std::pair<double, double>>& xy) {
  // Weighted by 1/y^2: the line with the smallest relative misses, which is what a cost model
  // charging per sample needs at every size.
  LinearFit f;
  if (xy.empty()) return f;
  double n = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (const auto& [x, y] : xy) {
    const double w = y != 0 ? 1.0 / (y * y) : 1.0;
    n += w;
    sx += w * x;
    sy += w * y;
    sxx += w * x * x;
    sxy += w * x * y;
  }
  const double den = n * sxx - sx * sx;
  f.slope = den != 0 ? (n * sxy - sx * sy) / den : (sx != 0 ? sy / sx : 0.0);
  f.intercept = (sy - f.slope * sx) / n;
  for (const auto& [x, y] : xy)
    if (y != 0) f.max_rel_error = std::max(f.max_rel_error, std::fabs(f.slope * x + f.intercept - y) / std::fabs(y));
  return f;
}

namespace {

using clock_type = std::chrono::steady_clock;

/// Seconds per call of `op`: each of `threads` threads calls it for at least min_time_s, at the
/// same time; the fastest of `repeats` such rounds of the threads' mean (what the operation costs
/// when nothing else on the machine interferes).
double seconds_per_call(const std::function<void(int)>& op, const CalibrateOptions& o) {
  std::vector<double> rounds;
  for (int r = 0; r < std::max(1, o.repeats); ++r) {
    std::vector<double> per_thread(static_cast<std::size_t>(o.threads), 0);
    std::atomic<int> ready{0};
    auto body = [&](int t) {
      ready.fetch_add(1);
      while (ready.load() < o.threads) std::this_thread::yield();
      const auto start = clock_type::now();
      std::int64_t calls = 0;
      double elapsed = 0;
      do {
        op(t);
        ++calls;
        elapsed = std::chrono::duration<double>(clock_type::now() - start).count();
      } while (elapsed < o.min_time_s);
      per_thread[static_cast<std::size_t>(t)] = elapsed / static_cast<double>(calls);
    };
    std::vector<std::thread> pool;
    for (int t = 1; t < o.threads; ++t) pool.emplace_back(body, t);
    body(0);
    for (auto& th : pool) th.join();
    double mean = 0;
    for (double s : per_thread) mean += s / static_cast<double>(o.threads);
    rounds.push_back(mean);
  }
  return *std::min_element(rounds.begin(), rounds.end());
}

}  // namespace

HostCalibration calibrate_host(const CalibrateOptions& opt, std::ostream* progress) {
  const auto t0 = clock_type::now();
  HostCalibration c;
  c.threads = std::max(1, opt.threads);
  CalibrateOptions o = opt;
  o.threads = c.threads;
  c.cpu_cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  {
    std::ifstream info("/proc/cpuinfo");
    for (std::string line; std::getline(info, line);)
      if (line.rfind("model name", 0) == 0) {
        c.cpu = line.substr(line.find(':') + 2);
        break;
      }
  }
  auto add = [&](const std::string& key, const std::string& what, const std::string& unit,
                 const std::vector<double>& units, const std::function<std::function<void(int)>(double)>& make) {
    // A line that misses a timing by more than 10% met interference (another process, a frequency
    // change) at some size: measure again, up to three times, and keep the best explained.
    OpCalibration op{key, what, unit, {}, {}};
    for (int attempt = 0; attempt < 3 && (attempt == 0 || op.fit.max_rel_error > 0.10); ++attempt) {
      OpCalibration again{key, what, unit, {}, {}};
      for (double u : units) again.points.emplace_back(u, seconds_per_call(make(u), o));
      again.fit = fit_linear(again.points);
      if (attempt == 0 || again.fit.max_rel_error < op.fit.max_rel_error) op = std::move(again);
    }
    if (progress)
      *progress << fmt::format("{:<32} {:8.3f} ns/{:<5} fixed {:7.2f} us  fit within {:4.1f}%  ({} sizes)\n", key,
                               op.per_unit_ns(), unit, op.fit.intercept * 1e6, 100 * op.fit.max_rel_error,
                               op.points.size())
                << std::flush;
    c.ops.push_back(std::move(op));
  };
  const int threads = o.threads;

  // JPEG decode: photos from 320x240 to 800x600 (ImageNet's are about 400x350 on average).
  std::vector<std::pair<int, int>> jpeg_sizes = {{320, 240}, {400, 300}, {500, 375}, {640, 480}, {800, 600}};
  if (opt.quick) jpeg_sizes = {{320, 240}, {500, 375}, {800, 600}};
  std::vector<double> pixel_counts;
  for (const auto& [w, h] : jpeg_sizes) pixel_counts.push_back(static_cast<double>(w * h));
  add("host.decode_ns_per_pixel", "libjpeg-turbo tjDecompress2 to RGB of generated photos (4:2:0, quality 90)", "pixel",
      pixel_counts, [&](double pixels) {
        const auto it = std::find(pixel_counts.begin(), pixel_counts.end(), pixels);
        const auto [w, h] = jpeg_sizes[static_cast<std::size_t>(it - pixel_counts.begin())];
        auto jpeg =
            std::make_shared<std::vector<unsigned char>>(image::encode_jpeg(image::synthetic_photo(w, h, 7), w, h));
        auto outs = std::make_shared<std::vector<std::vector<unsigned char>>>(
            static_cast<std::size_t>(threads), std::vector<unsigned char>(static_cast<std::size_t>(w * h * 3)));
        // One decompressor per thread, destroyed with the last copy of the closure.
        auto handles = std::shared_ptr<std::vector<tjhandle>>(new std::vector<tjhandle>, [](std::vector<tjhandle>* v) {
          for (auto handle : *v) tjDestroy(handle);
          delete v;
        });
        for (int t = 0; t < threads; ++t) handles->push_back(tjInitDecompress());
        return [jpeg, outs, handles, w = w, h = h](int t) {
          if (tjDecompress2((*handles)[static_cast<std::size_t>(t)], jpeg->data(),
                            static_cast<unsigned long>(jpeg->size()), (*outs)[static_cast<std::size_t>(t)].data(), w, 0,
                            h, TJPF_RGB, TJFLAG_FASTDCT) != 0)
            throw std::runtime_error("libjpeg-turbo: decoding a generated JPEG failed");
        };
      });

  // Per-value map ops on the sizes a pipeline works at: 224x224 to 320x320, 3 channels (float
  // images of 0.6 to 1.2 MB, beyond a core's L2 cache, as a pipeline's samples; smaller ones fit
  // L2 and run faster per value, which no straight line through both explains).
  std::vector<std::int64_t> sides = {224, 256, 288, 320};
  if (opt.quick) sides = {224, 320};
  std::vector<double> values;
  for (auto s : sides) values.push_back(static_cast<double>(s * s * 3));
  const auto source =
      std::make_shared<std::vector<float>>(image::to_float(image::synthetic_photo(500, 375, 3).data(), 500 * 375 * 3));
  auto side_of = [&](double v) { return static_cast<std::int64_t>(std::lround(std::sqrt(v / 3))); };
  add("host.resize_ns_per_value", "bilinear resize of a 500x375 RGB image", "value", values, [&](double v) {
    const std::int64_t s = side_of(v);
    return [source, s](int) {
      volatile float sink = image::resize_bilinear(*source, 375, 500, 3, s, s)[0];
      (void)sink;
    };
  });
  add("host.crop_ns_per_value", "crop of a 500x375 RGB image", "value", values, [&](double v) {
    const std::int64_t s = side_of(v);
    return [source, s](int) {
      volatile float sink = image::crop(*source, 375, 500, 3, 10, 20, s, s)[0];
      (void)sink;
    };
  });
  auto in_place = [&](const std::function<void(std::vector<float>&, std::int64_t)>& fn) {
    return [&, fn](double v) {
      const std::int64_t s = side_of(v);
      auto bufs = std::make_shared<std::vector<std::vector<float>>>(
          static_cast<std::size_t>(threads), std::vector<float>(source->begin(), source->begin() + s * s * 3));
      return [bufs, s, fn](int t) { fn((*bufs)[static_cast<std::size_t>(t)], s); };
    };
  };
  add("host.flip_ns_per_value", "horizontal flip", "value", values,
      in_place([](std::vector<float>& b, std::int64_t s) { image::flip_horizontal(b, s, s, 3); }));
  add("host.rescale_ns_per_value", "rescale x * a + b", "value", values,
      in_place([](std::vector<float>& b, std::int64_t) { image::rescale(b, 1.0, 0.0); }));
  add("host.normalize_ns_per_value", "normalize per channel", "value", values,
      in_place([](std::vector<float>& b, std::int64_t) {
        image::normalize(b, 3, {0, 0, 0}, {1, 1, 1});
      }));
  // (Factors near 1 applied in place call after call: the values settle, the work per value stays.)
  add("host.color_adjust_ns_per_value", "brightness, contrast and saturation (RandomColorAdjust's three blends)",
      "value", values, in_place([](std::vector<float>& b, std::int64_t s) {
        image::color_adjust(b, s, s, 3, 1.05, 0.95, 1.05);
      }));
  add("host.hwc2chw_ns_per_value", "HWC to CHW transpose", "value", values, [&](double v) {
    const std::int64_t s = side_of(v);
    auto img = std::make_shared<std::vector<float>>(source->begin(), source->begin() + s * s * 3);
    return [img, s](int) {
      volatile float sink = image::hwc2chw(*img, s, s, 3)[0];
      (void)sink;
    };
  });
  add("host.typecast_ns_per_value", "uint8 to float cast", "value", values, [&](double v) {
    auto px = std::make_shared<std::vector<std::uint8_t>>(image::synthetic_photo(500, 375, 5));
    const auto n = static_cast<std::int64_t>(v);
    return [px, n](int) {
      volatile float sink = image::to_float(px->data(), n)[0];
      (void)sink;
    };
  });

  // Reading files (from the page cache: the files were just written) and batching samples.
  namespace fs = std::filesystem;
  const fs::path dir = (opt.temp_dir.empty() ? fs::temp_directory_path() : fs::path(opt.temp_dir)) /
                       fmt::format("ascendsim-calibrate-{}", static_cast<long>(::getpid()));
  fs::create_directories(dir);
  std::vector<double> file_sizes = {64e3, 128e3, 256e3, 512e3, 1024e3};  // ImageNet's JPEGs: ~110 kB
  if (opt.quick) file_sizes = {64e3, 512e3};
  try {
    add("host.read_ns_per_byte", "reading a whole file (page cache)", "byte", file_sizes, [&](double bytes) {
      const fs::path p = dir / fmt::format("f{}", static_cast<long>(bytes));
      {
        std::ofstream f(p, std::ios::binary);
        const std::string data(static_cast<std::size_t>(bytes), 'x');
        f.write(data.data(), static_cast<std::streamsize>(data.size()));
      }
      auto bufs = std::make_shared<std::vector<std::vector<char>>>(static_cast<std::size_t>(threads),
                                                                   std::vector<char>(static_cast<std::size_t>(bytes)));
      return [p, bufs](int t) {
        std::ifstream f(p, std::ios::binary);
        auto& b = (*bufs)[static_cast<std::size_t>(t)];
        f.read(b.data(), static_cast<std::streamsize>(b.size()));
      };
    });
  } catch (...) {
    fs::remove_all(dir);
    throw;
  }
  fs::remove_all(dir);
  std::vector<double> sample_bytes = {150528, 301056, 602112, 1204224, 2408448};  // 224^2*3 uint8 .. x16
  if (opt.quick) sample_bytes = {150528, 602112};
  add("host.batch_ns_per_byte", "copying a sample into a batch buffer", "byte", sample_bytes, [&](double bytes) {
    const auto n = static_cast<std::size_t>(bytes);
    auto src =
        std::make_shared<std::vector<std::vector<char>>>(static_cast<std::size_t>(threads), std::vector<char>(n, 1));
    auto dst =
        std::make_shared<std::vector<std::vector<char>>>(static_cast<std::size_t>(threads), std::vector<char>(n * 4));
    auto slot = std::make_shared<std::vector<std::size_t>>(static_cast<std::size_t>(threads), 0);
    return [src, dst, slot, n](int t) {
      auto& s = (*slot)[static_cast<std::size_t>(t)];
      std::memcpy((*dst)[static_cast<std::size_t>(t)].data() + s * n, (*src)[static_cast<std::size_t>(t)].data(), n);
      s = (s + 1) % 4;
    };
  });
  c.wall_s = std::chrono::duration<double>(clock_type::now() - t0).count();
  return c;
}

}  // namespace ascendsim::runtime
