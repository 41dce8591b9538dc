// The data pipeline's image operations on real pixels, as MindSpore's vision transforms do them:
// used by functional mode to transform samples and by calibrate-host to time them on this host.
// Images are height x width x channels (HWC) float arrays unless stated otherwise.
#pragma once

#include <cstdint>
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

}  // namespace ascendsim::runtime::image
