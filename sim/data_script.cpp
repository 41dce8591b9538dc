// The data script (sim/data_script.h): YAML into a recipe and pipeline parameters.
#include "sim/data_script.h"

#include <cctype>
#include <cmath>
#include <filesystem>

#include <fmt/format.h>

#include "sim/core/error.h"
#include "sim/run_yaml.h"

namespace ascendsim::sim {

using workloads::DatasetFormat;
using workloads::MapOp;
using workloads::MapOpType;

namespace {

constexpr const char* kTopKeys =
    "dataset, samples, image, record_bytes, yields, columns, reader_workers, shuffle_buffer, prefetch, numa, maps";
constexpr const char* kOps =
    "Decode, RandomCropDecodeResize, RandomCrop, CenterCrop, Resize, RandomHorizontalFlip, RandomColorAdjust, "
    "Rescale, Normalize, HWC2CHW, CutOut, RandomErasing, TypeCast";

std::string line_of(const YAML::Node& n, const std::string& at) {
  const auto m = n.Mark();
  if (m.line < 0) return at;
  const auto colon = at.find(':');
  // `at` is "file:line: ..." for a figure; keep the file, point at the node's line.
  if (colon != std::string::npos && colon + 1 < at.size() && std::isdigit(static_cast<unsigned char>(at[colon + 1])))
    return at.substr(0, colon) + ":" + std::to_string(m.line + 1);
  return at;
}

std::int64_t whole_in(const YAML::Node& v, const std::string& at, const std::string& key, std::int64_t lo,
                      std::int64_t hi, const std::string& what) {
  const std::string s = run_yaml::scalar(v, at, key);
  const auto x = run_yaml::whole_real(s);
  if (!x || *x != std::floor(*x) || *x < static_cast<double>(lo) || *x > static_cast<double>(hi))
    throw InputError(at + ": '" + key + "' is " + s + ": give " + what + fmt::format(" ({} to {})", lo, hi));
  return static_cast<std::int64_t>(*x);
}

double real_in(const YAML::Node& v, const std::string& at, const std::string& key, double lo, double hi) {
  const double x = run_yaml::number(v, at, key);
  if (x < lo || x > hi) throw InputError(at + fmt::format(": '{}' is {:g}: give {:g} to {:g}", key, x, lo, hi));
  return x;
}

bool yes_no(const YAML::Node& v, const std::string& at, const std::string& key) {
  const std::string b = run_yaml::scalar(v, at, key);
  if (b != "true" && b != "false") throw InputError(at + ": '" + key + "' is true or false, got '" + b + "'");
  return b == "true";
}

/// A size: one number (a square) or [height, width].
std::pair<std::int64_t, std::int64_t> size_of(const YAML::Node& v, const std::string& at, const std::string& key) {
  if (v.IsSequence()) {
    if (v.size() != 2) throw InputError(at + ": '" + key + "' is one side or [height, width]");
    return {whole_in(v[0], at, key, 1, 32768, "a side in pixels"), whole_in(v[1], at, key, 1, 32768, "a side in pixels")};
  }
  const std::int64_t s = whole_in(v, at, key, 1, 32768, "a side in pixels");
  return {s, s};
}

std::pair<double, double> range_of(const YAML::Node& v, const std::string& at, const std::string& key, double lo,
                                   double hi) {
  if (!v.IsSequence() || v.size() != 2) throw InputError(at + ": '" + key + "' is [min, max]");
  const double a = real_in(v[0], at, key, lo, hi), b = real_in(v[1], at, key, lo, hi);
  if (!(a <= b)) throw InputError(at + fmt::format(": '{}' is [{:g}, {:g}]: give min <= max", key, a, b));
  return {a, b};
}

MapOpType op_type(const std::string& name, const std::string& at) {
  static const std::pair<const char*, MapOpType> kTypes[] = {
      {"Decode", MapOpType::Decode},
      {"RandomCropDecodeResize", MapOpType::RandomCropDecodeResize},
      {"RandomCrop", MapOpType::RandomCrop},
      {"CenterCrop", MapOpType::CenterCrop},
      {"Resize", MapOpType::Resize},
      {"RandomHorizontalFlip", MapOpType::RandomHorizontalFlip},
      {"RandomColorAdjust", MapOpType::RandomColorAdjust},
      {"Rescale", MapOpType::Rescale},
      {"Normalize", MapOpType::Normalize},
      {"HWC2CHW", MapOpType::HWC2CHW},
      {"CutOut", MapOpType::CutOut},
      {"RandomErasing", MapOpType::RandomErasing},
      {"TypeCast", MapOpType::TypeCast}};
  for (const auto& [n, t] : kTypes)
    if (name == n) return t;
  throw InputError(at + ": unknown map op '" + name + "' (" + kOps + ")");
}

/// One op: a name, or a mapping of one name to its parameters.
MapOp parse_op(const YAML::Node& n, const std::string& at0) {
  const std::string at = line_of(n, at0);
  std::string name;
  YAML::Node params;
  if (n.IsScalar()) {
    name = n.Scalar();
  } else if (n.IsMap() && n.size() == 1) {
    name = n.begin()->first.as<std::string>();
    params = n.begin()->second;
    if (!params.IsNull() && !params.IsMap())
      throw InputError(at + ": " + name + "'s parameters are a mapping (e.g. {size: 224})");
  } else {
    throw InputError(at + ": a map op is a name (HWC2CHW) or one name with its parameters ({Resize: {size: 224}})");
  }
  MapOp op{op_type(name, at)};
  if (op.type == MapOpType::RandomColorAdjust) op.brightness = op.contrast = op.saturation = 0.4;
  if (op.type == MapOpType::RandomErasing) {  // timm's and MindCV's defaults
    op.prob = 0.5;
    op.scale_min = 0.02;
    op.scale_max = 1.0 / 3;
    op.ratio_min = 0.3;
    op.ratio_max = 3.3;
  }
  const bool sized = op.type == MapOpType::RandomCropDecodeResize || op.type == MapOpType::RandomCrop ||
                     op.type == MapOpType::CenterCrop || op.type == MapOpType::Resize;
  bool size_given = false;
  const std::string what = at + ": " + name;
  if (params.IsMap()) {
    for (const auto& kv : params) {
      const std::string k = kv.first.as<std::string>();
      const YAML::Node& v = kv.second;
      if (k == "size" && sized) {
        if (op.type == MapOpType::Resize && v.IsScalar()) {  // one number: the shorter side, as MindSpore's Resize
          op.height = whole_in(v, what, k, 1, 32768, "a side in pixels");
          op.width = 0;
        } else {
          std::tie(op.height, op.width) = size_of(v, what, k);
        }
        size_given = true;
      } else if (k == "padding" && op.type == MapOpType::RandomCrop) {
        op.pad = whole_in(v, what, k, 0, 4096, "pixels of zero padding on each side");
      } else if (k == "scale" && (op.type == MapOpType::RandomCropDecodeResize || op.type == MapOpType::RandomErasing)) {
        std::tie(op.scale_min, op.scale_max) = range_of(v, what, k, 1e-6, 1);
      } else if (k == "ratio" && (op.type == MapOpType::RandomCropDecodeResize || op.type == MapOpType::RandomErasing)) {
        std::tie(op.ratio_min, op.ratio_max) = range_of(v, what, k, 1e-3, 1e3);
      } else if (op.type == MapOpType::RandomColorAdjust && (k == "brightness" || k == "contrast" || k == "saturation")) {
        (k == "brightness" ? op.brightness : k == "contrast" ? op.contrast : op.saturation) = real_in(v, what, k, 0, 1);
      } else if (k == "length" && op.type == MapOpType::CutOut) {
        op.height = op.width = whole_in(v, what, k, 1, 32768, "the square's side in pixels");
        size_given = true;
      } else if (k == "num_patches" && op.type == MapOpType::CutOut) {
        op.patches = whole_in(v, what, k, 1, 1024, "squares per image");
      } else if (k == "prob" && (op.type == MapOpType::RandomErasing || op.type == MapOpType::RandomHorizontalFlip)) {
        op.prob = real_in(v, what, k, 0, 1);
      } else if (k == "python") {
        op.python = yes_no(v, what, k);
      } else {
        throw InputError(what + ": unknown parameter '" + k + "'");
      }
    }
  }
  if ((sized || op.type == MapOpType::CutOut) && !size_given)
    throw InputError(what + (op.type == MapOpType::CutOut ? ": give its length ({CutOut: {length: 112}})"
                                                          : ": give its size ({" + name + ": {size: 224}})"));
  return op;
}

DatasetFormat dataset_format(const std::string& kind, const std::string& at) {
  if (kind == "mnist") return DatasetFormat::MnistIdx;
  if (kind == "cifar10") return DatasetFormat::Cifar10Binary;
  if (kind == "imagenet") return DatasetFormat::SyntheticJpeg;
  if (kind == "mindrecord") return DatasetFormat::MindRecord;
  if (kind == "generator") return DatasetFormat::Generator;
  throw InputError(at + ": 'dataset' is " + kind + ": give mnist, cifar10, imagenet (JPEG files), mindrecord or generator");
}

}  // namespace

bool offloadable(MapOpType t) {
  return t == MapOpType::Normalize || t == MapOpType::HWC2CHW || t == MapOpType::Rescale || t == MapOpType::TypeCast;
}

DataScript parse_data_script(const YAML::Node& node, const std::string& at) {
  if (!node.IsMap()) throw InputError(at + ": a data script is a mapping (" + std::string(kTopKeys) + ")");
  DataScript out;
  out.where = at;
  workloads::DataRecipe& r = out.recipe;
  bool have_dataset = false;
  std::int64_t samples = -1, record_bytes = -1;
  std::vector<std::int64_t> image;
  std::string yields;
  std::int64_t columns = -1;
  YAML::Node maps;
  for (const auto& kv : node) {
    const std::string k = kv.first.as<std::string>();
    const YAML::Node& v = kv.second;
    const std::string here = line_of(kv.first, at);
    if (k == "dataset") {
      const DatasetFormat f = dataset_format(run_yaml::scalar(v, here, k), here);
      r.dataset = f == DatasetFormat::MnistIdx        ? workloads::synthetic_mnist()
                  : f == DatasetFormat::Cifar10Binary ? workloads::synthetic_cifar10()
                  : f == DatasetFormat::SyntheticJpeg ? workloads::synthetic_imagenet()
                                                      : workloads::DatasetSpec{};
      r.dataset.format = f;
      if (f == DatasetFormat::MindRecord || f == DatasetFormat::Generator) r.dataset.source = "synthetic";
      have_dataset = true;
    } else if (k == "samples") {
      samples = whole_in(v, here, k, 1, std::int64_t{1} << 40, "the dataset's rows");
    } else if (k == "image") {
      if (!v.IsSequence() || v.size() != 3) throw InputError(here + ": 'image' is a row's [height, width, channels]");
      for (const auto& d : v) image.push_back(whole_in(d, here, k, 1, 1 << 20, "a dimension"));
    } else if (k == "record_bytes") {
      record_bytes = whole_in(v, here, k, 1, std::int64_t{1} << 34, "bytes a row");
    } else if (k == "yields") {
      yields = run_yaml::scalar(v, here, k);
      if (yields != "row" && yields != "batch")
        throw InputError(here + ": 'yields' is row (the batch op batches them) or batch (whole batches)");
    } else if (k == "columns") {
      if (!v.IsScalar())
        throw InputError(here + ": 'columns' is a count: the NumPy arrays a yield gives (e.g. 2 for an image and "
                         "its label)");
      columns = whole_in(v, here, k, 1, 64, "the NumPy arrays a yield gives");
    } else if (k == "reader_workers") {
      out.sets.push_back("pipeline.reader_workers=" + std::to_string(whole_in(v, here, k, 1, 1024, "threads")));
    } else if (k == "shuffle_buffer") {
      r.shuffle_buffer = whole_in(v, here, k, 0, std::int64_t{1} << 30, "rows");
    } else if (k == "prefetch") {
      out.sets.push_back("pipeline.prefetch_size=" + std::to_string(whole_in(v, here, k, 1, 1 << 16, "rows")));
    } else if (k == "numa") {
      out.sets.push_back(std::string("pipeline.numa_bind=") + (yes_no(v, here, k) ? "true" : "false"));
    } else if (k == "maps") {
      maps = v;
    } else {
      throw InputError(here + ": unknown key '" + k + "' (" + kTopKeys + ")");
    }
  }
  if (!have_dataset) throw InputError(at + ": give 'dataset' (mnist, cifar10, imagenet, mindrecord or generator)");
  auto& d = r.dataset;
  const bool records = d.format == DatasetFormat::MindRecord || d.format == DatasetFormat::Generator;
  if (!image.empty()) {
    if (!records)
      throw InputError(at + ": 'image' is a MindRecord's or generator's row; " +
                       workloads::dataset_format_name(d.format) + " has its own");
    d.height = image[0];
    d.width = image[1];
    d.channels = image[2];
  } else if (records) {
    throw InputError(at + ": a " + std::string(workloads::dataset_format_name(d.format)) +
                     " dataset needs 'image': a row's [height, width, channels]");
  }
  if (record_bytes > 0) {
    if (!records) throw InputError(at + ": 'record_bytes' is a MindRecord's or generator's; the others have their own");
    d.record_bytes = record_bytes;
  } else if (records) {
    d.record_bytes = d.height * d.width * d.channels * 4;  // float32 columns
  }
  if (samples > 0) d.samples = samples;
  if (records && samples < 0) throw InputError(at + ": give 'samples', the dataset's rows");
  if ((!yields.empty() || columns > 0) && d.format != DatasetFormat::Generator)
    throw InputError(at + ": 'yields' and 'columns' describe a generator dataset");
  if (columns > 0) d.columns = columns;
  if (yields == "batch") d.rows_per_yield = -1;  // the batch's, set when the batch size is known
  if (d.classes == 0) d.classes = 10;
  if (maps && !maps.IsNull()) {
    if (!maps.IsSequence()) throw InputError(line_of(maps, at) + ": 'maps' is a list of map() calls");
    std::vector<std::int64_t> workers;
    std::int64_t call = 0;
    for (const auto& m : maps) {
      const std::string here = line_of(m, at);
      if (!m.IsMap()) throw InputError(here + ": a map() call is a mapping {ops: [...], workers: N, offload: true}");
      std::vector<MapOp> ops;
      std::int64_t w = -1;
      bool offload = false;
      std::string column = "image";
      for (const auto& kv : m) {
        const std::string k = kv.first.as<std::string>();
        if (k == "ops") {
          if (!kv.second.IsSequence() || kv.second.size() == 0)
            throw InputError(here + ": 'ops' is a list of map ops (" + kOps + ")");
          for (const auto& o : kv.second) ops.push_back(parse_op(o, here));
        } else if (k == "workers") {
          w = whole_in(kv.second, here, k, 1, 1024, "threads");
        } else if (k == "offload") {
          offload = yes_no(kv.second, here, k);
        } else if (k == "column") {
          column = run_yaml::scalar(kv.second, here, k);
          if (column != "image" && column != "label")
            throw InputError(here + ": 'column' is image or label, got '" + column + "'");
        } else {
          throw InputError(here + ": unknown key '" + k + "' of a map() call (ops, workers, offload, column)");
        }
      }
      if (ops.empty()) throw InputError(here + ": a map() call needs 'ops'");
      for (const auto& op : ops)
        if ((column == "label") != (op.type == MapOpType::TypeCast))
          throw InputError(here + ": " + workloads::map_op_name(op.type) +
                           (column == "label" ? " maps an image; the label's call takes TypeCast"
                                              : " maps the label: put it in a call with column: label"));
      if (offload) {  // the call's trailing ops the device can run, as MindSpore's offload takes them
        std::size_t first = ops.size();
        while (first > 0 && offloadable(ops[first - 1].type)) --first;
        if (first == ops.size())
          throw InputError(here + ": offload: " + workloads::map_op_name(ops.back().type) +
                           " does not run on the device; offload takes the call's trailing Normalize, Rescale, "
                           "HWC2CHW and TypeCast: put those in a map() call of their own with offload, or drop "
                           "offload");
        for (std::size_t i = first; i < ops.size(); ++i) ops[i].offload = true;
      }
      for (auto& op : ops) {
        op.call = call;
        r.maps.push_back(op);
      }
      workers.push_back(w);
      ++call;
    }
    std::string list;
    bool any = false;
    for (auto w : workers) any = any || w > 0;
    if (any) {
      for (auto w : workers) {
        if (w <= 0) throw InputError(at + ": give every map() call its 'workers', or none of them");
        list += (list.empty() ? "" : ",") + std::to_string(w);
      }
      out.sets.push_back("pipeline.map_workers=" + list);
    }
  }
  // A JPEG dataset is decoded once, first; the others hold decoded arrays already.
  {
    const bool jpegs = d.format == DatasetFormat::SyntheticJpeg;
    bool decoded = !jpegs;
    for (const auto& op : r.maps) {
      if (op.type == MapOpType::TypeCast) continue;
      const bool decode = op.type == MapOpType::Decode || op.type == MapOpType::RandomCropDecodeResize;
      if (decode && !jpegs)
        throw InputError(at + ": " + workloads::map_op_name(op.type) + " decodes JPEG files, but a " +
                         workloads::dataset_format_name(d.format) +
                         " dataset's rows are decoded arrays already; take it out (RandomCrop or Resize crop and "
                         "resize them)");
      if (decode && decoded)
        throw InputError(at + ": " + workloads::map_op_name(op.type) +
                         " decodes the image a second time; keep one Decode or RandomCropDecodeResize");
      if (!decode && !decoded)
        throw InputError(at + ": " + workloads::map_op_name(op.type) +
                         " on JPEG bytes: an imagenet dataset's first image op is Decode or RandomCropDecodeResize");
      decoded = decoded || decode;
    }
    if (jpegs && !decoded && !r.maps.empty())
      throw InputError(at + ": the JPEG files are never decoded; begin the image's maps with Decode or "
                       "RandomCropDecodeResize");
  }
  if (!r.maps.empty() && r.maps.back().call + 1 > 13)
    throw InputError(at + ": at most 13 map() calls (the pipeline model's execution tree)");
  return out;
}

DataScript load_data_script(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_directory(path, ec)) throw InputError("--data " + path + ": a directory; give a data script (YAML) file");
  if (!fs::exists(path, ec)) throw InputError("--data " + path + ": no such file");
  if (!fs::is_regular_file(path, ec))
    throw InputError("--data " + path + ": not a regular file (a device, a FIFO or a socket); give a data script (YAML) file");
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::Exception& e) {
    throw InputError(path + ":" + std::to_string(e.mark.line + 1) + ": malformed YAML: " + e.msg);
  }
  return parse_data_script(root, path + ":1");
}

}  // namespace ascendsim::sim
