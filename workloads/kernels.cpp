#include "workloads/kernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>

#include <oneapi/dnnl/dnnl.hpp>

#include "workloads/op_registry.h"

namespace ascendsim::workloads {

float round_to_fp16(float x) {
  // fp16 keeps 10 of float's 23 mantissa bits and exponents down to 2^-14 (then subnormals of
  // 2^-24); values from 65520 up round to infinity.
  std::uint32_t u = 0;
  std::memcpy(&u, &x, sizeof u);
  const std::uint32_t sign = u & 0x80000000u;
  std::uint32_t mag = u & 0x7FFFFFFFu;
  if (mag >= 0x7F800000u) return x;  // infinity or NaN
  const float a = std::fabs(x);
  if (a >= 65520.0f) return sign ? -std::numeric_limits<float>::infinity() : std::numeric_limits<float>::infinity();
  if (a < 6.103515625e-05f) {  // fp16 subnormal: multiples of 2^-24, ties to even (the default mode)
    const float q = std::nearbyint(a * 16777216.0f) / 16777216.0f;
    return sign ? -q : q;
  }
  mag += 0xFFFu + ((mag >> 13) & 1u);  // round the 13 dropped bits to nearest, ties to even
  mag &= 0xFFFFE000u;
  u = sign | mag;
  float r = 0;
  std::memcpy(&r, &u, sizeof r);
  return r;
}

namespace {

using dnnl::memory;
using Dims = memory::dims;

dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

dnnl::stream& stream() {
  thread_local dnnl::stream s(engine());
  return s;
}

memory::desc plain(const Shape& s, memory::format_tag tag) {
  return memory::desc(Dims(s.begin(), s.end()), memory::data_type::f32, tag);
}

memory mem(const memory::desc& d, float* p) { return memory(d, engine(), p); }

/// The op's kept state, built on first use.
// Convolution (NCHW input, OIHW weight, square stride and symmetric padding, groups) --------------

struct ConvPrims {
  memory::desc x, w, y;
  dnnl::convolution_forward::primitive_desc fwd;
};

ConvPrims conv_prims(const Shape& x, const Shape& w, const Shape& y, const ConvAttr& a) {
  ConvPrims p;
  p.x = plain(x, memory::format_tag::nchw);
  if (a.group > 1)  // OIHW [Cout, Cin/G, kh, kw] is GOIHW [G, Cout/G, Cin/G, kh, kw] in the same memory
    p.w = memory::desc({a.group, w[0] / a.group, w[1], w[2], w[3]}, memory::data_type::f32, memory::format_tag::goihw);
  else
    p.w = plain(w, memory::format_tag::oihw);
  p.y = plain(y, memory::format_tag::nchw);
  const Dims stride{a.stride, a.stride}, pad{a.pad_h, a.pad_w};
  p.fwd = dnnl::convolution_forward::primitive_desc(
      dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct, p.x, p.w,
                                      p.y, stride, pad, pad),
      engine());
  return p;
}

void conv2d(KernelIO& io) {  // x, w -> y
  struct S {
    ConvPrims p;
    dnnl::convolution_forward prim;
  };
  S& s = kept<S>(io, [&] {
    S k{conv_prims(io.in_shape(0), io.in_shape(1), io.out_shape(0), io.op.conv), {}};
    k.prim = dnnl::convolution_forward(k.p.fwd);
    return k;
  });
  s.prim.execute(stream(), {{DNNL_ARG_SRC, mem(s.p.x, io.in[0])},
                            {DNNL_ARG_WEIGHTS, mem(s.p.w, io.in[1])},
                            {DNNL_ARG_DST, mem(s.p.y, io.out[0])}});
  stream().wait();
}

void conv2d_backprop_input(KernelIO& io) {  // dy, w -> dx (shape attr)
  struct S {
    ConvPrims p;
    dnnl::convolution_backward_data prim;
  };
  S& s = kept<S>(io, [&] {
    S k{conv_prims(io.out_shape(0), io.in_shape(1), io.in_shape(0), io.op.conv), {}};
    const Dims stride{io.op.conv.stride, io.op.conv.stride}, pad{io.op.conv.pad_h, io.op.conv.pad_w};
    k.prim = dnnl::convolution_backward_data(dnnl::convolution_backward_data::primitive_desc(
        dnnl::convolution_backward_data::desc(dnnl::algorithm::convolution_direct, k.p.x, k.p.w, k.p.y, stride, pad,
                                              pad),
        engine(), k.p.fwd));
    return k;
  });
  s.prim.execute(stream(), {{DNNL_ARG_DIFF_DST, mem(s.p.y, io.in[0])},
                            {DNNL_ARG_WEIGHTS, mem(s.p.w, io.in[1])},
                            {DNNL_ARG_DIFF_SRC, mem(s.p.x, io.out[0])}});
  stream().wait();
}

void conv2d_backprop_filter(KernelIO& io) {  // dy, x -> dw (shape attr)
  struct S {
    ConvPrims p;
    dnnl::convolution_backward_weights prim;
  };
  S& s = kept<S>(io, [&] {
    S k{conv_prims(io.in_shape(1), io.out_shape(0), io.in_shape(0), io.op.conv), {}};
    const Dims stride{io.op.conv.stride, io.op.conv.stride}, pad{io.op.conv.pad_h, io.op.conv.pad_w};
    k.prim = dnnl::convolution_backward_weights(dnnl::convolution_backward_weights::primitive_desc(
        dnnl::convolution_backward_weights::desc(dnnl::algorithm::convolution_direct, k.p.x, k.p.w, k.p.y, stride, pad,
                                                 pad),
        engine(), k.p.fwd));
    return k;
  });
  s.prim.execute(stream(), {{DNNL_ARG_DIFF_DST, mem(s.p.y, io.in[0])},
                            {DNNL_ARG_SRC, mem(s.p.x, io.in[1])},
                            {DNNL_ARG_DIFF_WEIGHTS, mem(s.p.w, io.out[0])}});
  stream().wait();
}

// MatMul: [M,K] x [K,N] with either operand stored transposed -----------------------------------

void matmul(KernelIO& io) {
  struct S {
    memory::desc a, b, c;
    dnnl::matmul prim;
  };
  S& s = kept<S>(io, [&] {
    const Shape& as = io.in_shape(0);
    const Shape& bs = io.in_shape(1);
    const bool ta = io.op.matmul.transpose_a, tb = io.op.matmul.transpose_b;
    const std::int64_t m = ta ? as[1] : as[0], k = ta ? as[0] : as[1], n = tb ? bs[0] : bs[1];
    S x;
    // A stored [K,M] when transposed: element (i,j) at j*M + i.
    x.a = memory::desc({m, k}, memory::data_type::f32, ta ? Dims{1, m} : Dims{k, 1});
    x.b = memory::desc({k, n}, memory::data_type::f32, tb ? Dims{1, k} : Dims{n, 1});
    x.c = memory::desc({m, n}, memory::data_type::f32, Dims{n, 1});
    x.prim = dnnl::matmul(dnnl::matmul::primitive_desc(dnnl::matmul::desc(x.a, x.b, x.c), engine()));
    return x;
  });
  s.prim.execute(stream(), {{DNNL_ARG_SRC, mem(s.a, io.in[0])},
                            {DNNL_ARG_WEIGHTS, mem(s.b, io.in[1])},
                            {DNNL_ARG_DST, mem(s.c, io.out[0])}});
  stream().wait();
}

// Element-wise and per-channel -------------------------------------------------------------------

/// Elements per channel of dimension 1 (after it), and channels.
std::pair<std::int64_t, std::int64_t> channel_layout(const Shape& s) {
  std::int64_t inner = 1;
  for (std::size_t d = 2; d < s.size(); ++d) inner *= s[d];
  return {s.size() > 1 ? s[1] : s[0], inner};
}

void bias_add(KernelIO& io) {  // x [N,C,...], b [C]
  const auto [c, inner] = channel_layout(io.in_shape(0));
  const std::int64_t n = io.in_elements(0) / (c * inner);
  const float* x = io.in[0];
  const float* b = io.in[1];
  float* y = io.out[0];
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < c; ++j)
      for (std::int64_t k = 0; k < inner; ++k, ++x, ++y) *y = *x + b[j];
}

void bias_add_grad(KernelIO& io) {  // dy [N,C,...] -> db [C]
  const auto [c, inner] = channel_layout(io.in_shape(0));
  const std::int64_t n = io.in_elements(0) / (c * inner);
  std::vector<double> acc(static_cast<std::size_t>(c), 0.0);
  const float* dy = io.in[0];
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < c; ++j)
      for (std::int64_t k = 0; k < inner; ++k) acc[static_cast<std::size_t>(j)] += *dy++;
  for (std::int64_t j = 0; j < c; ++j) io.out[0][j] = static_cast<float>(acc[static_cast<std::size_t>(j)]);
}

void relu(KernelIO& io) {
  const std::int64_t n = io.in_elements(0);
  for (std::int64_t i = 0; i < n; ++i) io.out[0][i] = std::max(io.in[0][i], 0.0f);
}

void relu_grad(KernelIO& io) {  // dy, y
  const std::int64_t n = io.in_elements(0);
  for (std::int64_t i = 0; i < n; ++i) io.out[0][i] = io.in[1][i] > 0 ? io.in[0][i] : 0.0f;
}

void relu6(KernelIO& io) {
  const std::int64_t n = io.in_elements(0);
  for (std::int64_t i = 0; i < n; ++i) io.out[0][i] = std::min(std::max(io.in[0][i], 0.0f), 6.0f);
}

void relu6_grad(KernelIO& io) {  // dy, y
  const std::int64_t n = io.in_elements(0);
  for (std::int64_t i = 0; i < n; ++i) io.out[0][i] = io.in[1][i] > 0 && io.in[1][i] < 6 ? io.in[0][i] : 0.0f;
}

/// Depthwise convolution, direct: one k x k filter per channel. `mode` 0 forward (x, w -> y),
/// 1 the input's gradient (dy, w -> dx), 2 the filter's (dy, x -> dw).
void depthwise(KernelIO& io, int mode) {
  const Shape& xs = mode == 1 ? io.out_shape(0) : mode == 0 ? io.in_shape(0) : io.in_shape(1);
  const Shape& ws = mode == 2 ? io.out_shape(0) : io.in_shape(1);
  const Shape& ys = mode == 0 ? io.out_shape(0) : io.in_shape(0);
  const std::int64_t n = xs[0], c = xs[1], h = xs[2], w = xs[3], kh = ws[2], kw = ws[3], ho = ys[2], wo = ys[3];
  const std::int64_t s = io.op.conv.stride, ph = io.op.conv.pad_h, pw = io.op.conv.pad_w;
  float* out = io.out[0];
  std::fill(out, out + io.out_elements(0), 0.0f);
  for (std::int64_t b = 0; b < n; ++b)
    for (std::int64_t ch = 0; ch < c; ++ch)
      for (std::int64_t oy = 0; oy < ho; ++oy)
        for (std::int64_t ox = 0; ox < wo; ++ox) {
          const std::int64_t yi = ((b * c + ch) * ho + oy) * wo + ox;
          float acc = 0;
          for (std::int64_t ky = 0; ky < kh; ++ky) {
            const std::int64_t iy = oy * s - ph + ky;
            if (iy < 0 || iy >= h) continue;
            for (std::int64_t kx = 0; kx < kw; ++kx) {
              const std::int64_t ix = ox * s - pw + kx;
              if (ix < 0 || ix >= w) continue;
              const std::int64_t xi = ((b * c + ch) * h + iy) * w + ix, wi = (ch * kh + ky) * kw + kx;
              if (mode == 0)
                acc += io.in[0][xi] * io.in[1][wi];
              else if (mode == 1)
                out[xi] += io.in[0][yi] * io.in[1][wi];
              else
                out[wi] += io.in[0][yi] * io.in[1][xi];
            }
          }
          if (mode == 0) out[yi] = acc;
        }
}
void depthwise_forward(KernelIO& io) { depthwise(io, 0); }
void depthwise_backprop_input(KernelIO& io) { depthwise(io, 1); }
void depthwise_backprop_filter(KernelIO& io) { depthwise(io, 2); }

void copy(KernelIO& io) {
  if (io.out[0] != io.in[0])
    std::memcpy(io.out[0], io.in[0], static_cast<std::size_t>(io.in_elements(0)) * sizeof(float));
}

void add_n(KernelIO& io) {
  const std::int64_t n = io.out_elements(0);
  for (std::int64_t i = 0; i < n; ++i) {
    float s = 0;
    for (const float* x : io.in) s += x[i];
    io.out[0][i] = s;
  }
}

void cast(KernelIO& io) {  // the caller rounds to the target type
  copy(io);
}

/// param, accum, lr, grad, momentum: accum = momentum * accum + grad; param -= lr * accum.
void apply_momentum(KernelIO& io) {
  float* param = io.in[0];
  float* accum = io.in[1];
  const float lr = io.in[2][0], m = io.in[4][0];
  const float* grad = io.in[3];
  const std::int64_t n = io.in_elements(0);
  for (std::int64_t i = 0; i < n; ++i) {
    accum[i] = m * accum[i] + grad[i];
    param[i] -= lr * accum[i];
  }
}

void assign_add(KernelIO& io) { io.in[0][0] += io.in[1][0]; }

void gather(KernelIO& io) {  // table [T], index [1]
  const auto t = io.in_elements(0);
  const auto i = std::clamp<std::int64_t>(static_cast<std::int64_t>(io.in[1][0]), 0, t - 1);
  io.out[0][0] = io.in[0][i];
}

// Pooling (max, with padding that never wins) ----------------------------------------------------

struct Window {
  std::int64_t n, c, h, w, ho, wo, k, kw, stride, pad;
};

Window window(const Shape& x, const Shape& y, const PoolAttr& a) {
  return {x[0], x[1], x[2], x[3], y[2], y[3], a.kernel, a.width(), a.stride, a.pad};
}

/// Calls f(plane offset of the input, output index, input index of the window's first maximum).
template <typename F>
void each_window_max(const Window& p, const float* x, F&& f) {
  std::int64_t o = 0;
  for (std::int64_t plane = 0; plane < p.n * p.c; ++plane) {
    const float* xp = x + plane * p.h * p.w;
    for (std::int64_t i = 0; i < p.ho; ++i)
      for (std::int64_t j = 0; j < p.wo; ++j, ++o) {
        std::int64_t best = -1;
        float v = -std::numeric_limits<float>::infinity();
        for (std::int64_t di = 0; di < p.k; ++di) {
          const std::int64_t r = i * p.stride - p.pad + di;
          if (r < 0 || r >= p.h) continue;
          for (std::int64_t dj = 0; dj < p.kw; ++dj) {
            const std::int64_t col = j * p.stride - p.pad + dj;
            if (col < 0 || col >= p.w) continue;
            if (best < 0 || xp[r * p.w + col] > v) {
              v = xp[r * p.w + col];
              best = r * p.w + col;
            }
          }
        }
        f(plane * p.h * p.w, o, best);
      }
  }
}

void max_pool(KernelIO& io) {
  const Window p = window(io.in_shape(0), io.out_shape(0), io.op.pool);
  const float* x = io.in[0];
  each_window_max(p, x, [&](std::int64_t base, std::int64_t o, std::int64_t best) { io.out[0][o] = x[base + best]; });
}

void max_pool_grad(KernelIO& io) {  // x, y, dy -> dx: each window's gradient to its first maximum
  const Window p = window(io.in_shape(0), io.in_shape(1), io.op.pool);
  std::fill(io.out[0], io.out[0] + io.out_elements(0), 0.0f);
  each_window_max(p, io.in[0],
                  [&](std::int64_t base, std::int64_t o, std::int64_t best) { io.out[0][base + best] += io.in[2][o]; });
}

// Losses -------------------------------------------------------------------------------------------

/// Per row of logits [N,C]: log-softmax, written to `out` (N*C).
void log_softmax(const float* logits, std::int64_t n, std::int64_t c, std::vector<double>& out) {
  out.resize(static_cast<std::size_t>(n * c));
  for (std::int64_t i = 0; i < n; ++i) {
    const float* row = logits + i * c;
    const double mx = *std::max_element(row, row + c);
    double sum = 0;
    for (std::int64_t j = 0; j < c; ++j) sum += std::exp(row[j] - mx);
    const double lse = mx + std::log(sum);
    for (std::int64_t j = 0; j < c; ++j) out[static_cast<std::size_t>(i * c + j)] = row[j] - lse;
  }
}

std::int64_t label_of(float v, std::int64_t classes) {
  const auto l = static_cast<std::int64_t>(v);
  if (l < 0 || l >= classes)
    throw std::invalid_argument("label " + std::to_string(l) + " outside the " + std::to_string(classes) + " classes");
  return l;
}

void sparse_softmax_ce(KernelIO& io) {  // logits [N,C], labels [N] -> mean loss [1]
  const std::int64_t n = io.in_shape(0)[0], c = io.in_shape(0)[1];
  std::vector<double> ls;
  log_softmax(io.in[0], n, c, ls);
  double loss = 0;
  for (std::int64_t i = 0; i < n; ++i) loss -= ls[static_cast<std::size_t>(i * c + label_of(io.in[1][i], c))];
  io.out[0][0] = static_cast<float>(loss / static_cast<double>(n));
}

void sparse_softmax_ce_grad(KernelIO& io) {  // d(mean loss)/d logits = (softmax - onehot) / N, times dy
  const std::int64_t n = io.in_shape(0)[0], c = io.in_shape(0)[1];
  const double dy = io.in.size() > 2 ? io.in[2][0] : 1.0;
  std::vector<double> ls;
  log_softmax(io.in[0], n, c, ls);
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t l = label_of(io.in[1][i], c);
    for (std::int64_t j = 0; j < c; ++j)
      io.out[0][i * c + j] = static_cast<float>(
          dy * (std::exp(ls[static_cast<std::size_t>(i * c + j)]) - (j == l ? 1.0 : 0.0)) / static_cast<double>(n));
  }
}

void softmax_ce(KernelIO& io) {  // logits [N,C], one-hot [N,C] -> per-sample loss [N]
  const std::int64_t n = io.in_shape(0)[0], c = io.in_shape(0)[1];
  std::vector<double> ls;
  log_softmax(io.in[0], n, c, ls);
  for (std::int64_t i = 0; i < n; ++i) {
    double l = 0;
    for (std::int64_t j = 0; j < c; ++j) l -= io.in[1][i * c + j] * ls[static_cast<std::size_t>(i * c + j)];
    io.out[0][i] = static_cast<float>(l);
  }
}

void softmax_ce_grad(KernelIO& io) {  // logits, one-hot, dloss [N] -> dlogits = (softmax - onehot) * dloss
  const std::int64_t n = io.in_shape(0)[0], c = io.in_shape(0)[1];
  std::vector<double> ls;
  log_softmax(io.in[0], n, c, ls);
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < c; ++j)
      io.out[0][i * c + j] =
          static_cast<float>((std::exp(ls[static_cast<std::size_t>(i * c + j)]) - io.in[1][i * c + j]) * io.in[2][i]);
}

/// Labels [N] -> [N, classes] with label smoothing 0.1 (CrossEntropySmooth in the model zoo's
/// ResNet scripts): on 1 - 0.1 + 0.1/C, off 0.1/C.
void one_hot(KernelIO& io) {
  const std::int64_t n = io.out_shape(0)[0], c = io.out_shape(0)[1];
  constexpr double kSmooth = 0.1;
  const auto off = static_cast<float>(kSmooth / static_cast<double>(c)), on = static_cast<float>(1 - kSmooth) + off;
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t l = label_of(io.in[0][i], c);
    for (std::int64_t j = 0; j < c; ++j) io.out[0][i * c + j] = j == l ? on : off;
  }
}

void reduce_mean(KernelIO& io) {  // [N,C,H,W] -> [N,C], or [N] -> [1]
  const Shape& s = io.in_shape(0);
  const std::int64_t groups = s.size() == 4 ? s[0] * s[1] : 1;
  const std::int64_t each = io.in_elements(0) / groups;
  for (std::int64_t g = 0; g < groups; ++g) {
    double sum = 0;
    for (std::int64_t i = 0; i < each; ++i) sum += io.in[0][g * each + i];
    io.out[0][g] = static_cast<float>(sum / static_cast<double>(each));
  }
}

void reduce_mean_grad(KernelIO& io) {  // dy -> dx of the attribute's shape
  const std::int64_t groups = io.in_elements(0), each = io.out_elements(0) / groups;
  for (std::int64_t g = 0; g < groups; ++g)
    for (std::int64_t i = 0; i < each; ++i) io.out[0][g * each + i] = io.in[0][g] / static_cast<float>(each);
}

// BatchNorm (training: batch statistics; the moving statistics follow with momentum 0.9) -----------

constexpr double kBnEpsilon = 1e-5, kBnMomentum = 0.9;

void batch_norm(KernelIO& io) {  // x, gamma, beta, moving mean, moving var -> y, batch mean, batch var
  const Shape& s = io.in_shape(0);
  const std::int64_t n = s[0], c = s[1], hw = s[2] * s[3], count = n * hw;
  if (io.inference) {  // BNInfer: the moving statistics normalise; they are the statistics returned
    for (std::int64_t ch = 0; ch < c; ++ch) {
      const double mean = io.in[3][ch], inv = 1.0 / std::sqrt(static_cast<double>(io.in[4][ch]) + kBnEpsilon);
      const double gamma = io.in[1][ch], beta = io.in[2][ch];
      for (std::int64_t i = 0; i < n; ++i)
        for (std::int64_t k = 0; k < hw; ++k) {
          const std::int64_t at = (i * c + ch) * hw + k;
          io.out[0][at] = static_cast<float>((io.in[0][at] - mean) * inv * gamma + beta);
        }
      if (io.out.size() > 2) {
        io.out[1][ch] = io.in[3][ch];
        io.out[2][ch] = io.in[4][ch];
      }
    }
    return;
  }
  for (std::int64_t ch = 0; ch < c; ++ch) {
    double sum = 0, sq = 0;
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t k = 0; k < hw; ++k) {
        const double v = io.in[0][(i * c + ch) * hw + k];
        sum += v;
        sq += v * v;
      }
    const double mean = sum / static_cast<double>(count);
    const double var = std::max(0.0, sq / static_cast<double>(count) - mean * mean);
    const double inv = 1.0 / std::sqrt(var + kBnEpsilon);
    const double gamma = io.in[1][ch], beta = io.in[2][ch];
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t k = 0; k < hw; ++k) {
        const std::int64_t at = (i * c + ch) * hw + k;
        io.out[0][at] = static_cast<float>((io.in[0][at] - mean) * inv * gamma + beta);
      }
    io.out[1][ch] = static_cast<float>(mean);
    io.out[2][ch] = static_cast<float>(var);
    const double unbiased = count > 1 ? var * static_cast<double>(count) / static_cast<double>(count - 1) : var;
    io.in[3][ch] = static_cast<float>(kBnMomentum * io.in[3][ch] + (1 - kBnMomentum) * mean);
    io.in[4][ch] = static_cast<float>(kBnMomentum * io.in[4][ch] + (1 - kBnMomentum) * unbiased);
  }
}

void batch_norm_grad(KernelIO& io) {  // dy, x, gamma, batch mean, batch var -> dx, dgamma, dbeta
  const Shape& s = io.in_shape(1);
  const std::int64_t n = s[0], c = s[1], hw = s[2] * s[3];
  const auto count = static_cast<double>(n * hw);
  for (std::int64_t ch = 0; ch < c; ++ch) {
    const double mean = io.in[3][ch], inv = 1.0 / std::sqrt(io.in[4][ch] + kBnEpsilon), gamma = io.in[2][ch];
    double dbeta = 0, dgamma = 0;
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t k = 0; k < hw; ++k) {
        const std::int64_t at = (i * c + ch) * hw + k;
        dbeta += io.in[0][at];
        dgamma += io.in[0][at] * (io.in[1][at] - mean) * inv;
      }
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t k = 0; k < hw; ++k) {
        const std::int64_t at = (i * c + ch) * hw + k;
        const double xhat = (io.in[1][at] - mean) * inv;
        io.out[0][at] = static_cast<float>(gamma * inv * (io.in[0][at] - dbeta / count - xhat * dgamma / count));
      }
    io.out[1][ch] = static_cast<float>(dgamma);
    io.out[2][ch] = static_cast<float>(dbeta);
  }
}

}  // namespace

void register_builtin_kernels(OpRegistry& r) {
  const std::pair<const char*, Compute> kernels[] = {
      {"Conv2D", conv2d},
      {"Conv2DBackpropInput", conv2d_backprop_input},
      {"Conv2DBackpropFilter", conv2d_backprop_filter},
      {"MatMul", matmul},
      {"BiasAdd", bias_add},
      {"BiasAddGrad", bias_add_grad},
      {"ReLU", relu},
      {"ReluGrad", relu_grad},
      {"ReLU6", relu6},
      {"ReLU6Grad", relu6_grad},
      {"DepthwiseConv2dNative", depthwise_forward},
      {"DepthwiseConv2dNativeBackpropInput", depthwise_backprop_input},
      {"DepthwiseConv2dNativeBackpropFilter", depthwise_backprop_filter},
      {"MaxPool", max_pool},
      {"MaxPoolGrad", max_pool_grad},
      {"Reshape", copy},
      {"Mirror", copy},
      {"SparseSoftmaxCrossEntropyWithLogits", sparse_softmax_ce},
      {"SparseSoftmaxCrossEntropyWithLogitsGrad", sparse_softmax_ce_grad},
      {"SoftmaxCrossEntropyWithLogits", softmax_ce},
      {"SoftmaxCrossEntropyWithLogitsGrad", softmax_ce_grad},
      {"AddN", add_n},
      {"ApplyMomentum", apply_momentum},
      {"BatchNorm", batch_norm},
      {"BatchNormGrad", batch_norm_grad},
      {"Cast", cast},
      {"ReduceMean", reduce_mean},
      {"ReduceMeanGrad", reduce_mean_grad},
      {"Gather", gather},
      {"OneHot", one_hot},
      {"AssignAdd", assign_add},
  };
  for (const auto& [name, fn] : kernels) r.set_compute(name, fn);
  register_nn_kernels(r);
  register_transformer_kernels(r);
}

}  // namespace ascendsim::workloads
