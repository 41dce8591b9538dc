// Functional mode's kernels for the transformers' ops (ops_transformer.cpp): batched matrix
// products, LayerNorm and its two gradient kernels, the mean over any axes, the activations and
// their gradients, embedding lookups and their scatter-add gradient. Plain loops over row-major
// tensors, in float with double accumulators where values are summed.
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "workloads/kernels.h"
#include "workloads/op_registry.h"

namespace ascendsim::workloads {

namespace {

constexpr double kPi = 3.14159265358979323846;

/// The product of all axes but the last `keep`.
std::int64_t outer(const Shape& s, std::size_t keep) {
  std::int64_t p = 1;
  for (std::size_t k = 0; k + keep < s.size(); ++k) p *= s[k];
  return p;
}

// y[b] = op(x[b]) op(w[b]) over the batch axes; op transposes the last two axes where asked.
void batch_matmul(KernelIO& io) {
  const Shape& xs = io.in_shape(0);
  const Shape& ws = io.in_shape(1);
  const Shape& ys = io.out_shape(0);
  const std::size_t r = ys.size();
  const bool ta = io.op.matmul.transpose_a, tb = io.op.matmul.transpose_b;
  const std::int64_t batch = outer(ys, 2), m = ys[r - 2], n = ys[r - 1];
  const std::int64_t k = ta ? xs[r - 2] : xs[r - 1];
  const std::int64_t xr = xs[r - 2], xc = xs[r - 1], wr = ws[r - 2], wc = ws[r - 1];
  for (std::int64_t b = 0; b < batch; ++b) {
    const float* x = io.in[0] + b * xr * xc;
    const float* w = io.in[1] + b * wr * wc;
    float* y = io.out[0] + b * m * n;
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (std::int64_t p = 0; p < k; ++p)
          s += static_cast<double>(ta ? x[p * xc + i] : x[i * xc + p]) * (tb ? w[j * wc + p] : w[p * wc + j]);
        y[i * n + j] = static_cast<float>(s);
      }
  }
}

/// LayerNorm's epsilon: attrs.alpha, or PyTorch's 1e-5 where the op gives none.
double layer_norm_eps(const Op& op) { return op.alpha > 0 ? op.alpha : 1e-5; }

// y = (x - mean) * rstd * gamma + beta over the last axis; the rows' mean and rstd kept.
void layer_norm(KernelIO& io) {
  const std::int64_t h = io.in_shape(0).back(), rows = io.in_elements(0) / h;
  const double eps = layer_norm_eps(io.op);
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* x = io.in[0] + r * h;
    double sum = 0;
    for (std::int64_t i = 0; i < h; ++i) sum += x[i];
    const double mean = sum / static_cast<double>(h);
    double var = 0;
    for (std::int64_t i = 0; i < h; ++i) var += (x[i] - mean) * (x[i] - mean);
    const double rstd = 1.0 / std::sqrt(var / static_cast<double>(h) + eps);
    for (std::int64_t i = 0; i < h; ++i)
      io.out[0][r * h + i] = static_cast<float>((x[i] - mean) * rstd * io.in[1][i] + io.in[2][i]);
    io.out[1][r] = static_cast<float>(mean);
    io.out[2][r] = static_cast<float>(rstd);
  }
}

// dx = rstd (g - mean(g) - x_hat mean(g x_hat)), g = dy gamma, x_hat = (x - mean) rstd.
void layer_norm_x_backprop(KernelIO& io) {
  const std::int64_t h = io.in_shape(0).back(), rows = io.in_elements(0) / h;
  for (std::int64_t r = 0; r < rows; ++r) {
    const float *dy = io.in[0] + r * h, *x = io.in[1] + r * h, *gamma = io.in[4];
    const double mean = io.in[2][r], rstd = io.in[3][r];
    double sg = 0, sgx = 0;
    for (std::int64_t i = 0; i < h; ++i) {
      const double g = static_cast<double>(dy[i]) * gamma[i];
      sg += g;
      sgx += g * (x[i] - mean) * rstd;
    }
    sg /= static_cast<double>(h);
    sgx /= static_cast<double>(h);
    for (std::int64_t i = 0; i < h; ++i) {
      const double g = static_cast<double>(dy[i]) * gamma[i], xh = (x[i] - mean) * rstd;
      io.out[0][r * h + i] = static_cast<float>(rstd * (g - sg - xh * sgx));
    }
  }
}

// dgamma = sum over the rows of dy x_hat, dbeta = sum of dy.
void layer_norm_beta_gamma_backprop(KernelIO& io) {
  const std::int64_t h = io.in_shape(0).back(), rows = io.in_elements(0) / h;
  std::vector<double> dg(static_cast<std::size_t>(h), 0.0), db(static_cast<std::size_t>(h), 0.0);
  for (std::int64_t r = 0; r < rows; ++r) {
    const double mean = io.in[2][r], rstd = io.in[3][r];
    for (std::int64_t i = 0; i < h; ++i) {
      const double dy = io.in[0][r * h + i];
      dg[static_cast<std::size_t>(i)] += dy * (io.in[1][r * h + i] - mean) * rstd;
      db[static_cast<std::size_t>(i)] += dy;
    }
  }
  for (std::int64_t i = 0; i < h; ++i) {
    io.out[0][i] = static_cast<float>(dg[static_cast<std::size_t>(i)]);
    io.out[1][i] = static_cast<float>(db[static_cast<std::size_t>(i)]);
  }
}

void reduce_mean_d(KernelIO& io) {
  const auto& idx =
      kept<std::vector<std::int64_t>>(io, [&] { return broadcast_index(io.out_shape(0), io.in_shape(0)); });
  std::vector<double> sum(static_cast<std::size_t>(io.out_elements(0)), 0.0);
  for (std::size_t i = 0; i < idx.size(); ++i) sum[static_cast<std::size_t>(idx[i])] += io.in[0][i];
  const double n = static_cast<double>(io.in_elements(0)) / static_cast<double>(io.out_elements(0));
  for (std::size_t j = 0; j < sum.size(); ++j) io.out[0][j] = static_cast<float>(sum[j] / n);
}

void reduce_mean_d_grad(KernelIO& io) {
  const auto& idx =
      kept<std::vector<std::int64_t>>(io, [&] { return broadcast_index(io.in_shape(0), io.out_shape(0)); });
  const double n = static_cast<double>(io.out_elements(0)) / static_cast<double>(io.in_elements(0));
  for (std::size_t i = 0; i < idx.size(); ++i)
    io.out[0][i] = static_cast<float>(io.in[0][static_cast<std::size_t>(idx[i])] / n);
}

void each(KernelIO& io, float (*f)(float)) {
  for (std::int64_t i = 0; i < io.out_elements(0); ++i) io.out[0][i] = f(io.in[0][i]);
}
/// dy (input 0) times f(input 1).
void each_grad(KernelIO& io, float (*f)(float)) {
  for (std::int64_t i = 0; i < io.out_elements(0); ++i) io.out[0][i] = io.in[0][i] * f(io.in[1][i]);
}

float gelu_tanh(float x) {
  const double c = std::sqrt(2.0 / kPi);
  return static_cast<float>(0.5 * x * (1 + std::tanh(c * (x + 0.044715 * x * x * x))));
}
float gelu_tanh_grad(float x) {
  const double c = std::sqrt(2.0 / kPi), u = c * (x + 0.044715 * x * x * x), t = std::tanh(u);
  return static_cast<float>(0.5 * (1 + t) + 0.5 * x * (1 - t * t) * c * (1 + 3 * 0.044715 * x * x));
}
float sigmoid(float x) { return static_cast<float>(1 / (1 + std::exp(-static_cast<double>(x)))); }

// Rows of a [V, H] table at the ids; the gradient adds dy's rows back at their ids.
void embedding_lookup(KernelIO& io) {
  const std::int64_t h = io.in_shape(0)[1], v = io.in_shape(0)[0], n = io.in_elements(1);
  for (std::int64_t r = 0; r < n; ++r) {
    const auto id = static_cast<std::int64_t>(io.in[1][r]);
    if (id < 0 || id >= v) throw std::invalid_argument(io.op.name + ": id " + std::to_string(id) + " out of range");
    for (std::int64_t i = 0; i < h; ++i) io.out[0][r * h + i] = io.in[0][id * h + i];
  }
}

void unsorted_segment_sum(KernelIO& io) {
  const std::int64_t h = io.out_shape(0)[1], n = io.in_elements(1);
  std::vector<double> acc(static_cast<std::size_t>(io.out_elements(0)), 0.0);
  for (std::int64_t r = 0; r < n; ++r) {
    const auto id = static_cast<std::int64_t>(io.in[1][r]);
    for (std::int64_t i = 0; i < h; ++i) acc[static_cast<std::size_t>(id * h + i)] += io.in[0][r * h + i];
  }
  for (std::size_t i = 0; i < acc.size(); ++i) io.out[0][i] = static_cast<float>(acc[i]);
}

// RMSNorm over the last axis: y = x rstd gamma, rstd = 1/sqrt(mean(x^2) + eps), eps 1e-6 (LLaMA's).
constexpr double kRmsEps = 1e-6;
void rms_norm(KernelIO& io) {
  const std::int64_t h = io.in_shape(0).back(), rows = io.in_elements(0) / h;
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* x = io.in[0] + r * h;
    double sq = 0;
    for (std::int64_t i = 0; i < h; ++i) sq += static_cast<double>(x[i]) * x[i];
    const double rstd = 1 / std::sqrt(sq / static_cast<double>(h) + kRmsEps);
    for (std::int64_t i = 0; i < h; ++i) io.out[0][r * h + i] = static_cast<float>(x[i] * rstd * io.in[1][i]);
    io.out[1][r] = static_cast<float>(rstd);
  }
}

// dx = rstd (g - x rstd^2 mean(g x)), g = dy gamma; dgamma = sum over the rows of dy x rstd.
void rms_norm_grad(KernelIO& io) {
  const std::int64_t h = io.in_shape(0).back(), rows = io.in_elements(0) / h;
  std::vector<double> dg(static_cast<std::size_t>(h), 0.0);
  for (std::int64_t r = 0; r < rows; ++r) {
    const float *dy = io.in[0] + r * h, *x = io.in[1] + r * h, *gamma = io.in[3];
    const double rstd = io.in[2][r];
    double sgx = 0;
    for (std::int64_t i = 0; i < h; ++i) sgx += static_cast<double>(dy[i]) * gamma[i] * x[i];
    sgx /= static_cast<double>(h);
    for (std::int64_t i = 0; i < h; ++i) {
      io.out[0][r * h + i] = static_cast<float>(rstd * (dy[i] * gamma[i] - x[i] * rstd * rstd * sgx));
      dg[static_cast<std::size_t>(i)] += static_cast<double>(dy[i]) * x[i] * rstd;
    }
  }
  for (std::int64_t i = 0; i < h; ++i) io.out[1][i] = static_cast<float>(dg[static_cast<std::size_t>(i)]);
}

// Rotary embedding on [..., S, D] with [S, D] tables: y = x cos + rotate_half(x) sin, rotate_half
// (x1, x2) = (-x2, x1) over the two halves of D. Its gradient: dx = dy cos + rotate_half^T(dy sin),
// rotate_half^T(z1, z2) = (z2, -z1).
void rotary(KernelIO& io, bool backward) {
  const Shape& xs = io.in_shape(0);
  const std::int64_t d = xs.back(), s = xs[xs.size() - 2], half = d / 2, n = io.in_elements(0) / (s * d);
  for (std::int64_t b = 0; b < n; ++b)
    for (std::int64_t p = 0; p < s; ++p) {
      const float* x = io.in[0] + (b * s + p) * d;
      const float *c = io.in[1] + p * d, *sn = io.in[2] + p * d;
      float* y = io.out[0] + (b * s + p) * d;
      for (std::int64_t i = 0; i < d; ++i) {
        const std::int64_t j = i < half ? i + half : i - half;  // the partner in the other half
        if (!backward)
          y[i] = x[i] * c[i] + (i < half ? -x[j] : x[j]) * sn[i];
        else
          y[i] = x[i] * c[i] + (i < half ? x[j] * sn[j] : -x[j] * sn[j]);
      }
    }
}

// AdamWeightDecay in place (param, m, v, learning rate, gradient), weight decay attrs.alpha.
void adam_weight_decay(KernelIO& io) {
  constexpr double b1 = 0.9, b2 = 0.999, eps = 1e-6;
  const double lr = io.in[3][0], wd = io.op.alpha;
  float *w = io.in[0], *m = io.in[1], *v = io.in[2];
  const float* g = io.in[4];
  for (std::int64_t i = 0; i < io.in_elements(0); ++i) {
    m[i] = static_cast<float>(b1 * m[i] + (1 - b1) * g[i]);
    v[i] = static_cast<float>(b2 * v[i] + (1 - b2) * static_cast<double>(g[i]) * g[i]);
    w[i] = static_cast<float>(w[i] - lr * (m[i] / (std::sqrt(static_cast<double>(v[i])) + eps) + wd * w[i]));
  }
}

}  // namespace

void register_transformer_kernels(OpRegistry& r) {
  r.set_compute("RmsNorm", rms_norm);
  r.set_compute("RmsNormGrad", rms_norm_grad);
  r.set_compute("RotaryEmbedding", [](KernelIO& io) { rotary(io, false); });
  r.set_compute("RotaryEmbeddingGrad", [](KernelIO& io) { rotary(io, true); });
  r.set_compute("AdamWeightDecay", adam_weight_decay);
  r.set_compute("SquareSumV1", [](KernelIO& io) {
    double s = 0;
    for (std::int64_t i = 0; i < io.in_elements(0); ++i) s += static_cast<double>(io.in[0][i]) * io.in[0][i];
    io.out[0][0] = static_cast<float>(s);
  });
  r.set_compute("Maximum", [](KernelIO& io) {  // the operands' shapes, or a scalar against a tensor
    const std::int64_t n = io.out_elements(0), na = io.in_elements(0), nb = io.in_elements(1);
    for (std::int64_t i = 0; i < n; ++i) io.out[0][i] = std::max(io.in[0][na == 1 ? 0 : i], io.in[1][nb == 1 ? 0 : i]);
  });
  r.set_compute("BatchMatMul", batch_matmul);
  r.set_compute("LayerNorm", layer_norm);
  r.set_compute("LayerNormXBackprop", layer_norm_x_backprop);
  r.set_compute("LayerNormBetaGammaBackprop", layer_norm_beta_gamma_backprop);
  r.set_compute("ReduceMeanD", reduce_mean_d);
  r.set_compute("ReduceMeanDGrad", reduce_mean_d_grad);
  r.set_compute("Sqrt", [](KernelIO& io) { each(io, [](float x) { return std::sqrt(x); }); });
  r.set_compute("SqrtGrad", [](KernelIO& io) {  // dy / (2 y), from the result
    for (std::int64_t i = 0; i < io.out_elements(0); ++i) io.out[0][i] = io.in[0][i] / (2 * io.in[1][i]);
  });
  r.set_compute("Tanh", [](KernelIO& io) { each(io, [](float x) { return std::tanh(x); }); });
  r.set_compute("TanhGrad", [](KernelIO& io) {
    each_grad(io, [](float x) {
      const float t = std::tanh(x);
      return 1 - t * t;
    });
  });
  r.set_compute("Erf", [](KernelIO& io) { each(io, [](float x) { return std::erf(x); }); });
  r.set_compute("ErfGrad", [](KernelIO& io) {
    each_grad(io,
              [](float x) { return static_cast<float>(2 / std::sqrt(kPi) * std::exp(-static_cast<double>(x) * x)); });
  });
  r.set_compute("GeLU", [](KernelIO& io) { each(io, gelu_tanh); });
  r.set_compute("GeLUGrad", [](KernelIO& io) { each_grad(io, gelu_tanh_grad); });
  r.set_compute("SiLU", [](KernelIO& io) { each(io, [](float x) { return x * sigmoid(x); }); });
  r.set_compute("SiLUGrad", [](KernelIO& io) {
    each_grad(io, [](float x) {
      const float s = sigmoid(x);
      return s * (1 + x * (1 - s));
    });
  });
  r.set_compute("EmbeddingLookup", embedding_lookup);
  r.set_compute("UnsortedSegmentSum", unsorted_segment_sum);
}

}  // namespace ascendsim::workloads
