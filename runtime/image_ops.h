// The data pipeline's image operations on real pixels, as MindSpore's vision transforms do them:
// used by functional mode to transform samples and by calibrate-host to time them on this host.
// Images are height x width x channels (HWC) float arrays unless stated otherwise.
#pragma once

#include <cstdint>
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
std::int64_t write_image_folder(const std::string& dir, int classes, int per_class, std::uint64_t seed);

}  // namespace ascendsim::runtime::image
