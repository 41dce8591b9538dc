// Functional mode's kernels for the ops of ops_nn.cpp, and the broadcasting forms of Add and Mul:
// plain loops over the graph's layouts (NCHW, row-major), in float with double accumulators
// where values are summed.
#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <stdexcept>

#include "workloads/kernels.h"
#include "workloads/op_registry.h"

namespace ascendsim::workloads {

std::vector<std::int64_t> broadcast_index(const Shape& in, const Shape& out) {
  const std::size_t r = out.size(), off = r - in.size();
  std::vector<std::int64_t> stride(r, 0);  // the operand's stride along each output axis (0: broadcast)
  std::int64_t s = 1;
  for (std::size_t k = r; k-- > off;) {
    const std::int64_t d = in[k - off];
    stride[k] = d == 1 ? 0 : s;
    s *= d;
  }
  std::int64_t total = 1;
  for (auto d : out) total *= d;
  std::vector<std::int64_t> idx(static_cast<std::size_t>(total));
  std::vector<std::int64_t> pos(r, 0);
  std::int64_t at = 0;
  for (std::int64_t i = 0; i < total; ++i) {
    idx[static_cast<std::size_t>(i)] = at;
    for (std::size_t k = r; k-- > 0;) {  // the next output position, carrying
      ++pos[k];
      at += stride[k];
      if (pos[k] < out[k]) break;
      at -= stride[k] * out[k];
      pos[k] = 0;
    }
  }
  return idx;
}

namespace {

void binary(KernelIO& io, const std::function<float(float, float)>& f) {
  const Shape& ys = io.out_shape(0);
  const std::int64_t n = io.out_elements(0);
  if (io.in_shape(0) == ys && io.in_elements(1) == n) {
    for (std::int64_t i = 0; i < n; ++i) io.out[0][i] = f(io.in[0][i], io.in[1][i]);
    return;
  }
  if (io.in_shape(0) == ys && io.in_elements(1) == 1) {  // by a scalar (the optimizer's unscale, decay)
    const float b = io.in[1][0];
    for (std::int64_t i = 0; i < n; ++i) io.out[0][i] = f(io.in[0][i], b);
    return;
  }
  // Each operand's index per output element, worked out on the first step (the shapes are fixed).
  using Index = std::pair<std::vector<std::int64_t>, std::vector<std::int64_t>>;
  const auto& [a, b] = kept<Index>(io, [&] {
    return Index{broadcast_index(io.in_shape(0), ys), broadcast_index(io.in_shape(1), ys)};
  });
  for (std::int64_t i = 0; i < n; ++i)
    io.out[0][i] = f(io.in[0][a[static_cast<std::size_t>(i)]], io.in[1][b[static_cast<std::size_t>(i)]]);
}

void reduce_sum(KernelIO& io) {  // x summed over the axes its output shape broadcasts
  const auto& to =
      kept<std::vector<std::int64_t>>(io, [&] { return broadcast_index(io.out_shape(0), io.in_shape(0)); });
  std::vector<double> acc(static_cast<std::size_t>(io.out_elements(0)), 0.0);
  for (std::size_t i = 0; i < to.size(); ++i) acc[static_cast<std::size_t>(to[i])] += io.in[0][i];
  std::copy(acc.begin(), acc.end(), io.out[0]);
}

void unary(KernelIO& io, const std::function<float(float)>& f) {
  const std::int64_t n = io.out_elements(0);
  for (std::int64_t i = 0; i < n; ++i) io.out[0][i] = f(io.in[0][i]);
}

/// dy (input 0) times f(saved) (input 1).
void gradient(KernelIO& io, const std::function<float(float)>& f) {
  const std::int64_t n = io.out_elements(0);
  for (std::int64_t i = 0; i < n; ++i) io.out[0][i] = io.in[0][i] * f(io.in[1][i]);
}

// Average pooling: count_include_pad (attrs.count 1) divides by the whole window, else by the
// window's cells inside the input.
template <typename F>
void each_avg_window(const Shape& xs, const Shape& ys, const PoolAttr& p, bool include_pad, F&& f) {
  const std::int64_t planes = xs[0] * xs[1], h = xs[2], w = xs[3], ho = ys[2], wo = ys[3];
  for (std::int64_t c = 0; c < planes; ++c)
    for (std::int64_t oy = 0; oy < ho; ++oy)
      for (std::int64_t ox = 0; ox < wo; ++ox) {
        const std::int64_t y0 = oy * p.stride - p.pad, x0 = ox * p.stride - p.pad;
        const std::int64_t ya = std::max<std::int64_t>(y0, 0), yb = std::min(y0 + p.kernel, h);
        const std::int64_t xa = std::max<std::int64_t>(x0, 0), xb = std::min(x0 + p.width(), w);
        const double count =
            include_pad ? static_cast<double>(p.kernel * p.width()) : static_cast<double>((yb - ya) * (xb - xa));
        f(c * h * w, ya, yb, xa, xb, w, (c * ho + oy) * wo + ox, count);
      }
}

void avg_pool(KernelIO& io) {
  each_avg_window(io.in_shape(0), io.out_shape(0), io.op.pool, io.op.count == 1,
                  [&](std::int64_t base, std::int64_t ya, std::int64_t yb, std::int64_t xa, std::int64_t xb,
                      std::int64_t w, std::int64_t o, double count) {
                    double s = 0;
                    for (std::int64_t y = ya; y < yb; ++y)
                      for (std::int64_t x = xa; x < xb; ++x) s += io.in[0][base + y * w + x];
                    io.out[0][o] = static_cast<float>(s / count);
                  });
}

void avg_pool_grad(KernelIO& io) {  // dy -> dx (the output's shape)
  std::fill(io.out[0], io.out[0] + io.out_elements(0), 0.0f);
  each_avg_window(io.out_shape(0), io.in_shape(0), io.op.pool, io.op.count == 1,
                  [&](std::int64_t base, std::int64_t ya, std::int64_t yb, std::int64_t xa, std::int64_t xb,
                      std::int64_t w, std::int64_t o, double count) {
                    const auto g = static_cast<float>(io.in[0][o] / count);
                    for (std::int64_t y = ya; y < yb; ++y)
                      for (std::int64_t x = xa; x < xb; ++x) io.out[0][base + y * w + x] += g;
                  });
}

void softmax(KernelIO& io) {  // over the last axis
  const std::int64_t c = io.out_shape(0).back(), rows = io.out_elements(0) / c;
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* x = io.in[0] + r * c;
    float* y = io.out[0] + r * c;
    const double mx = *std::max_element(x, x + c);
    double sum = 0;
    for (std::int64_t j = 0; j < c; ++j) sum += std::exp(x[j] - mx);
    for (std::int64_t j = 0; j < c; ++j) y[j] = static_cast<float>(std::exp(x[j] - mx) / sum);
  }
}

void softmax_grad(KernelIO& io) {  // dy, y -> y * (dy - sum(dy * y)) per row
  const std::int64_t c = io.out_shape(0).back(), rows = io.out_elements(0) / c;
  for (std::int64_t r = 0; r < rows; ++r) {
    const float *dy = io.in[0] + r * c, *y = io.in[1] + r * c;
    double dot = 0;
    for (std::int64_t j = 0; j < c; ++j) dot += static_cast<double>(dy[j]) * y[j];
    for (std::int64_t j = 0; j < c; ++j) io.out[0][r * c + j] = static_cast<float>(y[j] * (dy[j] - dot));
  }
}

/// Elements before `axis` (outer), along it, and after it (inner).
void split_at(const Shape& s, std::int64_t axis, std::int64_t& outer, std::int64_t& inner) {
  outer = inner = 1;
  for (std::int64_t k = 0; k < axis; ++k) outer *= s[static_cast<std::size_t>(k)];
  for (std::size_t k = static_cast<std::size_t>(axis) + 1; k < s.size(); ++k) inner *= s[k];
}

void concat(KernelIO& io) {
  std::int64_t outer, inner;
  split_at(io.out_shape(0), io.op.axis, outer, inner);
  const std::int64_t total = io.out_shape(0)[static_cast<std::size_t>(io.op.axis)];
  std::int64_t begin = 0;
  for (std::size_t k = 0; k < io.in.size(); ++k) {
    const std::int64_t d = io.in_shape(k)[static_cast<std::size_t>(io.op.axis)];
    for (std::int64_t o = 0; o < outer; ++o)
      std::copy(io.in[k] + o * d * inner, io.in[k] + (o + 1) * d * inner, io.out[0] + (o * total + begin) * inner);
    begin += d;
  }
}

void strided_slice(KernelIO& io) {
  std::int64_t outer, inner;
  split_at(io.in_shape(0), io.op.axis, outer, inner);
  const std::int64_t total = io.in_shape(0)[static_cast<std::size_t>(io.op.axis)];
  const std::int64_t d = io.out_shape(0)[static_cast<std::size_t>(io.op.axis)];
  for (std::int64_t o = 0; o < outer; ++o)
    std::copy(io.in[0] + (o * total + io.op.count) * inner, io.in[0] + (o * total + io.op.count + d) * inner,
              io.out[0] + o * d * inner);
}

void strided_slice_grad(KernelIO& io) {  // dy placed at attrs.count along attrs.axis, zeros elsewhere
  std::int64_t outer, inner;
  split_at(io.out_shape(0), io.op.axis, outer, inner);
  const std::int64_t total = io.out_shape(0)[static_cast<std::size_t>(io.op.axis)];
  const std::int64_t d = io.in_shape(0)[static_cast<std::size_t>(io.op.axis)];
  std::fill(io.out[0], io.out[0] + io.out_elements(0), 0.0f);
  for (std::int64_t o = 0; o < outer; ++o)
    std::copy(io.in[0] + o * d * inner, io.in[0] + (o + 1) * d * inner,
              io.out[0] + (o * total + io.op.count) * inner);
}

void transpose(KernelIO& io) {  // output axis k is input axis perm[k]
  const Shape& xs = io.in_shape(0);
  const Shape& ys = io.out_shape(0);
  const std::size_t r = xs.size();
  std::vector<std::int64_t> xstride(r, 1), step(r);
  for (std::size_t k = r - 1; k-- > 0;) xstride[k] = xstride[k + 1] * xs[k + 1];
  for (std::size_t k = 0; k < r; ++k) step[k] = xstride[static_cast<std::size_t>(io.op.shape[k])];
  std::vector<std::int64_t> pos(r, 0);
  std::int64_t at = 0;
  const std::int64_t n = io.out_elements(0);
  for (std::int64_t i = 0; i < n; ++i) {
    io.out[0][i] = io.in[0][at];
    for (std::size_t k = r; k-- > 0;) {
      ++pos[k];
      at += step[k];
      if (pos[k] < ys[k]) break;
      at -= step[k] * ys[k];
      pos[k] = 0;
    }
  }
}

/// Dropout: keeps each element with probability attrs.alpha (scaled by 1/alpha) and writes the
/// mask (1 kept, 0 dropped). The draws follow a generator per op, seeded by its name, so a run
/// repeats exactly.
void dropout(KernelIO& io) {
  if (io.inference) {  // the identity; the mask keeps everything
    const std::int64_t n = io.out_elements(0);
    std::copy(io.in[0], io.in[0] + n, io.out[0]);
    std::fill(io.out[1], io.out[1] + n, 1.0f);
    return;
  }
  auto& rng = kept<std::mt19937_64>(io, [&] { return std::mt19937_64(std::hash<std::string>{}(io.op.name)); });
  std::bernoulli_distribution keep(io.op.alpha);
  const auto scale = static_cast<float>(1.0 / io.op.alpha);
  const std::int64_t n = io.out_elements(0);
  for (std::int64_t i = 0; i < n; ++i) {
    const bool k = keep(rng);
    io.out[1][i] = k ? 1.0f : 0.0f;
    io.out[0][i] = k ? io.in[0][i] * scale : 0.0f;
  }
}

void dropout_grad(KernelIO& io) {  // dy, mask
  const auto scale = static_cast<float>(1.0 / io.op.alpha);
  const std::int64_t n = io.out_elements(0);
  for (std::int64_t i = 0; i < n; ++i) io.out[0][i] = io.in[0][i] * io.in[1][i] * scale;
}

}  // namespace

void register_nn_kernels(OpRegistry& r) {
  const std::pair<const char*, Compute> kernels[] = {
      {"Add", [](KernelIO& io) { binary(io, [](float a, float b) { return a + b; }); }},
      {"Mul", [](KernelIO& io) { binary(io, [](float a, float b) { return a * b; }); }},
      {"Sub", [](KernelIO& io) { binary(io, [](float a, float b) { return a - b; }); }},
      {"RealDiv", [](KernelIO& io) { binary(io, [](float a, float b) { return a / b; }); }},
      {"ReduceSum", reduce_sum},
      {"Neg", [](KernelIO& io) { unary(io, [](float x) { return -x; }); }},
      {"Sigmoid", [](KernelIO& io) { unary(io, [](float x) { return static_cast<float>(1 / (1 + std::exp(-x))); }); }},
      {"SigmoidGrad", [](KernelIO& io) { gradient(io, [](float y) { return y * (1 - y); }); }},
      {"HSigmoid",
       [](KernelIO& io) {
         const auto a = static_cast<float>(io.op.alpha), b = static_cast<float>(io.op.beta);
         unary(io, [a, b](float x) { return std::clamp(a * x + b, 0.0f, 1.0f); });
       }},
      {"HSigmoidGrad",
       [](KernelIO& io) {
         const auto a = static_cast<float>(io.op.alpha), b = static_cast<float>(io.op.beta);
         gradient(io, [a, b](float x) { return a * x + b > 0 && a * x + b < 1 ? a : 0.0f; });
       }},
      {"HSwish", [](KernelIO& io) { unary(io, [](float x) { return x * std::clamp(x + 3, 0.0f, 6.0f) / 6; }); }},
      {"HSwishGrad",
       [](KernelIO& io) { gradient(io, [](float x) { return x < -3  ? 0.0f
                                                            : x > 3 ? 1.0f
                                                                    : (2 * x + 3) / 6; }); }},
      {"ClipByValue",
       [](KernelIO& io) {
         const auto lo = static_cast<float>(io.op.alpha), hi = static_cast<float>(io.op.beta);
         unary(io, [lo, hi](float x) { return std::clamp(x, lo, hi); });
       }},
      {"ClipByValueGrad",
       [](KernelIO& io) {
         const auto lo = static_cast<float>(io.op.alpha), hi = static_cast<float>(io.op.beta);
         gradient(io, [lo, hi](float x) { return x >= lo && x <= hi ? 1.0f : 0.0f; });
       }},
      {"AvgPool", avg_pool},
      {"AvgPoolGrad", avg_pool_grad},
      {"Softmax", softmax},
      {"SoftmaxGrad", softmax_grad},
      {"Concat", concat},
      {"StridedSlice", strided_slice},
      {"StridedSliceGrad", strided_slice_grad},
      {"Transpose", transpose},
      {"Dropout", dropout},
      {"DropoutGrad", dropout_grad},
  };
  for (const auto& [name, fn] : kernels) r.set_compute(name, fn);
}

}  // namespace ascendsim::workloads
