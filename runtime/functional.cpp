#include "runtime/functional.h"

#include "runtime/image_ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "sim/core/error.h"
#include "workloads/kernels.h"
#include "workloads/op_registry.h"

namespace ascendsim::runtime {

using workloads::DType;
using workloads::MapOpType;
using workloads::TensorRole;

namespace {

/// MindSpore's TruncatedNormal(sigma): normal draws outside two standard deviations are redrawn.
float truncated_normal(std::mt19937_64& rng, double sigma) {
  std::normal_distribution<double> d(0.0, 1.0);
  for (;;) {
    const double v = d(rng);
    if (std::fabs(v) <= 2.0) return static_cast<float>(v * sigma);
  }
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

/// The normalisation the dataset's recipe uses, per channel: the seed's LeNet script for MNIST;
/// the model zoo's CIFAR-10 script (on 0-1 values); ImageNet's, for recipes that normalise
/// without rescaling first (0-255 values).
void dataset_mean_std(std::int64_t channels, const std::vector<workloads::MapOp>& maps, std::vector<double>& mean,
                      std::vector<double>& std) {
  bool rescaled = false;
  for (const auto& m : maps) {
    if (m.type == MapOpType::Rescale) rescaled = true;
    if (m.type == MapOpType::Normalize) break;
  }
  if (channels == 1) {
    mean = {0.1307};
    std = {0.3081};
  } else if (rescaled) {
    mean = {0.4914, 0.4822, 0.4465};
    std = {0.2023, 0.1994, 0.2010};
  } else {
    mean = {0.485 * 255, 0.456 * 255, 0.406 * 255};
    std = {0.229 * 255, 0.224 * 255, 0.225 * 255};
  }
}

}  // namespace

FunctionalModel::FunctionalModel(const workloads::Workload& w, const FunctionalOptions& opt,
                                 const std::string& dataset_dir, std::int64_t steps_per_epoch)
    : m_w(w), m_opt(opt), m_dir(dataset_dir), m_steps_per_epoch(steps_per_epoch) {
  if (dataset_dir.empty())
    throw sim::InputError("dataset", "dataset",
                          "functional mode computes on real samples: give --dataset DIR (e.g. "
                          "/usr/share/datasets/fashion-mnist)");
  // Every op must have a kernel and every map op a transform before anything runs.
  std::map<std::string, std::string> missing;
  for (const auto& op : m_w.graph.ops())
    if (!op.def->compute) missing.emplace(op.type, op.name);
  if (!missing.empty()) {
    std::string list;
    for (const auto& [type, name] : missing) list += (list.empty() ? "" : ", ") + type + " (first: " + name + ")";
    throw sim::InputError("functional", "functional",
                          m_w.name + " cannot be computed in functional mode: no kernel for " + list);
  }
  m_data = load_dataset_values(dataset_dir, false);
  if (!m_data.tokens.empty()) {  // a sequence model on a token stream: windows of S + 1 tokens
    const auto& in = m_w.graph.tensor(m_w.batch_inputs.at(0));
    const bool per_token = in.dtype == DType::I32 && in.shape.size() == 2 && m_w.batch_inputs.size() == 2 &&
                           m_w.graph.tensor(m_w.batch_inputs[1]).shape == in.shape;
    // The built-in decoders read records of S + 1 tokens, split into inputs and labels on the device.
    m_records = in.dtype == DType::I32 && in.shape.size() == 2 && m_w.batch_inputs.size() == 1;
    if (!per_token && !m_records)
      throw sim::InputError("dataset", "dataset",
                            dataset_dir + " holds a token stream; " + m_w.name +
                                " does not read token ids [N, S] with a label per position (a language model)");
    if (m_opt.eval)
      throw sim::InputError("eval", "eval", "accuracy is an image classifier's; a token stream has no test classes");
    if (m_data.classes > m_w.data.dataset.classes)
      throw sim::InputError("dataset", "dataset",
                            dataset_dir + ": tokens up to " + std::to_string(m_data.classes - 1) + ", beyond " +
                                m_w.name + "'s vocabulary of " + std::to_string(m_w.data.dataset.classes));
    m_seq = m_records ? in.shape[1] - 1 : in.shape[1];
    m_windows = (static_cast<std::int64_t>(m_data.tokens.size()) - 1) / m_seq;
    if (m_windows < m_w.batch_size)
      throw sim::InputError("dataset", "dataset",
                            dataset_dir + ": " + std::to_string(m_data.tokens.size()) + " tokens make " +
                                std::to_string(m_windows) + " sequences of " + std::to_string(m_seq) +
                                ", fewer than one batch");
    m_state.resize(m_w.graph.ops().size());
    init_tensors();
    if (!m_opt.init_from.empty()) load_weights(m_opt.init_from);
    return;
  }
  dataset_mean_std(m_data.channels, m_w.data.maps, m_mean, m_std);
  for (const auto& m : m_w.data.maps) {
    if (m.type == MapOpType::CutOut || m.type == MapOpType::RandomErasing || m.pad > 0 || m.python)
      throw sim::InputError("data", "data",
                            std::string("functional mode does not compute ") + workloads::map_op_name(m.type) +
                                (m.pad > 0 ? " with padding" : m.python ? " in Python" : "") +
                                "; time the script without values, or leave the op out");
    if ((m.type == MapOpType::Decode || m.type == MapOpType::RandomCropDecodeResize) && m_data.files.empty())
      throw sim::InputError("dataset", "dataset",
                            m_w.name + "'s recipe decodes JPEG files: give an image folder (class folders of JPEGs)");
  }
  if (m_data.count() < m_w.batch_size)
    throw sim::InputError("dataset", "dataset", dataset_dir + ": fewer samples than one batch");
  m_state.resize(m_w.graph.ops().size());
  init_tensors();
  if (!m_opt.init_from.empty()) load_weights(m_opt.init_from);
}

FunctionalModel::~FunctionalModel() = default;

const std::vector<std::string>& FunctionalModel::init_schemes() {
  static const std::vector<std::string> schemes{"script", "he-uniform"};
  return schemes;
}

void FunctionalModel::init_tensors() {
  const auto& g = m_w.graph;
  m_values.resize(g.tensors().size());
  std::mt19937_64 rng(m_opt.seed);
  const bool lenet = m_w.name == "lenet5";
  const bool he_uniform = m_opt.init == "he-uniform";
  const bool dense_defaults = m_w.name == "mlp-slice" || he_uniform;  // MindSpore 2's nn.Dense, as seed 002
  std::map<std::string, std::size_t> by_name;
  for (std::size_t i = 0; i < g.tensors().size(); ++i) by_name.emplace(g.tensors()[i].name, i);
  // The convolution or dense weight whose fan-in sets tensor i's bound: itself when it has two
  // dimensions or more; for a bias NAME.bias, NAME.weight (or, without one, the tensor before it);
  // -1 for anything else (BatchNorm's scale and shift).
  auto fan_in_weight = [&](std::size_t i) -> std::ptrdiff_t {
    const auto& ts = g.tensors();
    if (ts[i].shape.size() >= 2) return static_cast<std::ptrdiff_t>(i);
    const std::string& n = ts[i].name;
    if (!ends_with(n, ".bias")) return -1;
    const auto w = by_name.find(n.substr(0, n.size() - 5) + ".weight");
    if (w == by_name.end() && i == 0) return -1;
    const std::size_t at = w != by_name.end() ? w->second : i - 1;
    return ts[at].shape.size() >= 2 ? static_cast<std::ptrdiff_t>(at) : -1;
  };
  // The norms' scales (LayerNorm's and RMSNorm's gamma, through a cast): ones, as their modules'.
  std::set<workloads::TensorId> scales;
  {
    std::map<workloads::TensorId, workloads::TensorId> cast_of;  // a cast's result -> what it casts
    for (const auto& op : g.ops())
      if (op.type == "Cast") cast_of[op.outputs.at(0)] = op.inputs.at(0);
    for (const auto& op : g.ops())
      if ((op.type == "LayerNorm" || op.type == "RmsNorm") && op.inputs.size() > 1) {
        workloads::TensorId t = op.inputs[1];
        while (cast_of.count(t)) t = cast_of.at(t);
        scales.insert(t);
      }
  }
  for (std::size_t i = 0; i < g.tensors().size(); ++i) {
    const auto& t = g.tensors()[i];
    auto& v = m_values[i];
    v.assign(static_cast<std::size_t>(t.elements()), 0.0f);
    const std::string& n = t.name;
    const std::ptrdiff_t weight = fan_in_weight(i);
    const bool scheme_applies = he_uniform && t.role == TensorRole::Parameter && weight >= 0;
    if (m_w.initial_values && !scheme_applies) {  // the workload's own values (an imported model's initializers)
      if (auto it = m_w.initial_values->find(n); it != m_w.initial_values->end()) {
        if (static_cast<std::int64_t>(it->second.size()) != t.elements())
          throw std::logic_error("functional mode: " + n + " has " + std::to_string(it->second.size()) + " values");
        v = it->second;
        if (t.dtype == DType::F16)
          for (auto& x : v) x = workloads::round_to_fp16(x);
        continue;
      }
    }
    switch (t.role) {
      case TensorRole::Parameter:
        if (ends_with(n, ".gamma") || scales.count(static_cast<workloads::TensorId>(i))) {
          std::fill(v.begin(), v.end(), 1.0f);
        } else if (ends_with(n, ".beta")) {
          // zeros
        } else if (dense_defaults && weight >= 0) {
          // nn.Dense's and nn.Conv2d's defaults: weight HeUniform(negative_slope=sqrt(5)) and bias
          // uniform, both U(-1/sqrt(fan_in), 1/sqrt(fan_in)), fan_in = the weight's elements per
          // output channel.
          const auto& ws = g.tensors()[static_cast<std::size_t>(weight)].shape;
          std::int64_t fan_in = 1;
          for (std::size_t d = 1; d < ws.size(); ++d) fan_in *= ws[d];
          const double bound = 1.0 / std::sqrt(static_cast<double>(fan_in));
          std::uniform_real_distribution<double> u(-bound, bound);
          for (auto& x : v) x = static_cast<float>(u(rng));
        } else if (lenet) {  // the seed: TruncatedNormal(0.02) for every weight and bias
          for (auto& x : v) x = truncated_normal(rng, 0.02);
        } else if (t.shape.size() == 4) {  // He normal, fan out (the model zoo's ResNet convolutions)
          const double fan_out = static_cast<double>(t.shape[0] * t.shape[2] * t.shape[3]);
          for (auto& x : v)
            x = truncated_normal(rng, std::sqrt(2.0 / fan_out) / 0.8796);  // 0.8796: std of N(0,1) cut at 2
        } else if (t.shape.size() == 2) {
          for (auto& x : v) x = truncated_normal(rng, 0.01);
        }
        break;
      case TensorRole::State:
        if (ends_with(n, "moving_variance")) std::fill(v.begin(), v.end(), 1.0f);
        break;
      case TensorRole::OptimizerState:
        if (n == "learning_rate")
          std::fill(v.begin(), v.end(), static_cast<float>(m_w.hyper.learning_rate));
        else if (n == "momentum")
          v[0] = static_cast<float>(m_w.hyper.momentum);
        else if (n != "global_step" && n.rfind("moments.", 0) != 0 && n.rfind("adam_m.", 0) != 0 &&
                 n.rfind("adam_v.", 0) != 0)
          throw std::logic_error("functional mode: no initial value for optimizer tensor " + n);
        break;
      case TensorRole::Constant:
        if (n == "sens" || n == "loss_scale")
          v[0] = static_cast<float>(m_w.recipe.loss_scale);
        else if (n == "loss_scale_reciprocal")
          v[0] = static_cast<float>(1.0 / m_w.recipe.loss_scale);
        else if (n == "weight_decay")
          v[0] = static_cast<float>(m_w.hyper.weight_decay);
        else if (n == "one" || n == "clip_norm")
          v[0] = 1.0f;
        else if (n == "mask_value")  // BERT's padding mask: (1 - mask) * -10000 on the scores
          v[0] = -10000.0f;
        else if (n == "position_ids")
          for (std::size_t k = 0; k < v.size(); ++k) v[k] = static_cast<float>(k);
        else if (n == "causal_mask") {  // a decoder's: -10000 on the keys after each query
          const auto s = static_cast<std::size_t>(t.shape.at(0));
          for (std::size_t q = 0; q < s; ++q)
            for (std::size_t k = q + 1; k < s; ++k) v[q * s + k] = -10000.0f;
        } else if (n == "rotary.cos" || n == "rotary.sin") {  // angle p / 10000^(2i/d), both halves alike
          const std::int64_t s = t.shape.at(0), d = t.shape.at(1);
          for (std::int64_t p = 0; p < s; ++p)
            for (std::int64_t j = 0; j < d; ++j) {
              const double angle = static_cast<double>(p) /
                                   std::pow(10000.0, 2.0 * static_cast<double>(j % (d / 2)) / static_cast<double>(d));
              v[static_cast<std::size_t>(p * d + j)] =
                  static_cast<float>(n == "rotary.cos" ? std::cos(angle) : std::sin(angle));
            }
        } else
          throw std::logic_error("functional mode: no value for constant " + n);
        break;
      default:
        break;
    }
    if (t.dtype == DType::F16)
      for (auto& x : v) x = workloads::round_to_fp16(x);
  }
}

namespace {

sim::InputError weights_error(const std::string& path, const std::string& what) {
  return sim::InputError("init_from", "init_from", path + ": " + what);
}

}  // namespace

WeightsIndex parse_weights_index(const std::string& text, const std::string& path) {
  auto bad = [&](const std::string& what) { return weights_error(path, what); };
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const std::exception& e) {
    throw bad(std::string("not a JSON weights index (") + e.what() + ")");
  }
  if (!j.is_object() || !j.contains("data") || !j["data"].is_string() || !j.contains("tensors") ||
      !j["tensors"].is_array())
    throw bad("expected {\"data\": FILE, \"tensors\": [...]}");
  WeightsIndex index;
  index.data = j["data"].get<std::string>();
  for (const auto& e : j["tensors"]) {
    if (!e.is_object() || !e.contains("name") || !e["name"].is_string()) throw bad("a tensor entry without a name");
    const std::string name = e["name"].get<std::string>();
    WeightsIndex::Entry entry;
    if (!e.contains("shape") || !e["shape"].is_array()) throw bad("tensor '" + name + "' has no shape (a list)");
    for (const auto& d : e["shape"]) {
      if (!d.is_number_integer() || (d.is_number_unsigned() && d.get<std::uint64_t>() > (1ULL << 40)) ||
          d.get<std::int64_t>() < 0)
        throw bad("tensor '" + name + "': its shape holds " + d.dump() + ", not a size");
      entry.shape.push_back(d.get<std::int64_t>());
    }
    if (e.contains("dtype") && (!e["dtype"].is_string() || e["dtype"].get<std::string>() != "float32"))
      throw bad("tensor '" + name + "' is " + e["dtype"].dump() + ", not float32");
    if (!e.contains("offset") || !e["offset"].is_number_integer() || e["offset"].get<std::int64_t>() < 0 ||
        (e["offset"].is_number_unsigned() && e["offset"].get<std::uint64_t>() > (1ULL << 62)))
      throw bad("tensor '" + name + "' needs an offset: its first byte in the data file, 0 or more");
    entry.offset = e["offset"].get<std::int64_t>();
    if (!index.tensors.emplace(name, std::move(entry)).second) throw bad("tensor '" + name + "' is listed twice");
  }
  return index;
}

void read_weights(const WeightsIndex& index, const std::string& bytes, const workloads::Graph& g,
                  const std::string& network, const std::string& path, std::vector<std::vector<float>>& values) {
  auto bad = [&](const std::string& what) { return weights_error(path, what); };
  std::set<std::string> unused;
  for (const auto& [name, e] : index.tensors) unused.insert(name);
  const auto size = static_cast<std::int64_t>(bytes.size());
  for (std::size_t i = 0; i < g.tensors().size(); ++i) {
    const auto& t = g.tensors()[i];
    if (t.role != TensorRole::Parameter && t.role != TensorRole::State) continue;
    const auto it = index.tensors.find(t.name);
    if (it == index.tensors.end()) {
      if (t.role == TensorRole::State) continue;  // statistics keep their initial values
      throw bad("no tensor '" + t.name + "' (a parameter of " + network + ")");
    }
    const auto& e = it->second;
    if (e.shape != t.shape)
      throw bad("tensor '" + t.name + "' has shape " + workloads::shape_string(e.shape) + ", " + network + " needs " +
                workloads::shape_string(t.shape));
    const std::int64_t need = t.elements() * 4;
    if (e.offset > size || need > size - e.offset)
      throw bad("tensor '" + t.name + "' lies outside " + index.data + " (offset " + std::to_string(e.offset) + ", " +
                std::to_string(need) + " bytes of " + std::to_string(size) + ")");
    auto& v = values.at(i);
    v.resize(static_cast<std::size_t>(t.elements()));
    std::memcpy(v.data(), bytes.data() + e.offset, static_cast<std::size_t>(need));
    if (t.dtype == DType::F16)
      for (auto& x : v) x = workloads::round_to_fp16(x);
    unused.erase(t.name);
  }
  if (!unused.empty()) throw bad("tensor '" + *unused.begin() + "' is not a parameter of " + network);
}

void FunctionalModel::load_weights(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw weights_error(path, "cannot open");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const WeightsIndex index = parse_weights_index(text, path);
  const std::filesystem::path data = std::filesystem::path(path).parent_path() / index.data;
  std::ifstream bin(data, std::ios::binary);
  if (!bin || std::filesystem::is_directory(data))
    throw weights_error(path, "its data file " + data.string() + " cannot be opened");
  const std::string bytes((std::istreambuf_iterator<char>(bin)), std::istreambuf_iterator<char>());
  read_weights(index, bytes, m_w.graph, m_w.name, path, m_values);
}

void FunctionalModel::transform(std::int64_t epoch, std::int64_t sample, std::vector<float>& out, bool augment) {
  std::int64_t h = m_data.height, w = m_data.width;
  const std::int64_t c = m_data.channels;
  std::vector<float> img;       // HWC
  if (!m_data.files.empty()) {  // an image folder: the file, decoded (the recipe's Decode)
    const std::string& path = m_data.files[static_cast<std::size_t>(sample)];
    std::ifstream f(path, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    int iw = 0, ih = 0;
    std::vector<std::uint8_t> rgb;
    try {
      rgb = image::decode_jpeg(bytes, iw, ih, path);
    } catch (const std::runtime_error& e) {
      throw sim::InputError("dataset", "dataset", e.what());
    }
    h = ih;
    w = iw;
    img = image::to_float(rgb.data(), h * w * 3);
  } else {
    img = image::to_float(m_data.sample(sample), h * w * c);
  }
  std::mt19937_64 rng(m_opt.seed * 0x9E3779B97F4A7C15ULL ^ (static_cast<std::uint64_t>(epoch) << 32) ^
                      static_cast<std::uint64_t>(sample));
  bool chw = false;
  // The image holds bytes (as read or decoded) until a Rescale or Normalize makes it float32;
  // MindSpore's Resize of bytes gives bytes (OpenCV's bilinear resize rounds to the nearest).
  bool bytes = true;
  for (const auto& m : m_w.data.maps) {
    // Evaluation reads the samples as they are (RandomCropDecodeResize: the whole image resized).
    if (m.random() && !augment && m.type != MapOpType::RandomCropDecodeResize) continue;
    switch (m.type) {
      case MapOpType::Resize:
        img = image::resize_bilinear(img, h, w, c, m.height, m.width);
        if (bytes)
          for (auto& v : img) v = std::clamp(std::floor(v + 0.5f), 0.0f, 255.0f);
        h = m.height;
        w = m.width;
        break;
      case MapOpType::RandomCrop: {
        if (m.area != 1.0) {  // ImageNet's random resized crop: 8-100% of the area, aspect 3/4 to 4/3
          const image::Window win = image::random_resized_crop_window(h, w, 0.08, 1.0, 3.0 / 4, 4.0 / 3, rng);
          img = image::crop(img, h, w, c, win.y0, win.x0, win.h, win.w);
          h = win.h;
          w = win.w;
          break;
        }
        // CIFAR-10's: pad 4 with zeros, crop at a random offset.
        const std::int64_t pad = 4;
        std::uniform_int_distribution<std::int64_t> oy(0, h + 2 * pad - m.height), ox(0, w + 2 * pad - m.width);
        const std::int64_t y0 = oy(rng), x0 = ox(rng);
        img = image::crop(img, h, w, c, y0, x0, m.height, m.width, pad);
        h = m.height;
        w = m.width;
        break;
      }
      case MapOpType::CenterCrop: {
        const std::int64_t ch = std::min(h, m.height), cw = std::min(w, m.width);
        img = image::crop(img, h, w, c, (h - ch) / 2, (w - cw) / 2, ch, cw);
        h = ch;
        w = cw;
        break;
      }
      case MapOpType::RandomCropDecodeResize: {
        // The image was decoded whole; the window's pixels are the ones a cropped decode gives
        // (the cost model charges the decode of the window only).
        const image::Window win =
            augment ? image::random_resized_crop_window(h, w, m.scale_min, m.scale_max, m.ratio_min, m.ratio_max, rng)
                    : image::Window{0, 0, h, w};
        img = image::resize_bilinear(image::crop(img, h, w, c, win.y0, win.x0, win.h, win.w), win.h, win.w, c,
                                     m.height, m.width);
        for (auto& v : img) v = std::clamp(std::floor(v + 0.5f), 0.0f, 255.0f);  // 8-bit output
        h = m.height;
        w = m.width;
        break;
      }
      case MapOpType::RandomHorizontalFlip:
        if (std::bernoulli_distribution(0.5)(rng)) image::flip_horizontal(img, h, w, c);
        break;
      case MapOpType::RandomColorAdjust:
        image::random_color_adjust(img, h, w, c, m.brightness, m.contrast, m.saturation, rng);
        break;
      case MapOpType::Rescale:
        image::rescale(img, 1.0 / 255.0, 0.0);
        bytes = false;
        break;
      case MapOpType::Normalize:
        image::normalize(img, c, m_mean, m_std);
        bytes = false;
        break;
      case MapOpType::HWC2CHW:
        img = image::hwc2chw(img, h, w, c);
        chw = true;
        break;
      default:  // TypeCast (the labels' int32); the rest are refused up front
        break;
    }
  }
  if (!chw && c > 1) throw std::logic_error("functional mode: the recipe never transposes to CHW");
  out.insert(out.end(), img.begin(), img.end());
}

FunctionalModel::Batch FunctionalModel::make_batch(std::int64_t index) {
  // MindSpore's shuffle reorders every pass over the dataset; here a seeded permutation per pass.
  const std::int64_t epoch = index / m_steps_per_epoch, pos = index % m_steps_per_epoch;
  const std::int64_t samples = m_seq > 0 ? m_windows : m_data.count();
  if (epoch != m_perm_epoch) {
    m_perm.resize(static_cast<std::size_t>(samples));
    for (std::int64_t i = 0; i < samples; ++i) m_perm[static_cast<std::size_t>(i)] = i;
    std::mt19937_64 rng(m_opt.seed + 0x51ED2701ULL * static_cast<std::uint64_t>(epoch + 1));
    std::shuffle(m_perm.begin(), m_perm.end(), rng);
    m_perm_epoch = epoch;
  }
  Batch b;
  if (m_seq > 0) {  // each sample a window: its first S tokens in, each one's next token its label
    for (std::int64_t k = 0; k < m_w.batch_size; ++k) {
      const std::int64_t at = (pos * m_w.batch_size + k) * m_opt.num_shards + m_opt.shard_id;
      const std::int64_t w = m_perm[static_cast<std::size_t>(at % samples)];
      for (std::int64_t i = 0; i < m_seq; ++i) {
        b.image.push_back(static_cast<float>(m_data.tokens[static_cast<std::size_t>(w * m_seq + i)]));
        b.label.push_back(static_cast<float>(m_data.tokens[static_cast<std::size_t>(w * m_seq + i + 1)]));
      }
      if (m_records) b.image.push_back(b.label.back());  // the record: the window's S + 1 tokens
    }
    return b;
  }
  const auto& image = m_w.graph.tensor(m_w.batch_inputs.at(0));
  b.image.reserve(static_cast<std::size_t>(image.elements()));
  for (std::int64_t k = 0; k < m_w.batch_size; ++k) {
    const std::int64_t at = (pos * m_w.batch_size + k) * m_opt.num_shards + m_opt.shard_id;
    const std::int64_t s = m_perm[static_cast<std::size_t>(at % m_data.count())];
    transform(epoch, s, b.image, true);
    b.label.push_back(static_cast<float>(m_data.labels[static_cast<std::size_t>(s)]));
  }
  if (static_cast<std::int64_t>(b.image.size()) != image.elements())
    throw sim::InputError("dataset", "dataset",
                          m_dir + ": a transformed sample has " +
                              std::to_string(b.image.size() / static_cast<std::size_t>(m_w.batch_size)) + " values; " +
                              m_w.name + "'s input " + workloads::shape_string(image.shape) + " needs " +
                              std::to_string(image.elements() / m_w.batch_size) + " per sample");
  return b;
}

void FunctionalModel::feed(Batch b, bool keep) {
  if (keep && static_cast<std::int64_t>(m_dumped.size()) < m_opt.dump_steps) m_dumped.push_back(b);
  const auto& g = m_w.graph;
  m_values[static_cast<std::size_t>(m_w.batch_inputs[0])] = std::move(b.image);
  if (m_w.batch_inputs.size() > 1) m_values[static_cast<std::size_t>(m_w.batch_inputs[1])] = std::move(b.label);
  if (g.tensor(m_w.batch_inputs[0]).dtype == DType::F16)
    for (auto& x : m_values[static_cast<std::size_t>(m_w.batch_inputs[0])]) x = workloads::round_to_fp16(x);
}

void FunctionalModel::copy_batch_to_device() { feed(make_batch(m_next_batch++)); }

void FunctionalModel::send_batch_to_queue() { m_queue.push_back(make_batch(m_next_batch++)); }

double FunctionalModel::evaluating(bool on) {
  m_evaluating = on;
  return on ? -1 : evaluate();
}

void FunctionalModel::get_next() {
  if (m_evaluating) return;
  if (m_queue.empty()) throw std::logic_error("functional mode: GetNext on an empty data queue");
  feed(std::move(m_queue.front()));
  m_queue.pop_front();
}

void compute_op(const workloads::Graph& g, const workloads::Op& op, std::vector<std::vector<float>>& values,
                std::shared_ptr<void>* state, bool inference) {
  workloads::KernelIO io{g, op, {}, {}, state, inference};
  for (auto t : op.inputs) io.in.push_back(values[static_cast<std::size_t>(t)].data());
  for (auto t : op.outputs) io.out.push_back(values[static_cast<std::size_t>(t)].data());
  op.def->compute(io);
  for (auto t : op.outputs)
    if (g.tensor(t).dtype == DType::F16)
      for (auto& x : values[static_cast<std::size_t>(t)]) x = workloads::round_to_fp16(x);
}

void FunctionalModel::run_ops(Passes passes, bool inference) {
  using workloads::Pass;
  const auto& g = m_w.graph;
  for (std::size_t i = 0; i < g.ops().size(); ++i) {
    const auto& op = g.ops()[i];
    if ((passes == Passes::Forward && op.pass != Pass::Forward) ||
        (passes == Passes::ForwardBackward && op.pass == Pass::Optimizer) ||
        (passes == Passes::Optimizer && op.pass != Pass::Optimizer))
      continue;
    compute_op(g, op, m_values, &m_state[i], inference);
  }
}

void FunctionalModel::step() {
  forward_backward();
  optimize();
}

void FunctionalModel::forward_backward() {
  if (m_evaluating) return;
  const auto t0 = std::chrono::steady_clock::now();
  run_ops(m_w.training ? Passes::ForwardBackward : Passes::All, !m_w.training);  // --mode infer runs as evaluated
  m_wall_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void FunctionalModel::optimize() {
  if (m_evaluating) return;
  const auto t0 = std::chrono::steady_clock::now();
  if (m_w.training) run_ops(Passes::Optimizer, false);
  ++m_steps;
  m_wall_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::vector<workloads::TensorId> FunctionalModel::gradients() const {
  const auto& g = m_w.graph;
  std::vector<char> backward(g.tensors().size(), 0), listed(g.tensors().size(), 0);
  for (const auto& op : g.ops())
    if (op.pass == workloads::Pass::Backward)
      for (auto t : op.outputs) backward[static_cast<std::size_t>(t)] = 1;
  std::vector<workloads::TensorId> out;
  for (const auto& op : g.ops())
    if (op.pass == workloads::Pass::Optimizer)
      for (auto t : op.inputs)
        if (backward[static_cast<std::size_t>(t)] && !listed[static_cast<std::size_t>(t)]) {
          listed[static_cast<std::size_t>(t)] = 1;
          out.push_back(t);
        }
  return out;
}

double FunctionalModel::read_loss() { return m_values[static_cast<std::size_t>(m_w.loss)].at(0); }

double FunctionalModel::evaluate() {
  const auto& g = m_w.graph;
  // The logits: what the forward pass's softmax cross-entropy reads.
  workloads::TensorId logits = -1;
  for (const auto& op : g.ops())
    if (op.pass == workloads::Pass::Forward && op.type.find("SoftmaxCrossEntropy") != std::string::npos)
      logits = op.inputs[0];
  if (logits < 0) throw std::logic_error("functional mode: no softmax cross-entropy to read logits from");
  const DatasetValues test = load_dataset_values(m_dir, true);
  // The evaluation network (MindSpore's Model.eval): BatchNorm by its moving statistics, which stay
  // as training left them, and no Dropout.
  DatasetValues train = std::move(m_data);
  m_data = test;
  const std::int64_t classes = g.tensor(logits).shape[1];
  std::int64_t correct = 0;
  for (std::int64_t first = 0; first < test.count(); first += m_w.batch_size) {
    Batch b;
    for (std::int64_t k = 0; k < m_w.batch_size; ++k) {
      const std::int64_t s = std::min(first + k, test.count() - 1);  // pad a last partial batch
      transform(0, s, b.image, false);
      b.label.push_back(static_cast<float>(test.labels[static_cast<std::size_t>(s)]));
    }
    feed(std::move(b), false);
    run_ops(Passes::Forward, true);
    const float* l = m_values[static_cast<std::size_t>(logits)].data();
    for (std::int64_t k = 0; k < m_w.batch_size && first + k < test.count(); ++k) {
      const float* row = l + k * classes;
      const auto best = std::max_element(row, row + classes) - row;
      correct += best == test.labels[static_cast<std::size_t>(first + k)];
    }
  }
  m_data = std::move(train);
  m_evaluated = test.count();
  return static_cast<double>(correct) / static_cast<double>(test.count());
}

std::string FunctionalModel::weights_index(const std::string& bin_name) const {
  nlohmann::ordered_json j = {{"format", "ascendsim-weights"}, {"version", 1}, {"data", bin_name}};
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  std::int64_t offset = 0;
  for (const auto& t : m_w.graph.tensors()) {
    if (t.role != TensorRole::Parameter && t.role != TensorRole::State) continue;
    list.push_back({{"name", t.name}, {"shape", t.shape}, {"dtype", "float32"}, {"offset", offset}});
    offset += t.elements() * 4;
  }
  j["tensors"] = list;
  return j.dump(2) + "\n";
}

std::string FunctionalModel::weights_data() const {
  std::string out;
  for (std::size_t i = 0; i < m_w.graph.tensors().size(); ++i) {
    const auto& t = m_w.graph.tensors()[i];
    if (t.role != TensorRole::Parameter && t.role != TensorRole::State) continue;
    out.append(reinterpret_cast<const char*>(m_values[i].data()), m_values[i].size() * sizeof(float));
  }
  return out;
}

std::string FunctionalModel::batches_index() const {
  const auto& image = m_w.graph.tensor(m_w.batch_inputs.at(0));
  nlohmann::ordered_json j = {
      {"format", "ascendsim-batches"},
      {"version", 1},
      {"batches", m_dumped.size()},
      {"batch_size", m_w.batch_size},
      {"image_shape", image.shape},
      {"images", "images.bin"},
      {"label_shape", m_seq > 0 && m_w.batch_inputs.size() == 1 ? workloads::Shape{m_w.batch_size, m_seq}
                      : m_seq > 0                               ? m_w.graph.tensor(m_w.batch_inputs[1]).shape
                                                                : workloads::Shape{m_w.batch_size}},
      {"images_dtype", "float32"},
      {"labels", "labels.bin"},
      {"labels_dtype", "int32"}};
  return j.dump(2) + "\n";
}

std::string FunctionalModel::batches_images() const {
  std::string out;
  for (const auto& b : m_dumped)
    out.append(reinterpret_cast<const char*>(b.image.data()), b.image.size() * sizeof(float));
  return out;
}

std::string FunctionalModel::batches_labels() const {
  std::string out;
  for (const auto& b : m_dumped)
    for (float l : b.label) {
      const auto v = static_cast<std::int32_t>(l);
      out.append(reinterpret_cast<const char*>(&v), sizeof v);
    }
  return out;
}

}  // namespace ascendsim::runtime
