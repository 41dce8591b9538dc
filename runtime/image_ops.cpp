#include "runtime/image_ops.h"

#include <turbojpeg.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <stdexcept>
#include <utility>

namespace ascendsim::runtime::image {

std::vector<float> resize_bilinear(const std::vector<float>& in, std::int64_t h, std::int64_t w, std::int64_t c,
                                   std::int64_t oh, std::int64_t ow) {
  std::vector<float> out(static_cast<std::size_t>(oh * ow * c));
  const double sy = static_cast<double>(h) / static_cast<double>(oh),
               sx = static_cast<double>(w) / static_cast<double>(ow);
  // Per output column: its two source columns and weight, computed once.
  std::vector<std::int64_t> x0s(static_cast<std::size_t>(ow)), x1s(static_cast<std::size_t>(ow));
  std::vector<double> dxs(static_cast<std::size_t>(ow));
  for (std::int64_t x = 0; x < ow; ++x) {
    const double fx = std::max(0.0, (static_cast<double>(x) + 0.5) * sx - 0.5);
    const auto x0 = std::min<std::int64_t>(static_cast<std::int64_t>(fx), w - 1);
    x0s[static_cast<std::size_t>(x)] = x0;
    x1s[static_cast<std::size_t>(x)] = std::min<std::int64_t>(x0 + 1, w - 1);
    dxs[static_cast<std::size_t>(x)] = fx - static_cast<double>(x0);
  }
  for (std::int64_t y = 0; y < oh; ++y) {
    const double fy = std::max(0.0, (static_cast<double>(y) + 0.5) * sy - 0.5);
    const auto y0 = std::min<std::int64_t>(static_cast<std::int64_t>(fy), h - 1);
    const std::int64_t y1 = std::min<std::int64_t>(y0 + 1, h - 1);
    const double dy = fy - static_cast<double>(y0);
    const float* r0 = in.data() + y0 * w * c;
    const float* r1 = in.data() + y1 * w * c;
    float* o = out.data() + y * ow * c;
    for (std::int64_t x = 0; x < ow; ++x) {
      const auto i = static_cast<std::size_t>(x);
      const std::int64_t a = x0s[i] * c, b = x1s[i] * c;
      const double dx = dxs[i];
      for (std::int64_t k = 0; k < c; ++k)
        o[x * c + k] = static_cast<float>((1 - dy) * ((1 - dx) * r0[a + k] + dx * r0[b + k]) +
                                          dy * ((1 - dx) * r1[a + k] + dx * r1[b + k]));
    }
  }
  return out;
}

std::vector<float> crop(const std::vector<float>& in, std::int64_t h, std::int64_t w, std::int64_t c, std::int64_t y0,
                        std::int64_t x0, std::int64_t oh, std::int64_t ow, std::int64_t pad) {
  std::vector<float> out(static_cast<std::size_t>(oh * ow * c), 0.0f);
  for (std::int64_t y = 0; y < oh; ++y) {
    const std::int64_t sy = y + y0 - pad;
    if (sy < 0 || sy >= h) continue;
    // The columns inside the source, copied as one run.
    const std::int64_t from = std::max<std::int64_t>(0, pad - x0), to = std::min<std::int64_t>(ow, w + pad - x0);
    if (to <= from) continue;
    std::copy(in.begin() + (sy * w + from + x0 - pad) * c, in.begin() + (sy * w + to + x0 - pad) * c,
              out.begin() + (y * ow + from) * c);
  }
  return out;
}

void flip_horizontal(std::vector<float>& img, std::int64_t h, std::int64_t w, std::int64_t c) {
  for (std::int64_t y = 0; y < h; ++y)
    for (std::int64_t x = 0; x < w / 2; ++x)
      for (std::int64_t k = 0; k < c; ++k)
        std::swap(img[static_cast<std::size_t>((y * w + x) * c + k)],
                  img[static_cast<std::size_t>((y * w + (w - 1 - x)) * c + k)]);
}

void rescale(std::vector<float>& img, double scale, double shift) {
  const auto a = static_cast<float>(scale), b = static_cast<float>(shift);
  for (auto& v : img) v = v * a + b;
}

void normalize(std::vector<float>& img, std::int64_t c, const std::vector<double>& mean,
               const std::vector<double>& std) {
  std::vector<float> m(static_cast<std::size_t>(c)), inv(static_cast<std::size_t>(c));
  for (std::int64_t k = 0; k < c; ++k) {
    m[static_cast<std::size_t>(k)] = static_cast<float>(mean[static_cast<std::size_t>(k)]);
    inv[static_cast<std::size_t>(k)] = static_cast<float>(1.0 / std[static_cast<std::size_t>(k)]);
  }
  for (std::size_t i = 0; i < img.size(); ++i) {
    const std::size_t k = i % static_cast<std::size_t>(c);
    img[i] = (img[i] - m[k]) * inv[k];
  }
}

Window random_resized_crop_window(std::int64_t h, std::int64_t w, double scale_min, double scale_max,
                                  double ratio_min, double ratio_max, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> scale(scale_min, scale_max),
      log_ratio(std::log(ratio_min), std::log(ratio_max));
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double area = static_cast<double>(h * w) * scale(rng), ratio = std::exp(log_ratio(rng));
    const auto cw = static_cast<std::int64_t>(std::lround(std::sqrt(area * ratio)));
    const auto ch = static_cast<std::int64_t>(std::lround(std::sqrt(area / ratio)));
    if (cw > 0 && ch > 0 && cw <= w && ch <= h) {
      Window win;
      win.h = ch;
      win.w = cw;
      win.y0 = std::uniform_int_distribution<std::int64_t>(0, h - ch)(rng);
      win.x0 = std::uniform_int_distribution<std::int64_t>(0, w - cw)(rng);
      return win;
    }
  }
  return {0, 0, h, w};  // the whole image
}

namespace {

float to_byte(double v) { return static_cast<float>(std::clamp(std::floor(v + 0.5), 0.0, 255.0)); }

double grey(const float* px) { return 0.299 * px[0] + 0.587 * px[1] + 0.114 * px[2]; }

}  // namespace

void color_adjust(std::vector<float>& img, std::int64_t h, std::int64_t w, std::int64_t c, double brightness,
                  double contrast, double saturation, const std::array<int, 3>& order) {
  const std::size_t n = static_cast<std::size_t>(h * w), cc = static_cast<std::size_t>(c);
  for (int step : order) {
    if (step == 0) {
      for (auto& v : img) v = to_byte(v * brightness);
    } else if (step == 1) {
      double sum = 0;
      for (std::size_t i = 0; i < n; ++i) sum += c == 3 ? std::floor(grey(&img[i * 3]) + 0.5) : img[i * cc];
      const double g = std::floor(sum / static_cast<double>(n) + 0.5);
      for (auto& v : img) v = to_byte(g + contrast * (v - g));
    } else if (step == 2 && c == 3) {
      for (std::size_t i = 0; i < n; ++i) {
        float* px = &img[i * 3];
        const double y = std::floor(grey(px) + 0.5);
        for (int k = 0; k < 3; ++k) px[k] = to_byte(y + saturation * (px[k] - y));
      }
    }
  }
}

void random_color_adjust(std::vector<float>& img, std::int64_t h, std::int64_t w, std::int64_t c, double brightness,
                         double contrast, double saturation, std::mt19937_64& rng) {
  std::array<int, 3> order = {0, 1, 2};
  std::shuffle(order.begin(), order.end(), rng);
  std::array<double, 3> factor{};
  const std::array<double, 3> range = {brightness, contrast, saturation};
  for (int k = 0; k < 3; ++k)
    factor[static_cast<std::size_t>(k)] =
        range[static_cast<std::size_t>(k)] > 0
            ? std::uniform_real_distribution<double>(std::max(0.0, 1 - range[static_cast<std::size_t>(k)]),
                                                     1 + range[static_cast<std::size_t>(k)])(rng)
            : 1.0;
  for (int& step : order)
    if (range[static_cast<std::size_t>(step)] <= 0) step = -1;  // not adjusted
  color_adjust(img, h, w, c, factor[0], factor[1], factor[2], order);
}

std::vector<float> hwc2chw(const std::vector<float>& in, std::int64_t h, std::int64_t w, std::int64_t c) {
  std::vector<float> out(in.size());
  for (std::int64_t y = 0; y < h; ++y)
    for (std::int64_t x = 0; x < w; ++x)
      for (std::int64_t k = 0; k < c; ++k)
        out[static_cast<std::size_t>((k * h + y) * w + x)] = in[static_cast<std::size_t>((y * w + x) * c + k)];
  return out;
}

std::vector<float> to_float(const std::uint8_t* px, std::int64_t n) { return std::vector<float>(px, px + n); }

std::vector<std::uint8_t> synthetic_photo(int w, int h, std::uint64_t seed) {
  // Separable waves (tables per row and column), a checker of edges and uniform noise.
  const double phase = static_cast<double>(seed % 97);
  std::vector<double> col(static_cast<std::size_t>(w) * 3), row(static_cast<std::size_t>(h) * 3);
  for (int k = 0; k < 3; ++k) {
    for (int x = 0; x < w; ++x) col[static_cast<std::size_t>(x * 3 + k)] = 70 * std::sin(0.02 * (x + 13 * k + phase));
    for (int y = 0; y < h; ++y) row[static_cast<std::size_t>(y * 3 + k)] = std::cos(0.015 * (y - 7 * k));
  }
  std::uint64_t state = seed * 0x9E3779B97F4A7C15ULL + 1;
  std::vector<std::uint8_t> px(static_cast<std::size_t>(w) * static_cast<std::size_t>(h) * 3);
  std::size_t at = 0;
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      for (int k = 0; k < 3; ++k) {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        const double noise = static_cast<double>(state % 21) - 10.0;
        const double v = 128 + col[static_cast<std::size_t>(x * 3 + k)] * row[static_cast<std::size_t>(y * 3 + k)] +
                         ((x / 37 + y / 53) % 2 ? 30 : -30) + noise;
        px[at++] = static_cast<std::uint8_t>(std::clamp(v, 0.0, 255.0));
      }
  return px;
}

std::vector<std::uint8_t> decode_jpeg(const std::string& bytes, int& w, int& h, const std::string& name) {
  tjhandle tj = tjInitDecompress();
  if (!tj) throw std::runtime_error("libjpeg-turbo: cannot create a decompressor");
  int sub = 0, space = 0;
  const auto* data = reinterpret_cast<const unsigned char*>(bytes.data());
  const auto size = static_cast<unsigned long>(bytes.size());
  std::vector<std::uint8_t> px;
  bool ok = tjDecompressHeader3(tj, data, size, &w, &h, &sub, &space) == 0 && w > 0 && h > 0;
  if (ok) {
    px.resize(static_cast<std::size_t>(w) * static_cast<std::size_t>(h) * 3);
    ok = tjDecompress2(tj, data, size, px.data(), w, 0, h, TJPF_RGB, TJFLAG_ACCURATEDCT) == 0;
  }
  const std::string why = ok ? std::string() : tjGetErrorStr2(tj);
  tjDestroy(tj);
  if (!ok) throw std::runtime_error(name + ": cannot decode the JPEG (" + why + ")");
  return px;
}

std::vector<unsigned char> encode_jpeg(const std::vector<std::uint8_t>& rgb, int w, int h, int quality) {
  tjhandle tj = tjInitCompress();
  if (!tj) throw std::runtime_error("libjpeg-turbo: cannot create a compressor");
  unsigned char* buf = nullptr;
  unsigned long size = 0;
  const int rc = tjCompress2(tj, rgb.data(), w, 0, h, TJPF_RGB, &buf, &size, TJSAMP_420, quality, TJFLAG_FASTDCT);
  std::vector<unsigned char> out;
  if (rc == 0) out.assign(buf, buf + size);
  tjFree(buf);
  tjDestroy(tj);
  if (rc != 0) throw std::runtime_error("libjpeg-turbo: encoding failed");
  return out;
}

namespace {

/// The n-th image of a folder: its sides drawn from `rng` (in order), its pixels from seed + n.
std::vector<unsigned char> folder_image(std::mt19937_64& rng, std::uint64_t seed, std::int64_t n) {
  std::uniform_real_distribution<double> spread(0.75, 1.25);
  const int w = static_cast<int>(400 * spread(rng)), h = static_cast<int>(350 * spread(rng));
  return encode_jpeg(synthetic_photo(w, h, seed + static_cast<std::uint64_t>(n)), w, h);
}

}  // namespace

std::int64_t write_image_folder(const std::string& dir, int classes, int per_class, std::uint64_t seed,
                                const std::function<void()>& each) {
  namespace fs = std::filesystem;
  std::mt19937_64 rng(seed);
  std::int64_t n = 0;
  for (int c = 0; c < classes; ++c) {
    const fs::path folder = fs::path(dir) / ("class" + std::to_string(c));
    fs::create_directories(folder);
    for (int i = 0; i < per_class; ++i) {
      if (each) each();
      const auto jpeg = folder_image(rng, seed, n);
      const fs::path file = folder / ("img" + std::to_string(i) + ".jpg");
      std::ofstream f(file, std::ios::binary);
      f.write(reinterpret_cast<const char*>(jpeg.data()), static_cast<std::streamsize>(jpeg.size()));
      f.close();
      if (!f) throw std::runtime_error(file.string() + ": cannot write the image (" + std::strerror(errno) + ")");
      ++n;
    }
  }
  return n;
}

std::int64_t estimate_image_folder_bytes(std::int64_t classes, std::int64_t per_class, std::uint64_t seed, int sample,
                                         std::int64_t block) {
  const double files = static_cast<double>(classes) * static_cast<double>(per_class);
  std::mt19937_64 rng(seed);
  const auto k = static_cast<std::int64_t>(std::max(1.0, std::min(static_cast<double>(sample), files)));
  std::int64_t bytes = 0;
  for (std::int64_t n = 0; n < k; ++n)
    bytes += (static_cast<std::int64_t>(folder_image(rng, seed, n).size()) + block - 1) / block * block;
  // The mean file times the files, and a block per class folder; in double, as the product can
  // pass 2^63 for sizes no disk holds (the caller compares it with the free space).
  const double total = static_cast<double>(bytes) / static_cast<double>(k) * files +
                       static_cast<double>(classes) * static_cast<double>(block);
  return total >= 9.2e18 ? std::numeric_limits<std::int64_t>::max() : static_cast<std::int64_t>(total);
}

}  // namespace ascendsim::runtime::image
