#include "workloads/parallel.h"

#include <algorithm>
#include <cctype>
#include <functional>
#include <set>
#include <stdexcept>
#include <tuple>

#include "workloads/op_registry.h"

namespace ascendsim::workloads {

ShardStrategy parse_shard_strategy(const std::string& text) {
  ShardStrategy out;
  std::size_t i = 0;
  auto fail = [&](const std::string& what) {
    throw std::invalid_argument("strategy '" + text + "': " + what +
                                " (MindSpore's notation: per input a tuple of cuts per dimension, e.g. "
                                "((1,1,1,4),(1,)) or ((2,1),(1,4)))");
  };
  auto skip = [&] {
    while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
  };
  auto expect = [&](char c) {
    skip();
    if (i >= text.size() || text[i] != c) fail(std::string("expected '") + c + "' at position " + std::to_string(i));
    ++i;
  };
  expect('(');
  skip();
  while (i < text.size() && text[i] == '(') {
    ++i;
    std::vector<std::int64_t> cuts;
    for (;;) {
      skip();
      if (i < text.size() && text[i] == ')') break;
      std::size_t used = 0;
      long long v = 0;
      try {
        v = std::stoll(text.substr(i), &used);
      } catch (const std::exception&) {
        fail("expected a number at position " + std::to_string(i));
      }
      if (v < 1) fail("a cut count is at least 1, got " + std::to_string(v));
      cuts.push_back(v);
      i += used;
      skip();
      if (i < text.size() && text[i] == ',') ++i;
    }
    ++i;  // ')'
    if (cuts.empty()) fail("an input's tuple is empty");
    out.push_back(cuts);
    skip();
    if (i < text.size() && text[i] == ',') ++i;
    skip();
  }
  expect(')');
  skip();
  if (i != text.size()) fail("unexpected text after the strategy");
  if (out.empty()) fail("no input's tuple");
  return out;
}

std::string shard_strategy_string(const ShardStrategy& s) {
  std::string out = "(";
  for (std::size_t k = 0; k < s.size(); ++k) {
    out += k ? ",(" : "(";
    for (std::size_t d = 0; d < s[k].size(); ++d) out += (d ? "," : "") + std::to_string(s[k][d]);
    out += s[k].size() == 1 ? ",)" : ")";
  }
  return out + ")";
}

namespace {

struct Dim {
  Dim() = default;
  Dim(std::int64_t c, std::int64_t s) : cuts(c), stride(s) {}
  std::int64_t cuts = 1, stride = 1;
  Shape merged;                   ///< a flatten's merged dimensions, whole (empty: not merged)
  std::int64_t merged_axis = -1;  ///< the one of them that is cut
  bool operator==(const Dim& o) const {
    return cuts == o.cuts && (cuts == 1 || (stride == o.stride && merged_axis == o.merged_axis));
  }
  bool operator!=(const Dim& o) const { return !(*this == o); }
};

/// Whether `fine` cuts a dimension into pieces of `coarse`'s pieces (any cut of a whole dimension
/// does): rank r's fine piece is then piece (r / sub.stride) mod sub.cuts of its coarse piece, so
/// going between the two gathers or slices over the group `sub` alone.
bool refines(const Dim& fine, const Dim& coarse, Dim* sub) {
  if (fine.cuts <= 1 || fine == coarse) return false;
  if (coarse.cuts == 1) {
    *sub = fine;
    return true;
  }
  if (!fine.merged.empty() || !coarse.merged.empty() || fine.cuts % coarse.cuts != 0) return false;
  const std::int64_t k = fine.cuts / coarse.cuts;
  if (coarse.stride != fine.stride * k) return false;
  *sub = Dim(k, fine.stride);
  return true;
}

/// The ops whose layout follows their inputs element by element (elementwise()).
bool pointwise(const std::string& type) {
  static const std::set<std::string> types = {"Add",     "Sub",       "Mul",     "RealDiv",         "Dropout",
                                              "GeLU",    "SiLU",      "Tanh",    "Sigmoid",         "Neg",
                                              "Softmax", "LayerNorm", "RmsNorm", "RotaryEmbedding", "StridedSlice"};
  return types.count(type) > 0;
}

struct Layout {
  std::vector<Dim> d;
  std::int64_t partial = 1, pstride = 1;  ///< a partial sum over `partial` ranks `pstride` apart
  static Layout whole(std::size_t rank) { return {std::vector<Dim>(rank), 1, 1}; }
};

struct Value {
  TensorId id = -1;
  Layout layout;
};

class Sharder {
 public:
  Sharder(const Workload& train, const SemiAutoConfig& cfg, ShardPlan* plan)
      : m_train(train), m_from(train.graph), m_cfg(cfg), m_plan(plan), m_values(m_from.tensors().size()) {}

  Workload run() {
    if (m_cfg.devices < 1) throw std::invalid_argument("semi-auto: at least one device");
    inputs();
    std::vector<bool> lazy(m_from.tensors().size(), false);
    for (const Op& op : m_from.ops()) {
      if (op.pass != Pass::Forward) continue;
      // Ops on weights alone (an O2 master weight's cast) are built where a consumer asks for
      // the weight, at the layout it wants, so the weight is stored sliced.
      const bool on_weights = std::all_of(op.inputs.begin(), op.inputs.end(), [&](TensorId t) {
        return persistent(t) || lazy[static_cast<std::size_t>(t)];
      });
      if (on_weights && op.outputs.size() == 1) {
        lazy[static_cast<std::size_t>(op.outputs[0])] = true;
        m_lazy_op[op.outputs[0]] = &op;
        continue;
      }
      forward(op);
    }
    return finish();
  }

 private:
  bool persistent(TensorId t) const { return is_persistent(m_from.tensor(t).role); }

  std::int64_t devices_of(const Layout& l) const {
    std::int64_t p = l.partial;
    for (const auto& d : l.d) p *= d.cuts;
    return p;
  }

  Shape local(const Shape& global, const Layout& l, const std::string& who) const {
    Shape s = global;
    for (std::size_t k = 0; k < s.size() && k < l.d.size(); ++k) {
      if (s[k] % l.d[k].cuts != 0)
        throw std::invalid_argument(who + ": dimension " + std::to_string(k) + " of " + shape_string(global) +
                                    " does not divide into " + std::to_string(l.d[k].cuts) + " pieces");
      s[k] /= l.d[k].cuts;
    }
    return s;
  }

  /// The strides of a device matrix laid out row-major (the last axis fastest); checks it fits.
  std::vector<std::int64_t> strides(const std::vector<std::int64_t>& axes, const std::string& who) const {
    std::vector<std::int64_t> s(axes.size(), 1);
    std::int64_t p = 1;
    for (std::size_t k = axes.size(); k-- > 0;) {
      s[k] = p;
      p *= axes[k];
    }
    if (p > m_cfg.devices || m_cfg.devices % p != 0)
      throw std::invalid_argument(who + ": the strategy's cuts multiply to " + std::to_string(p) +
                                  ", which does not divide the " + std::to_string(m_cfg.devices) + " devices");
    if (m_cfg.repeat_right)  // the ranks that repeat each piece are the fastest-varying
      for (auto& v : s) v *= m_cfg.devices / p;
    return s;
  }

  void inputs() {
    const auto& batch = m_train.batch_inputs;
    ShardStrategy ds = m_cfg.dataset;
    if (ds.empty()) {  // MindSpore's default: the batch cut across every device
      for (auto t : batch) {
        std::vector<std::int64_t> cuts(m_from.tensor(t).shape.size(), 1);
        cuts[0] = m_cfg.devices;
        ds.push_back(cuts);
      }
    }
    if (ds.size() != batch.size())
      throw std::invalid_argument("dataset strategy " + shard_strategy_string(ds) + ": " + std::to_string(ds.size()) +
                                  " tuple(s) for the " + std::to_string(batch.size()) + " batch tensors");
    std::int64_t batch_stride = 1;
    for (std::size_t k = 0; k < batch.size(); ++k) {
      const Tensor& t = m_from.tensor(batch[k]);
      const std::string who = "dataset strategy " + shard_strategy_string(ds) + ", " + t.name;
      if (ds[k].size() != t.shape.size())
        throw std::invalid_argument(who + ": " + std::to_string(ds[k].size()) + " cuts for " +
                                    std::to_string(t.shape.size()) + " dimensions " + shape_string(t.shape));
      Layout l = Layout::whole(t.shape.size());
      const auto s = strides(ds[k], who);
      for (std::size_t d = 0; d < ds[k].size(); ++d) l.d[d] = {ds[k][d], s[d]};
      if (k == 0) {
        batch_stride = l.d[0].stride;
        m_batch = l.d[0];
      } else if (l.d[0].cuts > 1) {
        if (l.d[0].cuts != m_batch.cuts)
          throw std::invalid_argument(who + ": its batch cuts differ from the first tensor's");
        l.d[0].stride = batch_stride;  // the same samples as the image's piece
      }
      Tensor nt = t;
      nt.shape = local(t.shape, l, who);
      record_piece(t, l);
      set(batch[k], {m_g.add_tensor(nt), l});
      record(batch[k], "(dataset)");
    }
  }

  void set(TensorId old, Value v) { m_values[static_cast<std::size_t>(old)] = v; }

  void record_piece(const Tensor& t, const Layout& l) {
    if (!m_plan) return;
    ShardPlan::Piece p;
    p.whole = t.shape;
    for (const auto& d : l.d) {
      p.cuts.push_back(d.cuts);
      p.strides.push_back(d.stride);
      p.merged.push_back(d.merged);
      p.merged_axis.push_back(d.merged_axis);
    }
    m_plan->pieces[t.name] = p;
  }

  void record(TensorId old, const std::string& op) {
    if (!m_plan) return;
    const Value& v = m_values[static_cast<std::size_t>(old)];
    ShardPlan::TensorLayout tl;
    tl.tensor = m_from.tensor(old).name;
    tl.op = op;
    tl.global = m_from.tensor(old).shape;
    tl.local = m_g.tensor(v.id).shape;
    for (const auto& d : v.layout.d) tl.cuts.push_back(d.cuts);
    tl.partial = v.layout.partial;
    m_plan->layouts.push_back(tl);
  }

  /// The strategy given for `op`: by its name, or by its cell (the name up to the first '/').
  const ShardStrategy* strategy(const Op& op) {
    auto it = m_cfg.layers.find(op.name);
    if (it == m_cfg.layers.end()) it = m_cfg.layers.find(op.name.substr(0, op.name.find('/')));
    if (it == m_cfg.layers.end()) return nullptr;
    m_used.insert(it->first);
    return &it->second;
  }

  TensorId comm(const std::string& type, const std::string& name, TensorId x, std::int64_t size, std::int64_t stride,
                std::int64_t axis, bool whole_gradient = false) {
    OpAttrs a;
    a.group_size = size;
    a.group_stride = stride;
    a.axis = axis;
    a.whole_gradient = whole_gradient;
    const TensorId y = m_g.apply(type, name, {x}, a)[0];
    if (m_plan && type != "Slice")
      m_plan->collectives.push_back(
          {name, type, size, stride, type == "AllGather" ? m_g.tensor(y).bytes() : m_g.tensor(x).bytes(), true});
    return y;
  }

  /// `v` brought to `want`: partial sums reduced (scattered where `want` cuts a dimension over
  /// their ranks), dimensions cut differently gathered (over a finer cut's own ranks where `want`
  /// is coarser), and the wanted cuts sliced locally. `split`: the group the consumer splits
  /// across; a gather over it reduce-scatters the gradient in backward, any other keeps the
  /// rank's piece of it.
  Value redistribute(Value v, const Layout& want, const std::string& at, const Dim& split = {}) {
    if (v.layout.partial > 1 && want.partial == 1) {
      bool scattered = false;
      for (std::size_t k = 0; k < v.layout.d.size() && !scattered; ++k) {
        Dim sub;
        if (refines(want.d[k], v.layout.d[k], &sub) && sub.cuts == v.layout.partial && sub.stride == v.layout.pstride) {
          v.id = comm("ReduceScatter", at + "/ReduceScatter" + std::to_string(k), v.id, sub.cuts, sub.stride,
                      static_cast<std::int64_t>(k));
          v.layout.d[k] = want.d[k];
          scattered = true;
        }
      }
      if (!scattered) v.id = comm("AllReduce", at + "/AllReduce", v.id, v.layout.partial, v.layout.pstride, 0);
      v.layout.partial = 1;
    }
    // A cut that moves to another dimension, over the same ranks: one AllToAll.
    for (std::size_t k = 0; k < v.layout.d.size(); ++k)
      for (std::size_t j = 0; j < v.layout.d.size(); ++j)
        if (j != k && v.layout.d[k].cuts > 1 && want.d[k].cuts == 1 && v.layout.d[j].cuts == 1 &&
            want.d[j].cuts == v.layout.d[k].cuts && want.d[j].stride == v.layout.d[k].stride &&
            want.d[j].merged.empty() && v.layout.d[k].merged.empty()) {
          OpAttrs a;
          a.group_size = v.layout.d[k].cuts;
          a.group_stride = v.layout.d[k].stride;
          a.axis = static_cast<std::int64_t>(j);
          a.concat_axis = static_cast<std::int64_t>(k);
          const TensorId x = v.id;
          v.id = m_g.apply("AllToAll", at + "/AllToAll", {x}, a)[0];
          if (m_plan)
            m_plan->collectives.push_back(
                {at + "/AllToAll", "AllToAll", a.group_size, a.group_stride, m_g.tensor(x).bytes(), true});
          v.layout.d[j] = v.layout.d[k];
          v.layout.d[k] = {};
        }
    for (std::size_t k = 0; k < v.layout.d.size(); ++k)
      if (Dim finer;
          v.layout.d[k].cuts > 1 && v.layout.d[k] != want.d[k] && !refines(want.d[k], v.layout.d[k], &finer)) {
        Dim sub, to;  // gathered over `sub`'s ranks to `to`: a coarser wanted cut, else whole
        if (refines(v.layout.d[k], want.d[k], &sub))
          to = want.d[k];
        else
          sub = v.layout.d[k];
        const bool claimed = split.cuts > 1 && split == sub;
        v.id = comm("AllGather", at + "/AllGather" + std::to_string(k), v.id, sub.cuts, sub.stride,
                    static_cast<std::int64_t>(k), !claimed);
        if (claimed) m_gathered.emplace_back(sub.cuts, sub.stride);
        v.layout.d[k] = to;
      }
    for (std::size_t k = 0; k < v.layout.d.size(); ++k) {
      Dim sub;  // v's cut here is now whole or coarser than the wanted one
      if (refines(want.d[k], v.layout.d[k], &sub)) {
        v.id =
            comm("Slice", at + "/Slice" + std::to_string(k), v.id, sub.cuts, sub.stride, static_cast<std::int64_t>(k));
        v.layout.d[k] = want.d[k];
      }
    }
    return v;
  }

  /// An input of an op at layout `want`: a weight (or an op on weights) is made at that layout;
  /// a computed tensor is redistributed, once per layout and consumer split (`split`, as
  /// redistribute()'s): Q, K and V share one gather of their input.
  TensorId at(TensorId old, const Layout& want, const std::string& where, const Dim& split = {}) {
    if (persistent(old)) {
      auto it = m_params.find(old);
      if (it != m_params.end()) {
        if (!same(it->second.layout, want))
          throw std::invalid_argument(where + ": weight " + m_from.tensor(old).name +
                                      " is wanted in two different layouts");
        return it->second.id;
      }
      Tensor t = m_from.tensor(old);
      record_piece(t, want);
      t.shape = local(t.shape, want, where + " (" + t.name + ")");
      const Value v{m_g.add_tensor(t), want};
      m_params[old] = v;
      return v.id;
    }
    if (auto it = m_lazy_op.find(old); it != m_lazy_op.end()) {
      if (auto made = m_lazy_made.find(old); made != m_lazy_made.end()) return made->second;
      const Op& op = *it->second;  // element-wise on weights (a cast): its input at the same layout
      std::vector<TensorId> in;
      for (auto t : op.inputs)
        in.push_back(
            at(t, m_from.tensor(t).shape.size() == want.d.size() ? want : Layout::whole(m_from.tensor(t).shape.size()),
               where));
      return m_lazy_made[old] = m_g.apply(op.type, op.name, in, op)[0];
    }
    auto& made = m_redistributed[old];
    for (const auto& r : made)
      if (same(r.want, want) && r.split == split) {
        if (r.claimed) m_gathered.emplace_back(split.cuts, split.stride);
        return r.id;
      }
    const Value& v = m_values[static_cast<std::size_t>(old)];
    const std::size_t gathered = m_gathered.size();
    const TensorId id = redistribute(v, want, where, split).id;
    if (id != v.id) made.push_back({want, split, id, m_gathered.size() > gathered});
    return id;
  }

  static bool same(const Layout& a, const Layout& b) {
    if (a.d.size() != b.d.size() || a.partial != b.partial) return false;
    for (std::size_t k = 0; k < a.d.size(); ++k)
      if (a.d[k] != b.d[k]) return false;
    return true;
  }

  const Layout& layout_of(TensorId old) const {
    static const Layout none;
    if (persistent(old) || m_lazy_op.count(old)) return none;
    return m_values[static_cast<std::size_t>(old)].layout;
  }

  /// The layout of a computed input without its partial sum (what a non-linear op needs).
  Layout valued(TensorId old) const {
    Layout l = layout_of(old);
    if (l.d.empty()) l = Layout::whole(m_from.tensor(old).shape.size());
    l.partial = 1;
    l.pstride = 1;
    return l;
  }

  void emit(const Op& op, const std::vector<TensorId>& inputs, const std::vector<Layout>& outs, OpAttrs attrs) {
    const auto ids = m_g.apply(op.type, op.name, inputs, attrs);
    for (std::size_t k = 0; k < op.outputs.size(); ++k) {
      set(op.outputs[k], {ids.at(k), outs.at(std::min(k, outs.size() - 1))});
      record(op.outputs[k], op.name);
    }
  }

  /// `x` (a computed input, just brought to its layout) consumed by an op split `size` ways across
  /// ranks `stride` apart that all hold x whole: its gradient is a partial sum over them — unless
  /// x was just gathered over that group, whose backward (a ReduceScatter) sums it already.
  TensorId mirror(TensorId x, std::int64_t size, std::int64_t stride, const std::string& at) {
    if (size <= 1) return x;
    for (const auto& [s, st] : m_gathered)
      if (s == size && st == stride) return x;
    // Several consumers split over one group (attention's Q, K and V projections): one Mirror,
    // their gradients summed before its AllReduce.
    const auto key = std::make_tuple(x, size, stride);
    if (auto it = m_mirrored.find(key); it != m_mirrored.end()) return it->second;
    OpAttrs a;
    a.group_size = size;
    a.group_stride = stride;
    const TensorId y = m_g.apply("Mirror", at + "/Mirror", {x}, a)[0];
    if (m_plan)
      m_plan->collectives.push_back(
          {at + "/Mirror/AllReduce (backward)", "AllReduce", size, stride, m_g.tensor(x).bytes(), false});
    m_mirrored[key] = y;
    return y;
  }

  void note_weight_consumer(TensorId weight, const Layout& data) {
    if (!persistent(weight) && !m_lazy_op.count(weight)) return;
    const TensorId root = root_weight(weight);
    m_weight_data[root] = data.d.at(0).cuts > 1;
    // Rows cut more finely than the batch: each rank's gradient is its rows' share.
    if (Dim sub; refines(data.d.at(0), m_batch, &sub)) m_weight_rows[root] = sub;
  }
  TensorId root_weight(TensorId t) const {
    while (!persistent(t)) t = m_lazy_op.at(t)->inputs.at(0);
    return t;
  }

  /// Element-wise ops with numpy broadcasting, and the row-wise ones (Softmax, LayerNorm, RMSNorm
  /// over the last axis, rotary embeddings over the last two, a slice along its axis): every
  /// input and output follows the computed input of the highest rank, a broadcast input aligned
  /// to its trailing axes (an axis of size 1 whole), the axes the op works along whole. A strategy
  /// `given` gives the reference input's cuts (the others' must be theirs, aligned).
  void elementwise(const Op& op, const ShardStrategy* given) {
    const auto& type = op.type;
    std::size_t ref = 0, best = 0;
    bool found = false;
    for (std::size_t k = 0; k < op.inputs.size(); ++k) {
      const TensorId t = op.inputs[k];
      const bool computed = !persistent(t) && !m_lazy_op.count(t);
      const std::size_t rk = m_from.tensor(t).shape.size();
      if (computed && (!found || rk > best)) {
        ref = k;
        best = rk;
        found = true;
      }
    }
    const Shape& rs = m_from.tensor(op.inputs[ref]).shape;
    Layout lx = valued(op.inputs[ref]);
    const std::size_t r = lx.d.size();
    const std::string who = given ? "layer " + op.name + " " + shard_strategy_string(*given) : std::string();
    if (given) {
      if (given->size() != op.inputs.size())
        throw std::invalid_argument(who + ": a " + type + " takes " + std::to_string(op.inputs.size()) +
                                    " tuple(s), one per input");
      for (std::size_t k = 0; k < op.inputs.size(); ++k)
        if ((*given)[k].size() != m_from.tensor(op.inputs[k]).shape.size())
          throw std::invalid_argument(who + ": input " + std::to_string(k) + " has " +
                                      std::to_string(m_from.tensor(op.inputs[k]).shape.size()) + " dimension(s), " +
                                      std::to_string((*given)[k].size()) + " cuts given");
      const auto st = strides((*given)[ref], who);
      for (std::size_t k = 0; k < r; ++k) lx.d[k] = (*given)[ref][k] > 1 ? Dim((*given)[ref][k], st[k]) : Dim();
    }
    std::size_t whole_tail = 0;
    if (type == "Softmax" || type == "LayerNorm" || type == "RmsNorm") whole_tail = 1;
    if (type == "RotaryEmbedding") whole_tail = 2;
    for (std::size_t k = r - std::min(r, whole_tail); k < r; ++k) {
      if (given && lx.d[k].cuts > 1)
        throw std::invalid_argument(who + ": a " + type + " works along its last " +
                                    (whole_tail == 1 ? std::string("axis") : std::to_string(whole_tail) + " axes") +
                                    ", which are not cut");
      lx.d[k] = {};
    }
    if (type == "StridedSlice") {
      if (given && lx.d.at(static_cast<std::size_t>(op.axis)).cuts > 1)
        throw std::invalid_argument(who + ": a StridedSlice's axis is not cut");
      lx.d.at(static_cast<std::size_t>(op.axis)) = {};
    }
    auto aligned = [&](const Shape& s) {
      Layout l = Layout::whole(s.size());
      if (s.size() > r) return l;
      for (std::size_t k = 0; k < s.size(); ++k) {
        const std::size_t j = k + r - s.size();
        if (s[k] == rs[j] && s[k] > 1) l.d[k] = lx.d[j];
      }
      return l;
    };
    std::vector<TensorId> in(op.inputs.size());
    for (std::size_t k = 0; k < op.inputs.size(); ++k) {
      const TensorId t = op.inputs[k];
      const Layout want = k == ref ? lx : aligned(m_from.tensor(t).shape);
      for (std::size_t d = 0; given && d < want.d.size(); ++d)
        if ((*given)[k][d] != want.d[d].cuts)
          throw std::invalid_argument(who + ": input " + std::to_string(k) + "'s cuts are not input " +
                                      std::to_string(ref) + "'s along the axes they share (" +
                                      shard_strategy_string({(*given)[ref]}) + ")");
      if (k != ref) note_weight_consumer(t, lx);
      in[k] = at(t, want, op.name);
    }
    std::vector<Layout> outs;
    for (auto t : op.outputs) outs.push_back(aligned(m_from.tensor(t).shape));
    OpAttrs attrs = op;
    if (type == "StridedSlice") attrs.shape = local(op.shape, outs.at(0), op.name);
    emit(op, in, outs, attrs);
  }

  /// A Reshape that splits or merges axes: each group of input axes that becomes a group of
  /// output axes passes the cut of its outermost axis (of size > 1) to the outermost output axis
  /// of size > 1 when it divides it (a piece of rows stays a piece of rows); any other cut is
  /// gathered first. False: the shapes do not group (left to the default rule).
  bool reshape(const Op& op) {
    const Shape& xs = m_from.tensor(op.inputs[0]).shape;
    const Shape& ys = op.shape;
    Layout lx = valued(op.inputs[0]);
    Layout lo = Layout::whole(ys.size());
    std::size_t i = 0, o = 0;
    while (i < xs.size() || o < ys.size()) {
      const std::size_t i0 = i, o0 = o;
      std::int64_t pi = 1, po = 1;
      if (i < xs.size()) pi *= xs[i++];
      if (o < ys.size()) po *= ys[o++];
      while (pi != po) {
        if (pi < po && i < xs.size())
          pi *= xs[i++];
        else if (po < pi && o < ys.size())
          po *= ys[o++];
        else
          return false;
      }
      // Trailing axes of size 1 join this group.
      while (i < xs.size() && xs[i] == 1 && (o >= ys.size() || ys[o] != 1)) ++i;
      while (o < ys.size() && ys[o] == 1 && (i >= xs.size() || xs[i] != 1)) ++o;
      std::size_t outer_in = i0, outer_out = o0;
      while (outer_in < i && xs[outer_in] == 1) ++outer_in;
      while (outer_out < o && ys[outer_out] == 1) ++outer_out;
      for (std::size_t k = i0; k < i; ++k) {
        const Dim& d = lx.d[k];
        if (d.cuts == 1) continue;
        if (k == outer_in && d.merged.empty() && outer_out < o && ys[outer_out] % d.cuts == 0)
          lo.d[outer_out] = d;
        else
          lx.d[k] = {};
      }
    }
    const TensorId nx = at(op.inputs[0], lx, op.name);
    OpAttrs attrs = op;
    attrs.shape = local(op.shape, lo, op.name);
    emit(op, {nx}, {lo}, attrs);
    return true;
  }

  /// A forward op laid out by its rule, then its output brought to its output strategy's layout.
  void forward(const Op& op) {
    lay_out(op);
    const auto it = m_cfg.outputs.find(op.name);
    if (it == m_cfg.outputs.end()) return;
    m_used_outputs.insert(op.name);
    const ShardStrategy& s = it->second;
    const TensorId out = op.outputs.at(0);
    const Shape& shape = m_from.tensor(out).shape;
    const std::string who = "layer " + op.name + " output " + shard_strategy_string(s);
    if (s.size() != 1 || s[0].size() != shape.size())
      throw std::invalid_argument(who + ": one tuple of " + std::to_string(shape.size()) + " cuts, its output's " +
                                  shape_string(shape));
    Layout want = Layout::whole(shape.size());
    const auto st = strides(s[0], who);
    for (std::size_t k = 0; k < shape.size(); ++k)
      if (s[0][k] > 1) want.d[k] = {s[0][k], st[k]};
    local(shape, want, who);  // the cuts divide it
    Value& v = m_values[static_cast<std::size_t>(out)];
    v = redistribute(v, want, op.name);
    if (!m_plan) return;
    for (auto l = m_plan->layouts.rbegin(); l != m_plan->layouts.rend(); ++l)
      if (l->tensor == m_from.tensor(out).name) {
        l->local = m_g.tensor(v.id).shape;
        l->cuts.clear();
        for (const auto& d : v.layout.d) l->cuts.push_back(d.cuts);
        l->partial = v.layout.partial;
        break;
      }
  }

  void lay_out(const Op& op) {
    const std::string& type = op.type;
    const auto rank_of = [&](TensorId t) { return m_from.tensor(t).shape.size(); };
    const bool shardable = type == "MatMul" || type == "Conv2D";
    const ShardStrategy* s = shardable                     ? strategy(op)
                             : m_cfg.layers.count(op.name) ? &m_cfg.layers.at(op.name)
                                                           : nullptr;
    if (s && !shardable && !pointwise(type))
      throw std::invalid_argument("layer " + op.name +
                                  ": shard strategies apply to MatMul and Conv2D layers and to element-wise and "
                                  "row-wise ops (Add, Mul, Dropout, GeLU, Softmax, LayerNorm, RmsNorm, ...), not " +
                                  type);
    if (s && !shardable) m_used.insert(op.name);
    if (type == "MatMul" && !op.matmul.transpose_a) {
      const TensorId x = op.inputs[0], w = op.inputs[1];
      const bool tb = op.matmul.transpose_b;
      std::int64_t a, b, c, sa, sb, sc;
      if (s) {
        const std::string who = "layer " + op.name + " " + shard_strategy_string(*s);
        if (s->size() != 2 || (*s)[0].size() != 2 || (*s)[1].size() != 2)
          throw std::invalid_argument(who + ": a MatMul takes two tuples of two cuts");
        a = (*s)[0][0];
        b = (*s)[0][1];
        c = tb ? (*s)[1][0] : (*s)[1][1];
        const std::int64_t b2 = tb ? (*s)[1][1] : (*s)[1][0];
        if (b2 != b)
          throw std::invalid_argument(who + ": the contraction is cut " + std::to_string(b) + " ways in x but " +
                                      std::to_string(b2) + " in the weight");
        const auto st = strides({a, b, c}, who);
        sa = st[0];
        sb = st[1];
        sc = st[2];
      } else {  // follow x
        const Layout lx = valued(x);
        a = lx.d[0].cuts;
        sa = lx.d[0].stride;
        b = lx.d[1].cuts;
        sb = lx.d[1].stride;
        c = 1;
        sc = 1;
      }
      Dim db(b, sb);
      if (!s) db = valued(x).d[1];  // following x: its columns, merged or not
      const Layout want_x{{{a, sa}, db}, 1, 1};
      const Layout want_w{tb ? std::vector<Dim>{{c, sc}, db} : std::vector<Dim>{db, {c, sc}}, 1, 1};
      m_gathered.clear();
      TensorId nx = at(x, want_x, op.name, {c, sc});
      if (!persistent(x)) nx = mirror(nx, c, sc, op.name);
      const TensorId nw = at(w, want_w, op.name);
      note_weight_consumer(w, want_x);
      emit(op, {nx, nw}, {Layout{{{a, sa}, {c, sc}}, b, sb}}, op);
      return;
    }
    if (type == "Conv2D") {
      const TensorId x = op.inputs[0], w = op.inputs[1];
      std::int64_t n, c, o, sn, sc, so;
      if (s) {
        const std::string who = "layer " + op.name + " " + shard_strategy_string(*s);
        if (s->size() != 2 || (*s)[0].size() != 4 || (*s)[1].size() != 4)
          throw std::invalid_argument(who + ": a Conv2D takes two tuples of four cuts");
        if ((*s)[0][2] != 1 || (*s)[0][3] != 1 || (*s)[1][2] != 1 || (*s)[1][3] != 1)
          throw std::invalid_argument(who + ": the image's height and width and the kernel are not cut");
        if ((*s)[0][1] != (*s)[1][1])
          throw std::invalid_argument(who + ": the input channels are cut differently in x and the weight");
        n = (*s)[0][0];
        c = (*s)[0][1];
        o = (*s)[1][0];
        const auto st = strides({n, c, o}, who);
        sn = st[0];
        sc = st[1];
        so = st[2];
      } else {
        const Layout lx = valued(x);
        n = lx.d[0].cuts;
        sn = lx.d[0].stride;
        c = lx.d[1].cuts;
        sc = lx.d[1].stride;
        o = 1;
        so = 1;
      }
      const Layout want_x{{{n, sn}, {c, sc}, {}, {}}, 1, 1};
      const Layout want_w{{{o, so}, {c, sc}, {}, {}}, 1, 1};
      m_gathered.clear();
      TensorId nx = at(x, want_x, op.name, {o, so});
      if (!persistent(x)) nx = mirror(nx, o, so, op.name);
      const TensorId nw = at(w, want_w, op.name);
      note_weight_consumer(w, want_x);
      emit(op, {nx, nw}, {Layout{{{n, sn}, {o, so}, {}, {}}, c, sc}}, op);
      return;
    }
    if (type == "Reshape" && rank_of(op.inputs[0]) >= 2 && op.shape.size() == 2 &&
        op.shape[0] == m_from.tensor(op.inputs[0]).shape[0]) {  // a flatten
      Layout lx = valued(op.inputs[0]);
      Dim merged;
      const Shape& xs = m_from.tensor(op.inputs[0]).shape;
      for (std::size_t k = 1; k < lx.d.size(); ++k)
        if (lx.d[k].cuts > 1) {
          if (merged.cuts == 1) {
            merged = lx.d[k];
            merged.merged = Shape(xs.begin() + 1, xs.end());
            merged.merged_axis = static_cast<std::int64_t>(k) - 1;
          } else {
            lx.d[k] = {};  // a second cut merged dimension is gathered
          }
        }
      const TensorId nx = at(op.inputs[0], lx, op.name);
      const Layout lo{{lx.d[0], merged}, 1, 1};
      OpAttrs attrs = op;
      attrs.shape = local(op.shape, lo, op.name);
      emit(op, {nx}, {lo}, attrs);
      return;
    }
    if (type == "BatchNorm" || type == "MaxPool" || type == "ReLU" || type == "ReLU6" || type == "Cast" ||
        type == "BiasAdd" || (type == "ReduceMean" && rank_of(op.inputs[0]) == 4) ||
        type == "SoftmaxCrossEntropyWithLogits" || type == "SparseSoftmaxCrossEntropyWithLogits" || type == "OneHot" ||
        (type == "ReduceMean" && rank_of(op.inputs[0]) == 1)) {
      Layout lx = valued(op.inputs[0]);
      const bool spatial = type == "BatchNorm" || type == "MaxPool" || type == "ReduceMean";
      if (spatial && lx.d.size() == 4) lx.d[2] = lx.d[3] = {};
      if (type == "SoftmaxCrossEntropyWithLogits" || type == "SparseSoftmaxCrossEntropyWithLogits") lx.d[1] = {};
      std::vector<TensorId> in = {at(op.inputs[0], lx, op.name)};
      for (std::size_t k = 1; k < op.inputs.size(); ++k) {
        const TensorId t = op.inputs[k];
        note_weight_consumer(t, lx);
        Layout want = Layout::whole(rank_of(t));
        if (rank_of(t) == lx.d.size() && type != "BiasAdd")
          want = lx;  // the same shape: the same layout
        else if (rank_of(t) == 1 && lx.d.size() >= 2 && (type == "BiasAdd"))
          want.d[0] = lx.d[1];  // a bias along the features
        else if (rank_of(t) == 1 && type == "BatchNorm")
          want.d[0] = lx.d[1];  // per channel
        else if (rank_of(t) == 1 && lx.d.size() == 2 && type == "SparseSoftmaxCrossEntropyWithLogits")
          want.d[0] = lx.d[0];  // the labels of the rank's samples
        in.push_back(at(t, want, op.name));
      }
      std::vector<Layout> outs;
      for (auto t : op.outputs) {
        Layout l = Layout::whole(rank_of(t));
        if (type == "ReduceMean" && rank_of(op.inputs[0]) == 1)
          l = Layout::whole(1);
        else if (rank_of(t) == lx.d.size())
          l = lx;
        else if (type == "ReduceMean" && rank_of(t) == 2)
          l.d = {lx.d[0], lx.d[1]};
        else if (type == "BatchNorm" && rank_of(t) == 1)
          l.d[0] = lx.d[1];
        else if (type == "OneHot" && rank_of(t) == 2)
          l.d[0] = lx.d[0];
        else if (type == "SoftmaxCrossEntropyWithLogits" && rank_of(t) == 1)
          l.d[0] = lx.d[0];
        outs.push_back(l);
      }
      emit(op, in, outs, op);
      return;
    }
    if (type == "Reshape" && reshape(op)) return;
    if (type == "Transpose") {
      const Layout lx = valued(op.inputs[0]);
      Layout lo = Layout::whole(op.shape.size());
      for (std::size_t k = 0; k < op.shape.size(); ++k) lo.d[k] = lx.d.at(static_cast<std::size_t>(op.shape[k]));
      emit(op, {at(op.inputs[0], lx, op.name)}, {lo}, op);
      return;
    }
    if (type == "BatchMatMul") {
      // Batch axes and the rows follow x (attention: the batch and the heads); the contraction
      // and y's columns whole.
      Layout lx = valued(op.inputs[0]);
      const std::size_t r = lx.d.size();
      lx.d[op.matmul.transpose_a ? r - 2 : r - 1] = {};
      Layout ly = lx;
      ly.d[r - 2] = ly.d[r - 1] = {};
      Layout lo = lx;
      lo.d[r - 2] = lx.d[op.matmul.transpose_a ? r - 1 : r - 2];
      lo.d[r - 1] = {};
      m_gathered.clear();
      const TensorId nx = at(op.inputs[0], lx, op.name);
      TensorId ny = at(op.inputs[1], ly, op.name, lo.d[r - 2]);
      // y held whole by the ranks that split x's rows: its gradient is a partial sum over them.
      if (!persistent(op.inputs[1]) && !m_lazy_op.count(op.inputs[1]))
        ny = mirror(ny, lo.d[r - 2].cuts, lo.d[r - 2].stride, op.name);
      emit(op, {nx, ny}, {lo}, op);
      return;
    }
    if (type == "FlashAttentionScore") {
      // Each rank its heads (and batch piece): k and v follow q, the sequence and head width whole;
      // the padding mask [B, 1, 1, S] follows the batch; the context and statistics follow q.
      Layout lq = valued(op.inputs[0]);
      lq.d[2] = lq.d[3] = {};
      std::vector<TensorId> in = {at(op.inputs[0], lq, op.name), at(op.inputs[1], lq, op.name),
                                  at(op.inputs[2], lq, op.name)};
      if (op.inputs.size() == 4) {
        Layout lm = Layout::whole(rank_of(op.inputs[3]));
        const Shape& ms = m_from.tensor(op.inputs[3]).shape;
        if (ms.size() == 4 && ms[0] == m_from.tensor(op.inputs[0]).shape[0]) lm.d[0] = lq.d[0];
        in.push_back(at(op.inputs[3], lm, op.name));
      }
      emit(op, in, {lq, lq, lq}, op);
      return;
    }
    if (type == "EmbeddingLookup") {
      // The rows of the ids this rank holds; the table whole along its width (a computed table,
      // BERT's gather of its masked positions, keeps its rows' cut, ids constant per sample
      // take it too).
      const TensorId table = op.inputs[0], ids = op.inputs[1];
      Layout lt = Layout::whole(2);
      if (!persistent(table) && !m_lazy_op.count(table)) {
        lt.d[0] = valued(table).d[0];
        // Rows cut more finely than the batch (a sequence-parallel region's tokens): the ids index
        // the rank's samples' rows, so the table is gathered to the batch's cut.
        if (Dim sub; refines(lt.d[0], m_batch, &sub)) lt.d[0] = m_batch;
      }
      Layout li = Layout::whole(rank_of(ids));
      if (!persistent(ids))
        li = valued(ids);
      else if (lt.d[0].cuts > 1)
        li.d[0] = lt.d[0];
      note_weight_consumer(table, li.d.empty() ? Layout::whole(1) : li);
      const TensorId nt = at(table, lt, op.name), ni = at(ids, li, op.name);
      Layout lo = li;
      lo.d.push_back({});
      emit(op, {nt, ni}, {lo}, op);
      return;
    }
    if (pointwise(type)) {
      elementwise(op, s);
      return;
    }
    // No rule: whole inputs, whole outputs (every rank computes the op on the whole tensors).
    std::vector<TensorId> in;
    for (auto t : op.inputs) in.push_back(at(t, Layout::whole(rank_of(t)), op.name));
    std::vector<Layout> outs;
    for (auto t : op.outputs) outs.push_back(Layout::whole(rank_of(t)));
    OpAttrs attrs = op;
    emit(op, in, outs, attrs);
  }

  Workload finish() {
    for (const auto& given : m_cfg.layers) {
      const std::string& name = given.first;
      const ShardStrategy& st = given.second;
      if (m_used.count(name)) continue;
      const bool cell = std::any_of(m_from.ops().begin(), m_from.ops().end(), [&](const Op& op) {
        return op.pass == Pass::Forward && op.name.substr(0, op.name.find('/')) == name;
      });
      throw std::invalid_argument(
          "layer " + name + ": " +
          (cell ? "has no MatMul or Conv2D to shard" : "no forward op of " + m_train.name + " has this name or cell") +
          " (strategy " + shard_strategy_string(st) + ")");
    }
    for (const auto& [name, st] : m_cfg.outputs)
      if (!m_used_outputs.count(name))
        throw std::invalid_argument("layer " + name + ": no forward op of " + m_train.name +
                                    " has this name (output strategy " + shard_strategy_string(st) + ")");
    Workload w = m_train;
    w.graph = Graph();
    // The loss: a whole value on every rank (a batch-cut loss is the rank's own mean, as in data
    // parallel; the gradients are averaged over the batch's ranks).
    Value loss = m_values[static_cast<std::size_t>(m_train.loss)];
    if (loss.layout.partial > 1) loss = redistribute(loss, Layout::whole(loss.layout.d.size()), "loss");
    for (auto& t : w.batch_inputs) t = m_values[static_cast<std::size_t>(t)].id;
    w.loss = loss.id;
    TensorId sens = -1;
    if (m_train.sens >= 0) sens = at(m_train.sens, Layout::whole(m_from.tensor(m_train.sens).shape.size()), "loss");
    const auto grads = append_backward(m_g, w.loss, sens);
    OptimizerSpec spec = m_train.optimizer_spec;
    spec.decayed.clear();
    for (auto old : m_train.optimizer_spec.decayed)
      if (auto it = m_params.find(old); it != m_params.end()) spec.decayed.insert(it->second.id);
    // A weight whose op read rows cut more finely than the batch: each rank's gradient is its
    // rows' share, AllReduced over those ranks by the optimizer (Megatron's all-reduce of the
    // sequence-parallel norms' gradients over the tensor-parallel group).
    spec.partial_gradients.clear();
    for (const auto& [old, sub] : m_weight_rows)
      if (auto it = m_params.find(old); it != m_params.end() && m_from.tensor(old).role == TensorRole::Parameter)
        spec.partial_gradients[it->second.id] = {sub.cuts, sub.stride};
    append_optimizer(m_g, grads, spec);
    w.sens = sens;
    w.optimizer_spec = spec;
    w.graph = std::move(m_g);
    // Gradients are averaged over the ranks that hold the same weight piece and saw different
    // samples: the batch's ranks, for a weight whose op read batch-cut data.
    w.parallel.devices = m_cfg.devices;
    w.parallel.semi_auto = true;
    // Every rank initialises its own pieces (MindSpore's no_init_parameters): nothing to broadcast.
    w.parallel.parameter_broadcast = false;
    w.parallel.gradient_group_size = static_cast<std::int32_t>(m_batch.cuts);
    w.parallel.gradient_group_stride = static_cast<std::int32_t>(m_batch.stride);
    std::int64_t global = 0, local_elements = 0;
    for (const auto& [old, v] : m_params) {
      if (m_from.tensor(old).role != TensorRole::Parameter) continue;
      global += m_from.tensor(old).elements();
      local_elements += w.graph.tensor(v.id).elements();
      const auto it = m_weight_data.find(old);
      const bool batch_cut = it == m_weight_data.end() ? m_batch.cuts > 1 : it->second;
      if (!batch_cut || m_batch.cuts == 1) w.parallel.unreduced.insert(v.id);
    }
    if (m_batch.cuts == 1) w.parallel.gradient_group_size = 1;
    w.parallel.data_shards = m_batch.cuts;
    // A rank's pipeline yields its piece of each batch: batch / cuts samples of its 1/cuts of the
    // dataset, so the steps per epoch stay the dataset over the whole batch.
    if (m_train.batch_size % m_batch.cuts != 0)
      throw std::invalid_argument("dataset strategy: the batch of " + std::to_string(m_train.batch_size) +
                                  " does not divide into " + std::to_string(m_batch.cuts) + " pieces");
    w.batch_size = m_train.batch_size / m_batch.cuts;
    // A batch tensor cut along its height or width: the pipeline slices every image into patches
    // and keeps the rank's (SlicePatches, then project).
    if (!m_train.batch_inputs.empty()) {
      const Layout& img = m_values[static_cast<std::size_t>(m_train.batch_inputs[0])].layout;
      const Shape local_img = w.graph.tensor(w.batch_inputs[0]).shape;
      if (img.d.size() == 4 && (img.d[2].cuts > 1 || img.d[3].cuts > 1)) {
        MapOp slice{MapOpType::SlicePatches, local_img[2], local_img[3],
                    static_cast<double>(img.d[2].cuts * img.d[3].cuts)};
        w.data.maps.push_back(slice);
        w.eval_data.maps.push_back(slice);
      }
    }
    if (m_plan) {
      m_plan->parameters_global = global;
      m_plan->parameters_local = local_elements;
      m_plan->gradient_group_size = w.parallel.gradient_group_size;
      m_plan->gradient_group_stride = w.parallel.gradient_group_stride;
      for (const auto& [name, st] : m_cfg.layers) m_plan->strategies[name] = shard_strategy_string(st);
      for (const auto& [name, st] : m_cfg.outputs) m_plan->output_strategies[name] = shard_strategy_string(st);
    }
    return w;
  }

  const Workload& m_train;
  const Graph& m_from;
  const SemiAutoConfig& m_cfg;
  ShardPlan* m_plan;
  Graph m_g;
  std::vector<Value> m_values;              ///< per tensor of the training graph: its value here
  std::map<TensorId, Value> m_params;       ///< weights and state, made at the layout first wanted
  std::map<TensorId, const Op*> m_lazy_op;  ///< ops on weights alone, made where they are used
  std::map<TensorId, TensorId> m_lazy_made;
  std::map<TensorId, bool> m_weight_data;  ///< per weight: whether its op read batch-cut data
  std::map<TensorId, Dim> m_weight_rows;   ///< per weight whose op read rows cut finer: the ranks they divide among
  struct Redistributed {
    Layout want;
    Dim split;
    TensorId id;
    bool claimed;  ///< gathered over `split` (its backward sums the consumer's partial gradients)
  };
  std::map<TensorId, std::vector<Redistributed>> m_redistributed;  ///< per computed tensor, its redistributions
  std::set<std::string> m_used, m_used_outputs;
  std::vector<std::pair<std::int64_t, std::int64_t>> m_gathered;  ///< AllGather groups of an op's input
  std::map<std::tuple<TensorId, std::int64_t, std::int64_t>, TensorId> m_mirrored;  ///< per input and group
  Dim m_batch;                                                    ///< the batch's cut: the data-parallel ranks
};

}  // namespace

Workload semi_auto(const Workload& train, const SemiAutoConfig& cfg, ShardPlan* plan) {
  return Sharder(train, cfg, plan).run();
}

std::vector<std::int64_t> piece_indices(const ShardPlan::Piece& p, std::int64_t rank) {
  const std::size_t n = p.whole.size();
  Shape local(n);
  for (std::size_t d = 0; d < n; ++d) local[d] = p.whole[d] / p.cuts[d];
  std::int64_t count = 1;
  for (auto v : local) count *= v;
  std::vector<std::int64_t> out(static_cast<std::size_t>(count));
  std::vector<std::int64_t> idx(n, 0);
  for (std::int64_t e = 0; e < count; ++e) {
    std::int64_t g = 0;
    for (std::size_t d = 0; d < n; ++d) {
      const std::int64_t piece = (rank / p.strides[d]) % p.cuts[d];
      std::int64_t gd = piece * local[d] + idx[d];
      if (p.cuts[d] > 1 && !p.merged[d].empty()) {  // the merged sub-dimensions' own piece
        const Shape& whole = p.merged[d];
        Shape sub = whole;
        const auto a = static_cast<std::size_t>(p.merged_axis[d]);
        sub[a] /= p.cuts[d];
        std::int64_t rest = idx[d];
        std::vector<std::int64_t> j(whole.size());
        for (std::size_t k = whole.size(); k-- > 0;) {
          j[k] = rest % sub[k];
          rest /= sub[k];
        }
        j[a] += piece * sub[a];
        gd = 0;
        for (std::size_t k = 0; k < whole.size(); ++k) gd = gd * whole[k] + j[k];
      }
      g = g * p.whole[d] + gd;
    }
    out[static_cast<std::size_t>(e)] = g;
    for (std::size_t d = n; d-- > 0;) {  // the next local index, row-major
      if (++idx[d] < local[d]) break;
      idx[d] = 0;
    }
  }
  return out;
}

}  // namespace ascendsim::workloads
