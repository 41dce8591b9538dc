// ONNX import (workloads/onnx_import.h) on models built here with the ONNX message classes: what
// each operator becomes, folding of static shapes, the batch size, and the errors for unsupported
// operators and malformed files. Exports of real networks are checked in tests/python/test_onnx.py.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <map>
#include <string>

#include "workloads/onnx_import.h"
#include "workloads/training.h"

using namespace ascendsim::workloads;
using ::testing::HasSubstr;
using ::testing::Not;

namespace {

/// A model under construction: an NCHW float input, initializers and nodes.
struct ModelBuilder {
  onnx::ModelProto m;
  onnx::GraphProto* g;
  explicit ModelBuilder(std::vector<std::int64_t> input, const std::string& batch_param = "") {
    m.set_ir_version(8);
    m.set_producer_name("test");
    m.add_opset_import()->set_version(13);
    g = m.mutable_graph();
    g->set_name("net");
    auto* in = g->add_input();
    in->set_name("x");
    auto* tt = in->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(onnx::TensorProto::FLOAT);
    for (std::size_t k = 0; k < input.size(); ++k) {
      auto* d = tt->mutable_shape()->add_dim();
      if (k == 0 && !batch_param.empty())
        d->set_dim_param(batch_param);
      else
        d->set_dim_value(input[k]);
    }
  }
  /// A float initializer (shape only: zeros as raw data) or an int64 one with values.
  void weight(const std::string& name, std::vector<std::int64_t> shape) {
    auto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    std::int64_t n = 1;
    for (auto d : shape) t->add_dims(d), n *= d;
    t->set_raw_data(std::string(static_cast<std::size_t>(n) * 4, '\0'));
  }
  void ints(const std::string& name, std::vector<std::int64_t> v) {
    auto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::INT64);
    t->add_dims(static_cast<std::int64_t>(v.size()));
    for (auto x : v) t->add_int64_data(x);
  }
  onnx::NodeProto* node(const std::string& type, const std::string& name, std::vector<std::string> in,
                        std::vector<std::string> out) {
    auto* n = g->add_node();
    n->set_op_type(type);
    n->set_name(name);
    for (auto& s : in) n->add_input(s);
    for (auto& s : out) n->add_output(s);
    return n;
  }
  static void attr(onnx::NodeProto* n, const std::string& name, std::vector<std::int64_t> v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    for (auto x : v) a->add_ints(x);
  }
  static void attr(onnx::NodeProto* n, const std::string& name, std::int64_t v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(v);
  }
  void output(const std::string& name) { g->add_output()->set_name(name); }
  std::string bytes() const { return m.SerializeAsString(); }
  Workload import(const OnnxOptions& o = {}, OnnxSummary* s = nullptr) const {
    return import_onnx_bytes("net.onnx", bytes(), o, s);
  }
};

std::map<std::string, int> op_types(const Graph& g) {
  std::map<std::string, int> n;
  for (const auto& op : g.ops()) ++n[op.type];
  return n;
}

std::string import_error(const std::string& bytes, const OnnxOptions& o = {}) {
  try {
    import_onnx_bytes("bad.onnx", bytes, o);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "(imported)";
}

/// conv 3x3 (bias) -> BN -> ReLU -> max pool -> flatten -> Gemm: a small classifier.
ModelBuilder small_cnn(const std::string& batch_param = "") {
  ModelBuilder b({4, 3, 8, 8}, batch_param);
  b.weight("conv.weight", {8, 3, 3, 3});
  b.weight("conv.bias", {8});
  for (const char* p : {"bn.weight", "bn.bias", "bn.running_mean", "bn.running_var"}) b.weight(p, {8});
  b.weight("fc.weight", {10, 128});
  b.weight("fc.bias", {10});
  auto* conv = b.node("Conv", "/conv/Conv", {"x", "conv.weight", "conv.bias"}, {"c"});
  ModelBuilder::attr(conv, "pads", std::vector<std::int64_t>{1, 1, 1, 1});
  b.node("BatchNormalization", "/bn/BatchNormalization",
         {"c", "bn.weight", "bn.bias", "bn.running_mean", "bn.running_var"}, {"n"});
  b.node("Relu", "/relu/Relu", {"n"}, {"r"});
  auto* pool = b.node("MaxPool", "/pool/MaxPool", {"r"}, {"p"});
  ModelBuilder::attr(pool, "kernel_shape", std::vector<std::int64_t>{2, 2});
  ModelBuilder::attr(pool, "strides", std::vector<std::int64_t>{2, 2});
  b.node("Flatten", "/Flatten", {"p"}, {"f"});
  auto* fc = b.node("Gemm", "/fc/Gemm", {"f", "fc.weight", "fc.bias"}, {"y"});
  ModelBuilder::attr(fc, "transB", 1);
  b.output("y");
  return b;
}

}  // namespace

TEST(Onnx, AClassifierBecomesItsTrainingStep) {
  OnnxSummary s;
  const Workload w = small_cnn().import({}, &s);
  EXPECT_EQ(w.batch_size, 4);
  // Parameters: conv 8*27 + 8, BN gamma/beta 16, fc 1280 + 10; the running statistics are state.
  EXPECT_EQ(parameter_count(w.graph), 8 * 27 + 8 + 16 + 1280 + 10);
  EXPECT_EQ(s.parameters, parameter_count(w.graph));
  EXPECT_EQ(s.state_elements, 16);
  EXPECT_EQ(s.initializers, 8);
  // MACs: conv 8x8 outputs x 8 channels x 27; fc 128 x 10; per sample.
  EXPECT_EQ(forward_macs(w.graph), 4 * (64 * 8 * 27 + 128 * 10));
  const auto n = op_types(w.graph);
  EXPECT_EQ(n.at("Conv2D"), 1);
  EXPECT_EQ(n.at("BiasAdd"), 2);  // the conv's and the Gemm's bias
  EXPECT_EQ(n.at("BatchNorm"), 1);
  EXPECT_EQ(n.at("MaxPool"), 1);
  EXPECT_EQ(n.at("MatMul"), 3);  // forward, and the two gradients
  EXPECT_EQ(n.at("SparseSoftmaxCrossEntropyWithLogits"), 1);
  EXPECT_EQ(n.at("ApplyMomentum"), 6);  // one per trainable initializer
  EXPECT_EQ(n.at("Conv2DBackpropFilter"), 1);
  EXPECT_EQ(n.count("Conv2DBackpropInput"), 0u);  // the input needs no gradient
  EXPECT_TRUE(w.training);
  EXPECT_EQ(w.batch_inputs.size(), 2u);  // the image and the labels the loss appends
  EXPECT_EQ(w.data.dataset.classes, 10);
}

TEST(Onnx, InferenceHasNoBackwardPassNoOptimizerNoLabels) {
  OnnxOptions o;
  o.inference = true;
  const Workload w = small_cnn().import(o);
  EXPECT_FALSE(w.training);
  for (const auto& op : w.graph.ops()) {
    EXPECT_EQ(op.pass, Pass::Forward) << op.name;
    EXPECT_NE(op.type, "ApplyMomentum");
  }
  for (const auto& t : w.graph.tensors()) EXPECT_NE(t.role, TensorRole::Gradient) << t.name;
  EXPECT_EQ(w.batch_inputs.size(), 1u);
  // Inference reads the evaluation split through its deterministic maps.
  for (const auto& m : w.data.maps) EXPECT_FALSE(m.random());
}

TEST(Onnx, TheRecipeSetsPrecisionAsForTheBuiltInNetworks) {
  OnnxOptions o;
  o.recipe.amp_level = "O2";
  o.recipe.keep_batchnorm_fp32 = false;
  o.recipe.loss_scale = 1024;
  const Workload w = small_cnn().import(o);
  // fp32 master weights, cast to fp16 for the network; BatchNorm in fp16 without casts around it.
  for (const auto& op : w.graph.ops())
    if (op.type == "Conv2D") {
      EXPECT_EQ(w.graph.tensor(op.inputs[1]).dtype, DType::F16);
    }
  for (const auto& t : w.graph.tensors())
    if (t.role == TensorRole::Parameter) {
      EXPECT_EQ(t.dtype, DType::F32) << t.name;
    }
  int casts = op_types(w.graph)["Cast"];
  EXPECT_GE(casts, 5);  // the input, the conv weight and bias, the fc weight and bias, the logits
  EXPECT_GE(w.sens, 0);
  EXPECT_EQ(w.optimizer_spec.loss_scale, 1024);
  EXPECT_EQ(w.optimizer_spec.decayed.size(), 2u);  // the conv and fc weights, not biases or BN
}

TEST(Onnx, TheBatchComesFromTheModelOrTheRequest) {
  OnnxOptions o;
  EXPECT_THAT(import_error(small_cnn("N").bytes(), o), HasSubstr("symbolic batch dimension 'N'; give batch_size"));
  o.batch_size = 16;
  const Workload w = import_onnx_bytes("net.onnx", small_cnn("N").bytes(), o);
  EXPECT_EQ(w.batch_size, 16);
  EXPECT_EQ(forward_macs(w.graph), 16 * (64 * 8 * 27 + 128 * 10));
  EXPECT_THAT(import_error(small_cnn().bytes(), o), HasSubstr("fixes the batch at 4, not 16"));
}

TEST(Onnx, StaticShapeArithmeticIsFolded) {
  // x.view(x.size(0), -1) as PyTorch exports it: Shape, Gather, Unsqueeze, Concat, Reshape.
  ModelBuilder b({2, 1, 4, 4}, "batch");
  b.weight("w", {16, 3});
  auto* c0 = b.node("Constant", "/Constant", {}, {"zero"});
  auto* v = c0->add_attribute();
  v->set_name("value");
  v->set_type(onnx::AttributeProto::TENSOR);
  v->mutable_t()->set_data_type(onnx::TensorProto::INT64);
  v->mutable_t()->add_int64_data(0);
  b.ints("minus_one", {-1});
  b.ints("axes", {0});
  b.node("Shape", "/Shape", {"x"}, {"s"});
  b.node("Gather", "/Gather", {"s", "zero"}, {"n"});
  b.node("Unsqueeze", "/Unsqueeze", {"n", "axes"}, {"n1"});
  auto* cat = b.node("Concat", "/Concat", {"n1", "minus_one"}, {"shape"});
  ModelBuilder::attr(cat, "axis", std::int64_t{0});
  b.node("Reshape", "/Reshape", {"x", "shape"}, {"flat"});
  b.node("MatMul", "/MatMul", {"flat", "w"}, {"y"});
  b.output("y");
  OnnxOptions o;
  o.batch_size = 5;
  OnnxSummary s;
  const Workload w = b.import(o, &s);
  EXPECT_EQ(s.folded_nodes, 5);
  bool reshaped = false;
  for (const auto& op : w.graph.ops())
    if (op.type == "Reshape" && op.pass == Pass::Forward) {
      EXPECT_EQ(w.graph.tensor(op.outputs[0]).shape, (Shape{5, 16}));
      reshaped = true;
    }
  EXPECT_TRUE(reshaped);
  EXPECT_EQ(forward_macs(w.graph), 5 * 16 * 3);
}

TEST(Onnx, DepthwiseTransposedAndBroadcastOps) {
  ModelBuilder b({2, 4, 6, 6});
  b.weight("dw", {4, 1, 3, 3});
  b.weight("up", {4, 2, 2, 2});
  b.weight("scale", {1, 2, 1, 1});
  auto* dw = b.node("Conv", "/dw", {"x", "dw"}, {"d"});
  ModelBuilder::attr(dw, "group", std::int64_t{4});
  ModelBuilder::attr(dw, "pads", std::vector<std::int64_t>{1, 1, 1, 1});
  auto* up = b.node("ConvTranspose", "/up", {"d", "up"}, {"u"});
  ModelBuilder::attr(up, "strides", std::vector<std::int64_t>{2, 2});
  b.node("Sigmoid", "/gate", {"u"}, {"g"});
  b.node("Mul", "/scale", {"g", "scale"}, {"m"});  // [2,2,12,12] x [1,2,1,1]
  b.node("GlobalAveragePool", "/gap", {"m"}, {"p"});
  b.node("Flatten", "/flat", {"p"}, {"y"});
  b.output("y");
  const Workload w = b.import();
  const auto n = op_types(w.graph);
  EXPECT_EQ(n.at("DepthwiseConv2dNative"), 1);
  EXPECT_EQ(n.at("DepthwiseConv2dNativeBackpropFilter"), 1);
  EXPECT_EQ(n.at("Conv2DBackpropInput"), 1);  // the transposed convolution, forward
  EXPECT_EQ(n.at("Conv2D"), 1);               // its input's gradient
  EXPECT_EQ(n.at("SigmoidGrad"), 1);
  EXPECT_EQ(n.at("ReduceSum"), 1);  // the broadcast scale's gradient summed back to [1,2,1,1]
  for (const auto& op : w.graph.ops())
    if (op.type == "Conv2DBackpropInput") {
      EXPECT_EQ(w.graph.tensor(op.outputs[0]).shape, (Shape{2, 2, 12, 12}));
    }
  // MACs: depthwise 36 outputs x 4 channels x 9; transposed 36 inputs x 4 x 2 x 4 taps.
  EXPECT_EQ(forward_macs(w.graph), 2 * (36 * 4 * 9 + 36 * 4 * 2 * 4));
}

TEST(Onnx, UnsupportedOperatorsAreAllListedWithTheirFirstNode) {
  ModelBuilder b = small_cnn();
  b.node("NonMaxSuppression", "/nms/first", {"y"}, {"k"});
  b.node("NonMaxSuppression", "/nms/second", {"y"}, {"k2"});
  b.node("TopK", "/topk", {"y"}, {"t"});
  b.node("Conv", "/custom", {"y"}, {"z"})->set_domain("com.example");
  const std::string e = import_error(b.bytes());
  EXPECT_THAT(e, HasSubstr("bad.onnx: 3 operator types not supported, nothing simulated"));
  EXPECT_THAT(e, HasSubstr("NonMaxSuppression (first at node '/nms/first')"));
  EXPECT_THAT(e, HasSubstr("TopK (first at node '/topk')"));
  EXPECT_THAT(e, HasSubstr("com.example::Conv (first at node '/custom')"));
  EXPECT_THAT(e, Not(HasSubstr("/nms/second")));
}

TEST(Onnx, MalformedModelsAreRefusedSayingWhatIsWrong) {
  EXPECT_THAT(import_error(""), HasSubstr("bad.onnx: the file is empty"));
  EXPECT_THAT(import_error("name: lenet\nlayers: 5\n"), HasSubstr("bad.onnx: not an ONNX model"));
  const std::string whole = small_cnn().bytes();
  EXPECT_THAT(import_error(whole.substr(0, whole.size() / 2)), HasSubstr("bad.onnx: not an ONNX model"));
  onnx::ModelProto no_graph;
  no_graph.set_ir_version(8);
  EXPECT_THAT(import_error(no_graph.SerializeAsString()), HasSubstr("without a graph"));
  // A symbolic dimension off the batch axis.
  ModelBuilder sym({1, 3, 8, 8});
  sym.g->mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(2)->set_dim_param("H");
  sym.node("Relu", "/r", {"x"}, {"y"});
  sym.output("y");
  EXPECT_THAT(import_error(sym.bytes()),
              HasSubstr("has a 'H' dimension at axis 2; only the batch axis may be symbolic"));
  // A node reading a value nothing produces; a weight of the wrong shape.
  ModelBuilder dangling({1, 3, 8, 8});
  dangling.node("Relu", "/r", {"nowhere"}, {"y"});
  dangling.output("y");
  EXPECT_THAT(import_error(dangling.bytes()), HasSubstr("node '/r' (Relu): input 'nowhere' is not produced"));
  ModelBuilder wrong = small_cnn();
  wrong.g->mutable_initializer(0)->set_dims(1, 4);  // conv.weight [8, 4, 3, 3] against 3 channels
  wrong.g->mutable_initializer(0)->set_raw_data(std::string(8 * 4 * 9 * 4, '\0'));
  EXPECT_THAT(import_error(wrong.bytes()), HasSubstr("node '/conv/Conv' (Conv)"));
  EXPECT_THAT(import_error(wrong.bytes()), HasSubstr("input channels 3 != weight 4"));
  // Raw data shorter than its shape.
  ModelBuilder truncated = small_cnn();
  truncated.ints("s", {1, 2, 3});
  truncated.g->mutable_initializer(truncated.g->initializer_size() - 1)->clear_int64_data();
  truncated.g->mutable_initializer(truncated.g->initializer_size() - 1)->set_raw_data("abc");
  EXPECT_THAT(import_error(truncated.bytes()), HasSubstr("initializer 's': raw data of 3 bytes for 3 elements"));
}

TEST(Onnx, GroupedConvolutionsSlicesAndSplitsImportWithTheirGradients) {
  // A grouped convolution (2 groups of 2 channels to 3 each), a split of its 6 channels in two
  // halves concatenated the other way round (ShuffleNet's chunk and shuffle), a slice of 4.
  ModelBuilder b({2, 4, 8, 8});
  b.weight("w", {6, 2, 3, 3});
  b.ints("split", {3, 3});
  b.ints("starts", {1});
  b.ints("ends", {5});
  b.ints("axes", {1});
  auto* conv = b.node("Conv", "/conv", {"x", "w"}, {"c"});
  ModelBuilder::attr(conv, "group", std::int64_t{2});
  ModelBuilder::attr(conv, "pads", std::vector<std::int64_t>{1, 1, 1, 1});
  ModelBuilder::attr(b.node("Split", "/split", {"c", "split"}, {"a", "b"}), "axis", std::int64_t{1});
  ModelBuilder::attr(b.node("Concat", "/cat", {"b", "a"}, {"s"}), "axis", std::int64_t{1});
  b.node("Slice", "/slice", {"s", "starts", "ends", "axes"}, {"t"});
  b.node("GlobalAveragePool", "/gap", {"t"}, {"p"});
  b.node("Flatten", "/flat", {"p"}, {"y"});
  b.output("y");
  const Workload w = b.import();
  const auto n = op_types(w.graph);
  EXPECT_EQ(n.at("Conv2D"), 1);
  EXPECT_EQ(n.at("Conv2DBackpropFilter"), 1);
  EXPECT_EQ(n.count("Conv2DBackpropInput"), 0u);  // the input needs no gradient
  EXPECT_EQ(n.at("StridedSlice"), 3 + 2);         // split in two, the slice; Concat's gradient's two
  EXPECT_EQ(n.at("StridedSliceGrad"), 3);
  for (const auto& op : w.graph.ops()) {
    if (op.type == "Conv2D" || op.type == "Conv2DBackpropFilter") {
      EXPECT_EQ(op.conv.group, 2) << op.name;
    }
    if (op.name == "slice/StridedSlice") {
      EXPECT_EQ(op.axis, 1);
      EXPECT_EQ(op.count, 1);
      EXPECT_EQ(w.graph.tensor(op.outputs[0]).shape, (Shape{2, 4, 8, 8}));
    }
  }
  // MACs: 64 outputs x 6 channels x 2 input channels of the group x 9 taps, per sample.
  EXPECT_EQ(forward_macs(w.graph), 2 * 64 * 6 * 2 * 9);

  // What is not supported, said so.
  ModelBuilder bad_group({1, 4, 8, 8});
  bad_group.weight("w", {6, 2, 3, 3});
  ModelBuilder::attr(bad_group.node("Conv", "/conv", {"x", "w"}, {"y"}), "group", std::int64_t{3});
  bad_group.output("y");
  EXPECT_THAT(import_error(bad_group.bytes()),
              HasSubstr("group 3 of 4 input channels with a weight [6,2,3,3]: the group must divide"));
  ModelBuilder stepped({1, 4, 8, 8});
  stepped.ints("starts", {0});
  stepped.ints("ends", {4});
  stepped.ints("axes", {1});
  stepped.ints("steps", {2});
  stepped.node("Slice", "/every_other", {"x", "starts", "ends", "axes", "steps"}, {"y"});
  stepped.output("y");
  EXPECT_THAT(import_error(stepped.bytes()),
              HasSubstr("node '/every_other' (Slice): a slice with step 2 along axis 1 is not supported"));
  ModelBuilder uneven({1, 4, 8, 8});
  uneven.ints("split", {3, 3});
  ModelBuilder::attr(uneven.node("Split", "/split", {"x", "split"}, {"a", "b"}), "axis", std::int64_t{1});
  uneven.output("a");
  EXPECT_THAT(import_error(uneven.bytes()), HasSubstr("split sizes [3,3] do not divide axis 1 of [1,4,8,8]"));
}

TEST(Onnx, AZeroPadBeforeAnAveragePoolIsThePoolsCountedPadding) {
  // PyTorch's avg_pool2d(x, 3, 1, padding=1), as exported: Pad 1 of zeros, AveragePool 3x3 without
  // pads; the pool's padding, counted in its divisor (count_include_pad).
  ModelBuilder b({2, 4, 6, 6});
  b.ints("pads", {0, 0, 1, 1, 0, 0, 1, 1});
  b.node("Pad", "/pad", {"x", "pads"}, {"p"});
  auto* pool = b.node("AveragePool", "/pool", {"p"}, {"a"});
  ModelBuilder::attr(pool, "kernel_shape", std::vector<std::int64_t>{3, 3});
  ModelBuilder::attr(pool, "strides", std::vector<std::int64_t>{1, 1});
  b.node("GlobalAveragePool", "/gap", {"a"}, {"g"});
  b.node("Flatten", "/flat", {"g"}, {"y"});
  b.output("y");
  const Workload w = b.import();
  int pools = 0;
  for (const auto& op : w.graph.ops())
    if (op.type == "AvgPool") {
      ++pools;
      EXPECT_EQ(op.pool.pad, 1);
      EXPECT_EQ(op.count, 1);
      EXPECT_EQ(w.graph.tensor(op.outputs[0]).shape, (Shape{2, 4, 6, 6}));
    }
  EXPECT_EQ(pools, 1);
  // Read by a max pool, the zeros would compete with the values: refused.
  ModelBuilder m({2, 4, 6, 6});
  m.ints("pads", {0, 0, 1, 1, 0, 0, 1, 1});
  m.node("Pad", "/pad", {"x", "pads"}, {"p"});
  ModelBuilder::attr(m.node("MaxPool", "/pool", {"p"}, {"y"}), "kernel_shape", std::vector<std::int64_t>{3, 3});
  m.output("y");
  EXPECT_THAT(import_error(m.bytes()),
              HasSubstr("node '/pad' (Pad): padding by a Pad node is supported as the equal zero padding of an "
                        "average pool's input (pads [0,0,1,1,0,0,1,1])"));
}

TEST(Onnx, ARefusalListsEveryBlockerAtOnce) {
  // Two unsupported types, and three supported operators in unsupported forms (two of them the
  // same problem): all in one message. The node reading TopK's output is not checked.
  ModelBuilder b = small_cnn();
  b.weight("w2", {8, 3, 3, 3});
  auto* zero = b.node("Conv", "/zero_stride", {"x", "w2"}, {"z"});
  ModelBuilder::attr(zero, "strides", std::vector<std::int64_t>{0, 0});
  for (const char* name : {"/tall_a", "/tall_b"}) {
    auto* tall = b.node("MaxPool", name, {"r"}, {std::string(name) + "_out"});
    ModelBuilder::attr(tall, "kernel_shape", std::vector<std::int64_t>{3, 1});
  }
  b.node("TopK", "/topk", {"y"}, {"t"});
  b.node("Mod", "/mod", {"y", "y"}, {"e"});
  auto* after = b.node("MaxPool", "/after_topk", {"t"}, {"u"});
  b.node("Shape", "/shape_of_topk", {"t"}, {"st"});  // a folded op: not checked either
  ModelBuilder::attr(after, "kernel_shape", std::vector<std::int64_t>{5, 1});
  const std::string e = import_error(b.bytes());
  EXPECT_THAT(e, HasSubstr("bad.onnx: 2 operator types not supported, nothing simulated:\n  Mod (first at node "
                           "'/mod')\n  TopK (first at node '/topk')\nand 2 operator forms not supported:"));
  EXPECT_THAT(e, HasSubstr("node '/zero_stride' (Conv): strides [0,0]: a stride must be a positive number"));
  EXPECT_THAT(e, HasSubstr("node '/tall_a' (MaxPool): a square 2-D window, or one spanning the whole input (a "
                           "global pool), is supported, kernel_shape [3,1] over 8x8 (and 1 more such node)"));
  EXPECT_THAT(e, Not(HasSubstr("/tall_b")));
  EXPECT_THAT(e, Not(HasSubstr("/after_topk")));
  EXPECT_THAT(e, Not(HasSubstr("/shape_of_topk")));
  // One problem alone is said as before: the node and what is wrong.
  ModelBuilder one({1, 3, 8, 8});
  one.weight("w", {8, 3, 3, 3});
  ModelBuilder::attr(one.node("Conv", "/c", {"x", "w"}, {"y"}), "strides", std::vector<std::int64_t>{0, 0});
  one.output("y");
  EXPECT_EQ(import_error(one.bytes()),
            "bad.onnx: node '/c' (Conv): strides [0,0]: a stride must be a positive number of pixels (1 to 2^31)");
  // An initializer with dims and no data: refused in timing mode as in functional mode, large or small.
  for (std::int64_t side : {4, 300}) {
    ModelBuilder empty = small_cnn();
    empty.weight("unused", {side, side});
    empty.g->mutable_initializer(empty.g->initializer_size() - 1)->clear_raw_data();
    EXPECT_THAT(import_error(empty.bytes()), HasSubstr("initializer 'unused': 0 values for " +
                                                       std::to_string(side * side) + " elements (truncated?)"));
  }
}

TEST(Onnx, ARectangularPoolSpanningTheInputIsAGlobalPool) {
  // TextCNN's max over the sentence: a conv of kernel (3, width) gives [N, C, L, 1], pooled by a
  // (L, 1) window with strides (L, 1) as PyTorch exports MaxPool2d((L, 1)).
  ModelBuilder b({2, 1, 7, 5});
  b.weight("conv.weight", {6, 1, 3, 5});
  b.weight("fc.weight", {2, 6});
  b.node("Conv", "/conv", {"x", "conv.weight"}, {"c"});  // [2, 6, 5, 1]
  auto* pool = b.node("MaxPool", "/pool", {"c"}, {"p"});
  ModelBuilder::attr(pool, "kernel_shape", std::vector<std::int64_t>{5, 1});
  ModelBuilder::attr(pool, "strides", std::vector<std::int64_t>{5, 1});
  b.node("Flatten", "/flat", {"p"}, {"f"});
  ModelBuilder::attr(b.node("Gemm", "/fc", {"f", "fc.weight"}, {"y"}), "transB", 1);
  b.output("y");
  const Workload w = b.import();
  const auto n = op_types(w.graph);
  EXPECT_EQ(n.at("MaxPool"), 1);
  EXPECT_EQ(n.at("MaxPoolGrad"), 1);
  for (const auto& op : w.graph.ops())
    if (op.type == "MaxPool") {
      EXPECT_EQ(w.graph.tensor(op.outputs[0]).shape, (Shape{2, 6, 1, 1}));
      EXPECT_EQ(op.pool.kernel, 5);
      EXPECT_EQ(op.pool.width(), 1);
    }
  // A rectangular window that does not span the input, or one padded, is refused.
  ModelBuilder part = b;
  part.g = part.m.mutable_graph();
  part.g->mutable_node(1)->mutable_attribute(0)->set_ints(0, 3);
  EXPECT_THAT(import_error(part.bytes()), HasSubstr("node '/pool' (MaxPool): a square 2-D window, or one spanning "
                                                    "the whole input (a global pool), is supported, kernel_shape "
                                                    "[3,1] over 5x1"));
  ModelBuilder padded = b;
  padded.g = padded.m.mutable_graph();
  ModelBuilder::attr(padded.g->mutable_node(1), "pads", std::vector<std::int64_t>{1, 0, 1, 0});
  EXPECT_THAT(import_error(padded.bytes()), HasSubstr("a rectangular window spanning the input is supported "
                                                      "without padding, pads [1,0,1,0]"));
}

TEST(Onnx, TheBiasOfAConvolutionOfOneChannelIsTrained) {
  // SRCNN's last layer: 32 -> 1 channel, its bias one element. A one-element initializer is
  // otherwise a constant (an epsilon); a convolution's bias is a parameter, updated as the others.
  ModelBuilder b({2, 3, 6, 6});
  b.weight("conv.weight", {1, 3, 3, 3});
  b.weight("conv.bias", {1});
  b.weight("fc.weight", {10, 36});
  ModelBuilder::attr(b.node("Conv", "/conv", {"x", "conv.weight", "conv.bias"}, {"c"}), "pads",
                     std::vector<std::int64_t>{1, 1, 1, 1});
  b.node("Flatten", "/flat", {"c"}, {"f"});
  ModelBuilder::attr(b.node("Gemm", "/fc", {"f", "fc.weight"}, {"y"}), "transB", 1);
  b.output("y");
  const Workload w = b.import();
  EXPECT_EQ(parameter_count(w.graph), 27 + 1 + 360);
  EXPECT_EQ(op_types(w.graph).at("ApplyMomentum"), 3);
}

TEST(Onnx, ALossOfTheModelsOwn) {
  // The model ends in its own loss: the mean square of its outputs (a scalar, keepdims 0).
  ModelBuilder b = small_cnn();
  b.node("Mul", "/square", {"y", "y"}, {"sq"});
  auto* mean = b.node("ReduceMean", "/loss", {"sq"}, {"l"});
  ModelBuilder::attr(mean, "keepdims", std::int64_t{0});
  b.g->mutable_output(0)->set_name("l");
  OnnxOptions o;
  EXPECT_THAT(import_error(b.bytes(), o), HasSubstr("is [1]; softmax cross entropy needs logits [N, classes]"));
  o.loss = false;
  const Workload w = b.import(o);
  EXPECT_EQ(w.graph.tensor(w.loss).role, TensorRole::Loss);
  EXPECT_EQ(w.graph.tensor(w.loss).shape, Shape{1});
  EXPECT_EQ(w.batch_inputs.size(), 1u);  // no labels: the model needs none
  const auto n = op_types(w.graph);
  EXPECT_EQ(n.count("SparseSoftmaxCrossEntropyWithLogits"), 0u);
  EXPECT_EQ(n.at("ReduceMeanGrad"), 1);
  EXPECT_EQ(n.at("ApplyMomentum"), 6);
  // A model whose output is not a scalar has no loss of its own.
  EXPECT_THAT(import_error(small_cnn().bytes(), o), HasSubstr("a model's own loss must be a scalar"));
}

TEST(Onnx, FunctionalModeTakesTheFilesValues) {
  OnnxOptions o;
  o.values = true;
  const Workload w = small_cnn().import(o);
  ASSERT_TRUE(w.initial_values);
  // Every initializer the graph holds has its values (zeros here), the running statistics too.
  for (const char* name : {"conv.weight", "conv.bias", "bn.weight", "bn.running_var", "fc.weight", "fc.bias"}) {
    ASSERT_TRUE(w.initial_values->count(name)) << name;
  }
  EXPECT_EQ(w.initial_values->at("conv.weight").size(), 8u * 27);
  // BatchNorm's values are computed with MindSpore's constants: another epsilon is refused.
  ModelBuilder b = small_cnn();
  auto* eps = b.g->mutable_node(1)->add_attribute();
  eps->set_name("epsilon");
  eps->set_type(onnx::AttributeProto::FLOAT);
  eps->set_f(1e-3f);
  EXPECT_THAT(import_error(b.bytes(), o), HasSubstr("functional mode computes BatchNorm with epsilon 1e-5"));
  EXPECT_EQ(b.import().batch_size, 4);  // the timing does not depend on it
}

TEST(Onnx, AWeightReadThroughIdentityIsThatWeight) {
  // PyTorch's eval export: BatchNorm folded into each convolution's bias, and initializers of
  // equal values (a fresh network's zero biases) written once, the other readers reading them
  // through an Identity (or a Cast to a float type).
  ModelBuilder b({4, 3, 8, 8});
  b.weight("c1.weight", {8, 3, 3, 3});
  b.weight("c2.weight", {8, 8, 1, 1});
  b.weight("c3.weight", {8, 8, 1, 1});
  b.weight("zeros", {8});
  b.weight("fc.weight", {10, 512});
  b.weight("fc.bias", {10});
  b.node("Identity", "/id", {"zeros"}, {"bias2"});
  auto* cast = b.node("Cast", "/cast", {"bias2"}, {"bias3"});
  ModelBuilder::attr(cast, "to", std::int64_t{onnx::TensorProto::FLOAT});
  ModelBuilder::attr(b.node("Conv", "/c1/Conv", {"x", "c1.weight", "zeros"}, {"a"}), "pads",
                     std::vector<std::int64_t>{1, 1, 1, 1});
  b.node("Conv", "/c2/Conv", {"a", "c2.weight", "bias2"}, {"b"});
  b.node("Conv", "/c3/Conv", {"b", "c3.weight", "bias3"}, {"c"});
  b.node("Flatten", "/Flatten", {"c"}, {"f"});
  auto* fc = b.node("Gemm", "/fc/Gemm", {"f", "fc.weight", "fc.bias"}, {"y"});
  ModelBuilder::attr(fc, "transB", 1);
  b.output("y");
  for (bool inference : {false, true}) {
    OnnxOptions o;
    o.inference = inference;
    const Workload w = b.import(o);
    const auto n = op_types(w.graph);
    EXPECT_EQ(n.at("Conv2D"), 3);
    EXPECT_EQ(n.count("Conv2DBackpropFilter") ? n.at("Conv2DBackpropFilter") : 0, inference ? 0 : 3);
    EXPECT_EQ(n.at("BiasAdd"), 4);                        // every convolution's bias, and the Gemm's
    // The shared bias is one parameter: the file's initializers, each once.
    EXPECT_EQ(parameter_count(w.graph), 8 * 27 + 64 + 64 + 8 + 5120 + 10);
    EXPECT_EQ(forward_macs(w.graph), 4 * (64 * 8 * (27 + 8 + 8) + 512 * 10));
    if (inference) continue;
    EXPECT_EQ(n.at("ApplyMomentum"), 6);  // one update of the shared bias,
    EXPECT_EQ(n.at("AddN"), 1);           // its three convolutions' gradients summed
  }
  // Every convolution's bias is the initializer itself (through the Identity and the Cast too),
  // and in functional mode it starts from the initializer's values.
  OnnxOptions o;
  o.values = true;
  const Workload w = b.import(o);
  int biases = 0;
  for (const auto& op : w.graph.ops())
    if (op.type == "BiasAdd" && op.name.rfind("c", 0) == 0) {
      EXPECT_EQ(w.graph.tensor(op.inputs[1]).name, "zeros") << op.name;
      ++biases;
    }
  EXPECT_EQ(biases, 3);
  ASSERT_TRUE(w.initial_values);
  EXPECT_EQ(w.initial_values->at("zeros").size(), 8u);
  EXPECT_EQ(w.initial_values->count("bias2") + w.initial_values->count("bias3"), 0u);
}

TEST(Onnx, AnInputTheModelCannotSimulateIsRefusedNamingItsValue) {
  auto with_input = [](std::vector<std::int64_t> dims, int type = onnx::TensorProto::FLOAT) {
    ModelBuilder b = small_cnn();
    auto* tt = b.g->mutable_input(0)->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(type);
    for (std::size_t k = 0; k < dims.size(); ++k) tt->mutable_shape()->mutable_dim(static_cast<int>(k))->set_dim_value(dims[k]);
    return b.bytes();
  };
  // A fixed batch of 0, or of fewer: refused, with or without a batch size for the run.
  OnnxOptions sized;
  sized.batch_size = 4;
  for (std::int64_t batch : {0, -1}) {
    for (const OnnxOptions& o : {OnnxOptions{}, sized})
      EXPECT_THAT(import_error(with_input({batch, 3, 8, 8}), o),
                  HasSubstr("bad.onnx: input 'x' has a fixed dimension of " + std::to_string(batch) +
                            " at axis 0 (the batch); a dimension must be 1 to 2^31"));
  }
  EXPECT_THAT(import_error(with_input({4, 3, 0, 8})), HasSubstr("input 'x' has a fixed dimension of 0 at axis 2"));
  EXPECT_THAT(import_error(with_input({4, 3, std::int64_t{1} << 40, 8})),
              HasSubstr("input 'x' has a fixed dimension of 1099511627776 at axis 2"));
  // Dimensions each in range whose product would overflow.
  const std::int64_t big = std::int64_t{1} << 31;
  EXPECT_THAT(import_error(with_input({big, big, big, big})),
              HasSubstr("input 'x' is [2147483648,2147483648,2147483648,2147483648], more than 2^40 elements"));
  // Element types no simulated input holds.
  for (int type : {onnx::TensorProto::STRING, onnx::TensorProto::BOOL, onnx::TensorProto::COMPLEX64,
                   onnx::TensorProto::UNDEFINED})
    EXPECT_THAT(import_error(with_input({4, 3, 8, 8}, type)),
                HasSubstr("input 'x' holds " +
                          (type == onnx::TensorProto::UNDEFINED
                               ? std::string("elements of type 0")
                               : onnx::TensorProto::DataType_Name(static_cast<onnx::TensorProto::DataType>(type))) +
                          " elements"));
  // No shape at all, and no name.
  ModelBuilder shapeless = small_cnn();
  shapeless.g->mutable_input(0)->mutable_type()->mutable_tensor_type()->clear_shape();
  EXPECT_THAT(import_error(shapeless.bytes()), HasSubstr("input 'x' has no shape"));
  ModelBuilder nameless = small_cnn();
  nameless.g->mutable_input(0)->clear_name();
  EXPECT_THAT(import_error(nameless.bytes()), HasSubstr("an input without a name"));
}
