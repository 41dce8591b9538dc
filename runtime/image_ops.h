// The data pipeline's image operations on real pixels, as MindSpore's vision transforms do them:
// used by functional mode to transform samples and by calibrate-host to time them on this host.
// Images are height x width x channels (HWC) float arrays unless stated otherwise.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace ascendsim::runtime::image {

/// Bilinear resize with half-pixel centres (OpenCV's INTER_LINEAR, MindSpore's Inter.LINEAR).
std::vector<float> resize_bilinear(const std::vector<float>& in, std::int64_t h, std::int64_t w, std::int64_t c,
                                   std::int64_t oh, std::int64_t ow);
/// The oh x ow window at (y0, x0) of the image padded by `pad` zeros on every side.
std::vector<float> crop(const std::vector<float>& in, std::int64_t h, std::int64_t w, std::int64_t c, std::int64_t y0,
                        std::int64_t x0, std::int64_t oh, std::int64_t ow, std::int64_t pad = 0);
/// Mirrors the image left to right, in place.
void flip_horizontal(std::vector<float>& img, std::int64_t h, std::int64_t w, std::int64_t c);
/// x * scale + shift, in place.
void rescale(std::vector<float>& img, double scale, double shift);
/// (x - mean[k]) / std[k] for channel k, in place.
void normalize(std::vector<float>& img, std::int64_t c, const std::vector<double>& mean,
               const std::vector<double>& std);
/// A random resized crop's window (RandomCrop with an area, RandomCropDecodeResize): up to 10
/// attempts of a scale uniform in [scale_min, scale_max] of the area and a width/height ratio
/// log-uniform in [ratio_min, ratio_max], the first that fits at a uniform offset; else the whole
/// image. Draws from `rng` in that order (scale, ratio; then y0, x0).
struct Window {
  std::int64_t y0 = 0, x0 = 0, h = 0, w = 0;
};
Window random_resized_crop_window(std::int64_t h, std::int64_t w, double scale_min, double scale_max,
                                  double ratio_min, double ratio_max, std::mt19937_64& rng);

/// Brightness, contrast and saturation as PIL's ImageEnhance and MindSpore define them, on an
/// HWC image of 0-255 values (c = 3; for c = 1 saturation is the identity), each step rounded and
/// clamped to 0-255 as on 8-bit pixels:
///   brightness f: x * f (a blend with black);
///   contrast f: g + f (x - g), g the rounded mean of the grey image;
///   saturation f: y + f (x - y), y the pixel's grey (0.299 R + 0.587 G + 0.114 B, rounded).
/// `order` lists the adjustments applied (0 brightness, 1 contrast, 2 saturation; -1 none), in order.
void color_adjust(std::vector<float>& img, std::int64_t h, std::int64_t w, std::int64_t c, double brightness,
                  double contrast, double saturation, const std::array<int, 3>& order = {0, 1, 2});
/// RandomColorAdjust: factors uniform in [max(0, 1 - x), 1 + x] for x = brightness, contrast,
/// saturation (x = 0: that adjustment skipped), applied in a random order, all drawn from `rng`.
void random_color_adjust(std::vector<float>& img, std::int64_t h, std::int64_t w, std::int64_t c, double brightness,
                         double contrast, double saturation, std::mt19937_64& rng);
/// HWC -> CHW.
std::vector<float> hwc2chw(const std::vector<float>& in, std::int64_t h, std::int64_t w, std::int64_t c);
/// 8-bit pixels to float (TypeCast).
std::vector<float> to_float(const std::uint8_t* px, std::int64_t n);

/// Decodes a JPEG to 8-bit RGB (libjpeg-turbo); sets w and h. Throws std::runtime_error naming
/// `name` if it is not a decodable JPEG.
std::vector<std::uint8_t> decode_jpeg(const std::string& bytes, int& w, int& h, const std::string& name);

/// A photo-like 8-bit RGB image (smooth gradients, edges, mild noise: JPEG sizes as photos).
std::vector<std::uint8_t> synthetic_photo(int w, int h, std::uint64_t seed);
/// `rgb` as a JPEG (libjpeg-turbo, 4:2:0) of the given quality.
std::vector<unsigned char> encode_jpeg(const std::vector<std::uint8_t>& rgb, int w, int h, int quality = 90);
/// Writes an image folder under `dir`: `classes` subfolders of `per_class` photo-like JPEGs of
/// ImageNet-like sizes (sides spread around 400x350), deterministic in `seed`. Returns the files.
/// `each` is called before every file (it may throw to stop: a signal, say); a file that cannot be
/// written throws std::runtime_error naming it.
std::int64_t write_image_folder(const std::string& dir, int classes, int per_class, std::uint64_t seed,
                                const std::function<void()>& each = {});
/// The bytes write_image_folder would write, from the first `sample` files it would write (their
/// mean size, each rounded up to `block` bytes as a file system stores it).
std::int64_t estimate_image_folder_bytes(std::int64_t classes, std::int64_t per_class, std::uint64_t seed,
                                         int sample = 8, std::int64_t block = 4096);

}  // namespace ascendsim::runtime::image
