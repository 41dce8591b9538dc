#include "workloads/dataset.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <map>

#include <stdexcept>

namespace ascendsim::workloads {

const char* dataset_format_name(DatasetFormat f) {
  switch (f) {
    case DatasetFormat::MnistIdx:
      return "mnist-idx";
    case DatasetFormat::Cifar10Binary:
      return "cifar10-binary";
    case DatasetFormat::SyntheticJpeg:
      return "synthetic-jpeg";
    case DatasetFormat::ImageFolder:
      return "image-folder";
    case DatasetFormat::MindRecord:
      return "mindrecord";
    case DatasetFormat::Generator:
      return "generator";
  }
  return "?";
}

const char* map_op_name(MapOpType t) {
  switch (t) {
    case MapOpType::Decode:
      return "Decode";
    case MapOpType::Resize:
      return "Resize";
    case MapOpType::RandomCrop:
      return "RandomCrop";
    case MapOpType::CenterCrop:
      return "CenterCrop";
    case MapOpType::RandomHorizontalFlip:
      return "RandomHorizontalFlip";
    case MapOpType::Rescale:
      return "Rescale";
    case MapOpType::Normalize:
      return "Normalize";
    case MapOpType::HWC2CHW:
      return "HWC2CHW";
    case MapOpType::TypeCast:
      return "TypeCast";
    case MapOpType::SlicePatches:
      return "SlicePatches";
    case MapOpType::RandomCropDecodeResize:
      return "RandomCropDecodeResize";
    case MapOpType::RandomColorAdjust:
      return "RandomColorAdjust";
    case MapOpType::CutOut:
      return "CutOut";
    case MapOpType::RandomErasing:
      return "RandomErasing";
  }
  return "?";
}

namespace {

std::vector<MapCall> grouped_calls(const std::vector<MapOp>& m) {
  std::vector<MapCall> out;
  bool explicit_calls = false;
  for (const auto& op : m) explicit_calls = explicit_calls || op.call >= 0;
  if (explicit_calls) {
    std::int64_t last = 0;
    for (const auto& op : m) last = std::max(last, op.call);
    std::map<std::int64_t, MapCall> by_call;  // an op added without a call (SlicePatches) makes one after them
    for (std::size_t i = 0; i < m.size(); ++i) by_call[m[i].call < 0 ? last + 1 : m[i].call].ops.push_back(i);
    for (auto& [id, c] : by_call) {
      c.column = m[c.ops.front()].type == MapOpType::TypeCast ? "label" : "image";
      out.push_back(std::move(c));
    }
    return out;
  }
  MapCall image{{}, "image", ""}, label{{}, "label", ""}, patches{{}, "image", ""};
  for (std::size_t i = 0; i < m.size(); ++i)
    (m[i].type == MapOpType::TypeCast ? label : m[i].type == MapOpType::SlicePatches ? patches : image).ops.push_back(i);
  for (MapCall* c : {&image, &label, &patches})
    if (!c->ops.empty()) out.push_back(*c);
  return out;
}

}  // namespace

std::vector<MapCall> DataRecipe::calls() const {
  const std::vector<MapOp>& m = maps;
  std::vector<MapCall> out = grouped_calls(m);
  for (auto& c : out) {
    c.name = "Map(";
    for (std::size_t i = 0; i < c.ops.size(); ++i) c.name += (i ? "," : "") + std::string(map_op_name(m[c.ops[i]].type));
    c.name += ")";
  }
  return out;
}

std::size_t DataRecipe::first_random() const {
  for (std::size_t i = 0; i < maps.size(); ++i)
    if (maps[i].random()) return i;
  return maps.size();
}

void apply_map_geometry(const MapOp& op, DataRecipe::Output& o) {
  switch (op.type) {
    case MapOpType::Resize:
      if (op.width == 0) {  // the shorter side to `height`, the aspect kept
        const double scale = static_cast<double>(op.height) / std::min(o.height, o.width);
        o.height *= scale;
        o.width *= scale;
      } else {
        o.height = static_cast<double>(op.height);
        o.width = static_cast<double>(op.width);
      }
      break;
    case MapOpType::RandomCropDecodeResize:
      o.height = static_cast<double>(op.height);
      o.width = static_cast<double>(op.width);
      break;
    case MapOpType::RandomCrop:
    case MapOpType::CenterCrop:
    case MapOpType::SlicePatches:
      if (op.height > 0) {
        o.height = static_cast<double>(op.height);
        o.width = static_cast<double>(op.width);
      } else {
        o.height *= std::sqrt(op.area);
        o.width *= std::sqrt(op.area);
      }
      break;
    case MapOpType::Rescale:
    case MapOpType::Normalize:
      o.bytes_per_value = 4;
      break;
    default:
      break;
  }
}

DataRecipe::Output DataRecipe::host_output() const {
  const auto g = dataset.sample(0);
  Output o{static_cast<double>(g.height), static_cast<double>(g.width), static_cast<double>(g.channels), 1};
  if (dataset.encoded) {  // the mean geometry of an image folder's JPEGs
    o.height = static_cast<double>(dataset.height);
    o.width = static_cast<double>(dataset.width);
  }
  for (const auto& op : maps)
    if (!op.offload && op.type != MapOpType::TypeCast) apply_map_geometry(op, o);
  return o;
}

double random_erasing_mean_area(double aspect, double scale_min, double scale_max, double ratio_min, double ratio_max,
                                int attempts) {
  // One attempt: s uniform, log r uniform; the rectangle h = sqrt(s A r), w = sqrt(s A / r) fits when
  // h <= H and w <= W, i.e. s r <= H / W and s / r <= W / H (A = H W). Midpoint rule on a grid.
  constexpr int kN = 256;
  const double hw = 1.0 / aspect;  // H / W
  const double lr0 = std::log(ratio_min), lr1 = std::log(ratio_max);
  double accept = 0, area = 0;
  for (int i = 0; i < kN; ++i) {
    const double s = scale_min + (scale_max - scale_min) * (i + 0.5) / kN;
    for (int j = 0; j < kN; ++j) {
      const double r = std::exp(lr0 + (lr1 - lr0) * (j + 0.5) / kN);
      if (s * r <= hw && s / r <= 1.0 / hw) {
        accept += 1;
        area += s;
      }
    }
  }
  accept /= static_cast<double>(kN) * kN;
  area /= static_cast<double>(kN) * kN;
  if (accept <= 0) return 0;
  // The first accepted attempt's area: E[s | fits] times the chance one of the attempts fits.
  return area / accept * (1 - std::pow(1 - accept, attempts));
}

namespace {

std::uint32_t be32(const std::string& s, std::size_t at) {
  return static_cast<std::uint32_t>(static_cast<unsigned char>(s[at])) << 24 |
         static_cast<std::uint32_t>(static_cast<unsigned char>(s[at + 1])) << 16 |
         static_cast<std::uint32_t>(static_cast<unsigned char>(s[at + 2])) << 8 |
         static_cast<std::uint32_t>(static_cast<unsigned char>(s[at + 3]));
}

[[noreturn]] void fail(const std::string& file, const std::string& what) {
  throw std::runtime_error(file + ": " + what);
}

std::uint64_t mix(std::uint64_t x) {  // splitmix64
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

DatasetSpec::Geometry DatasetSpec::sample(std::int64_t index) const {
  if (files && !files->empty()) return (*files)[static_cast<std::size_t>(index) % files->size()];
  if (!encoded) return {height, width, channels, record_bytes};
  // ImageNet-like spread: sides uniform within +-25% of the mean, JPEG at ~10:1.
  const std::uint64_t r = mix(static_cast<std::uint64_t>(index));
  const double fh = 0.75 + 0.5 * static_cast<double>(r & 0xffff) / 65535.0;
  const double fw = 0.75 + 0.5 * static_cast<double>((r >> 16) & 0xffff) / 65535.0;
  const auto h = static_cast<std::int64_t>(static_cast<double>(height) * fh);
  const auto w = static_cast<std::int64_t>(static_cast<double>(width) * fw);
  return {h, w, channels, h * w * channels / 10};
}

JpegHeader parse_jpeg_header(const std::string& b, bool whole) {
  JpegHeader h;
  auto bad = [&](const std::string& why) {
    h.status = JpegHeader::Status::Bad;
    h.problem = why;
    return h;
  };
  auto byte = [&](std::size_t i) { return static_cast<unsigned char>(b[i]); };
  if (b.size() < 2) return whole ? bad("shorter than a JPEG's start marker") : h;
  if (byte(0) != 0xFF || byte(1) != 0xD8) return bad("not a JPEG file (no FF D8 start-of-image marker)");
  std::size_t at = 2;
  for (;;) {
    while (at < b.size() && byte(at) == 0xFF && at + 1 < b.size() && byte(at + 1) == 0xFF) ++at;  // fill bytes
    if (at + 4 > b.size()) return whole ? bad("truncated before its frame header") : h;
    if (byte(at) != 0xFF) return bad("corrupt: expected a marker at byte " + std::to_string(at));
    const unsigned m = byte(at + 1);
    if (m == 0xD9 || m == 0xDA) return bad("no frame header (SOF) before the image data");
    if (m == 0x01 || (m >= 0xD0 && m <= 0xD7)) {  // markers without a length
      at += 2;
      continue;
    }
    const std::size_t len = (static_cast<std::size_t>(byte(at + 2)) << 8) | byte(at + 3);
    if (len < 2) return bad("corrupt: a segment length below 2 at byte " + std::to_string(at));
    const bool sof = m >= 0xC0 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC;
    if (sof) {
      if (at + 10 > b.size()) return whole ? bad("truncated inside its frame header") : h;
      h.height = (static_cast<std::int64_t>(byte(at + 5)) << 8) | byte(at + 6);
      h.width = (static_cast<std::int64_t>(byte(at + 7)) << 8) | byte(at + 8);
      h.channels = byte(at + 9);
      if (h.height == 0 || h.width == 0 || h.channels == 0)
        return bad("a frame of " + std::to_string(h.width) + "x" + std::to_string(h.height) + "x" +
                   std::to_string(h.channels));
      h.status = JpegHeader::Status::Found;
      return h;
    }
    at += 2 + len;
  }
}

DatasetSpec parse_mnist(const std::string& images_name, const std::string& images_header,
                        std::int64_t images_tail_bytes, const std::string& labels_name, const std::string& labels) {
  if (images_header.size() < 16) fail(images_name, "truncated: shorter than the 16-byte idx3 header");
  if (be32(images_header, 0) != 0x00000803)
    fail(images_name,
         "not an idx3 image file (magic number " + std::to_string(be32(images_header, 0)) + ", expected 2051)");
  const std::int64_t n = be32(images_header, 4), rows = be32(images_header, 8), cols = be32(images_header, 12);
  if (n == 0 || rows == 0 || cols == 0) fail(images_name, "empty: zero images or zero-sized images");
  // The header's counts are 32-bit each: their product can exceed 64 bits.
  std::int64_t pixels = 0, promised = 0;
  const bool too_big = __builtin_mul_overflow(rows, cols, &pixels) || __builtin_mul_overflow(n, pixels, &promised);
  if (too_big || images_tail_bytes != promised)
    fail(images_name, "header promises " + std::to_string(n) + " images of " + std::to_string(rows) + "x" +
                          std::to_string(cols) + " (" +
                          (too_big ? std::string("more than 2^63") : std::to_string(promised)) +
                          " bytes) but the file has " + std::to_string(images_tail_bytes) + " (truncated or corrupt)");
  if (labels.size() < 8) fail(labels_name, "truncated: shorter than the 8-byte idx1 header");
  if (be32(labels, 0) != 0x00000801)
    fail(labels_name, "not an idx1 label file (magic number " + std::to_string(be32(labels, 0)) + ", expected 2049)");
  const std::int64_t nl = be32(labels, 4);
  if (nl != n)
    fail(labels_name, std::to_string(nl) + " labels for " + std::to_string(n) + " images in " + images_name +
                          " (files from different sets?)");
  if (static_cast<std::int64_t>(labels.size()) != 8 + nl)
    fail(labels_name, "header promises " + std::to_string(nl) + " labels but the file has " +
                          std::to_string(labels.size() - 8) + " (truncated or corrupt)");
  for (std::size_t i = 8; i < labels.size(); ++i)
    if (static_cast<unsigned char>(labels[i]) >= 10)
      fail(labels_name, "label " + std::to_string(static_cast<unsigned char>(labels[i])) + " of sample " +
                            std::to_string(i - 8) + " is not a class 0-9");
  DatasetSpec d;
  d.format = DatasetFormat::MnistIdx;
  d.samples = n;
  d.height = rows;
  d.width = cols;
  d.channels = 1;
  d.classes = 10;
  d.record_bytes = rows * cols;
  return d;
}

DatasetSpec parse_cifar10(const std::vector<std::pair<std::string, std::string>>& batches) {
  constexpr std::int64_t kRecord = 1 + 32 * 32 * 3;
  if (batches.empty()) throw std::runtime_error("no CIFAR-10 batch files");
  std::int64_t n = 0;
  for (const auto& [name, bytes] : batches) {
    const auto size = static_cast<std::int64_t>(bytes.size());
    if (size == 0 || size % kRecord != 0)
      fail(name, std::to_string(size) + " bytes is not a whole number of 3073-byte CIFAR-10 records (truncated?)");
    for (std::int64_t r = 0; r < size / kRecord; ++r) {
      const auto label = static_cast<unsigned char>(bytes[static_cast<std::size_t>(r * kRecord)]);
      if (label >= 10) fail(name, "record " + std::to_string(r) + " has label " + std::to_string(label) + ", not 0-9");
    }
    n += size / kRecord;
  }
  DatasetSpec d = synthetic_cifar10(n);
  d.source.clear();  // the caller names the directory
  return d;
}

DatasetSpec synthetic_cifar10(std::int64_t samples) {
  DatasetSpec d;
  d.format = DatasetFormat::Cifar10Binary;
  d.source = "synthetic";
  d.samples = samples;
  d.height = d.width = 32;
  d.channels = 3;
  d.classes = 10;
  d.record_bytes = 1 + 32 * 32 * 3;
  return d;
}

DataRecipe mnist_recipe(std::int64_t height, std::int64_t width) {
  DataRecipe r;
  r.dataset = synthetic_mnist();
  // The LeNet script's five map() calls, the label's cast first (seed 000's create_dataset).
  r.maps = {{MapOpType::Resize, height, width, 1.0, 1},
            {MapOpType::Rescale, 0, 0, 1.0, 2},
            {MapOpType::Normalize, 0, 0, 1.0, 3},
            {MapOpType::HWC2CHW, 0, 0, 1.0, 4},
            {MapOpType::TypeCast, 0, 0, 1.0, 0}};
  return r;
}

DatasetSpec synthetic_mnist(std::int64_t samples) {
  DatasetSpec d;
  d.format = DatasetFormat::MnistIdx;
  d.source = "synthetic";
  d.samples = samples;
  d.height = d.width = 28;
  d.channels = 1;
  d.classes = 10;
  d.record_bytes = 28 * 28;
  return d;
}

DatasetSpec synthetic_imagenet(std::int64_t samples) {
  DatasetSpec d;
  d.format = DatasetFormat::SyntheticJpeg;
  d.source = "synthetic";
  d.samples = samples;
  d.height = 350;
  d.width = 400;
  d.channels = 3;
  d.classes = 1000;
  d.encoded = true;
  d.record_bytes = 350 * 400 * 3 / 10;
  return d;
}

DataRecipe imagenet_train_recipe(std::int64_t samples) {
  DataRecipe r;
  r.dataset = synthetic_imagenet(samples);
  r.maps = {{MapOpType::RandomCropDecodeResize, 224, 224},
            {MapOpType::RandomHorizontalFlip},
            {MapOpType::Normalize},
            {MapOpType::HWC2CHW},
            {MapOpType::TypeCast}};
  return r;
}

DataRecipe mobilenet_train_recipe(std::int64_t samples) {
  DataRecipe r = imagenet_train_recipe(samples);
  MapOp jitter{MapOpType::RandomColorAdjust};
  jitter.brightness = jitter.contrast = jitter.saturation = 0.4;
  r.maps.insert(r.maps.begin() + 2, jitter);
  r.shuffle_buffer = 1000;
  return r;
}

double random_resized_crop_mean_area(double aspect, double scale_min, double scale_max, double ratio_min,
                                     double ratio_max, int attempts) {
  // A window of scale s and ratio r = e^u fits an image of aspect a = e^alpha when s <= a / r and
  // s <= r / a, i.e. s <= m(u) = e^-|u - alpha| (at most 1). Per attempt, with u uniform on
  // [log ratio_min, log ratio_max] and s uniform on [scale_min, scale_max], M = min(m, scale_max):
  //   p = P(accept)      = mean over u of (M - scale_min) / (scale_max - scale_min), where M > scale_min
  //   e = E[s; accepted] = mean over u of (M^2 - scale_min^2) / (2 (scale_max - scale_min))
  // and over the attempts: e / p x (1 - (1 - p)^attempts) + (1 - p)^attempts (the whole image).
  const double alpha = std::log(aspect), lo = std::log(ratio_min), hi = std::log(ratio_max);
  const double span = scale_max - scale_min;
  // Between the kinks (u = alpha; where m reaches scale_max; where it falls to scale_min) M is 0,
  // the constant scale_max, or e^-(u - alpha) or e^(u - alpha): each piece integrates exactly.
  std::array<double, 7> cuts{lo, hi, alpha};
  std::size_t n = 3;
  for (double bound : {scale_max, scale_min})
    if (bound > 0 && bound < 1) {
      cuts[n++] = alpha + std::log(bound);
      cuts[n++] = alpha - std::log(bound);
    }
  for (std::size_t i = 1; i < n; ++i) {  // insertion sort of at most 7 (std::sort's 16-element step trips -Warray-bounds)
    const double v = cuts[i];
    std::size_t j = i;
    for (; j > 0 && cuts[j - 1] > v; --j) cuts[j] = cuts[j - 1];
    cuts[j] = v;
  }
  double p = 0, e = 0;  // integrals over u
  for (std::size_t k = 0; k + 1 < n; ++k) {
    const double a = std::max(lo, cuts[k]), b = std::min(hi, cuts[k + 1]);
    if (b <= a) continue;
    const double mid = std::exp(-std::fabs((a + b) / 2 - alpha));
    if (span <= 0) {  // a fixed scale: accepted wherever it fits
      if (scale_min <= mid) p += b - a;
    } else if (mid <= scale_min) {
      continue;  // never fits
    } else if (mid >= scale_max) {
      p += (scale_max - scale_min) / span * (b - a);
      e += (scale_max * scale_max - scale_min * scale_min) / (2 * span) * (b - a);
    } else {
      // M = e^(-sigma t), t = u - alpha of one sign sigma on the piece.
      const double sigma = (a + b) / 2 >= alpha ? 1.0 : -1.0, ta = a - alpha, tb = b - alpha;
      const double m1 = (std::exp(-sigma * ta) - std::exp(-sigma * tb)) / sigma;          // of M
      const double m2 = (std::exp(-2 * sigma * ta) - std::exp(-2 * sigma * tb)) / (2 * sigma);  // of M^2
      p += (m1 - scale_min * (b - a)) / span;
      e += (m2 - scale_min * scale_min * (b - a)) / (2 * span);
    }
  }
  if (hi > lo) {
    p /= hi - lo;
    e /= hi - lo;
  } else {  // a fixed ratio
    const double m = std::min(scale_max, std::exp(-std::fabs(lo - alpha)));
    p = span <= 0 ? (scale_min <= m ? 1.0 : 0.0) : std::clamp((m - scale_min) / span, 0.0, 1.0);
    e = span <= 0 ? scale_min * p : (m > scale_min ? (m * m - scale_min * scale_min) / (2 * span) : 0.0);
  }
  if (span <= 0) e = scale_min * p;
  if (p <= 0) return 1.0;
  const double miss_all = std::pow(1 - p, attempts);
  return e / p * (1 - miss_all) + miss_all;
}

DataRecipe imagenet_eval_recipe() {
  DataRecipe r;
  r.dataset = synthetic_imagenet(50000);
  r.maps = {{MapOpType::Decode},    {MapOpType::Resize, 256, 0}, {MapOpType::CenterCrop, 224, 224},
            {MapOpType::Normalize}, {MapOpType::HWC2CHW},        {MapOpType::TypeCast}};
  return r;
}

}  // namespace ascendsim::workloads
