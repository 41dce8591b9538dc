// Datasets and the host-side preprocessing recipes of the workloads. Parsers take file contents
// (already decompressed) so this folder needs nothing but the standard library; the runtime
// opens the files. A dataset is described by its samples' raw geometry: the pipeline model
// charges per-sample costs from it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace ascendsim::workloads {

/// ImageFolder: a directory of class folders of JPEG files (MindSpore's ImageFolderDataset);
/// the ImageNet workloads read it, or synthesise such JPEGs (SyntheticJpeg) when given none.
/// Generator: MindSpore's GeneratorDataset over a Python source, each yield a row (or a whole batch,
/// DatasetSpec::rows_per_yield) of `record_bytes` a row, converted from NumPy arrays.
enum class DatasetFormat { MnistIdx, Cifar10Binary, SyntheticJpeg, ImageFolder, MindRecord, Generator };
const char* dataset_format_name(DatasetFormat f);

struct DatasetSpec {
  DatasetFormat format = DatasetFormat::SyntheticJpeg;
  std::string source;  ///< directory read, or "synthetic"
  std::int64_t samples = 0;
  std::int64_t height = 0, width = 0, channels = 0;  ///< raw sample (mean for synthetic JPEGs)
  std::int64_t classes = 0;
  bool encoded = false;           ///< samples are JPEG files to decode
  std::int64_t record_bytes = 0;  ///< bytes read per sample (mean for JPEGs)
  /// A token stream (a directory's train-tokens.bin): `samples` counts its tokens; a sequence
  /// model reads them as windows of its sequence.
  bool token_stream = false;
  /// A generator's rows per yield: 1 (rows, batched by the batch op) or the batch (a source that
  /// yields whole batches, which the batch op passes on).
  std::int64_t rows_per_yield = 1;
  /// A generator's columns per yield (each a NumPy array turned into a tensor).
  std::int64_t columns = 2;

  /// Geometry of sample `index` (JPEG sizes vary deterministically with the index).
  struct Geometry {
    std::int64_t height, width, channels, file_bytes;
  };
  Geometry sample(std::int64_t index) const;
  /// An image folder's files, each with its JPEG dimensions (from its header) and size; sample()
  /// reads them (shared by the copies of the spec).
  std::shared_ptr<const std::vector<Geometry>> files;
};

/// Parses MNIST idx images and labels (any N, rows, cols). Throws std::runtime_error naming the
/// file for a wrong magic number, a count mismatch, truncation or a label >= 10.
/// `images_tail_bytes` is the length of the image file after its 16-byte header.
DatasetSpec parse_mnist(const std::string& images_name, const std::string& images_header,
                        std::int64_t images_tail_bytes, const std::string& labels_name, const std::string& labels);

/// Parses CIFAR-10 binary batches (records of 1 label byte + 3072 pixel bytes).
DatasetSpec parse_cifar10(const std::vector<std::pair<std::string, std::string>>& batches);

/// What a JPEG's header says: its size and components, from the first SOF marker.
struct JpegHeader {
  enum class Status { Found, NeedMore, Bad } status = Status::NeedMore;
  std::int64_t height = 0, width = 0, channels = 0;
  std::string problem;  ///< for Bad: what is wrong
};
/// Parses the markers of `bytes` (a prefix of the file, or all of it when `whole`) up to the first
/// start-of-frame. NeedMore: the prefix ends first; Bad: not a JPEG, or truncated when `whole`.
JpegHeader parse_jpeg_header(const std::string& bytes, bool whole);

/// ImageNet-like: `samples` JPEGs with a deterministic spread of sizes around 400x350.
DatasetSpec synthetic_imagenet(std::int64_t samples = 1281167);

/// MNIST-shaped until a real dataset is given: `samples` 28x28 grey images, 10 classes.
DatasetSpec synthetic_mnist(std::int64_t samples = 60000);
/// CIFAR-10-shaped until a real dataset is given: `samples` 32x32 colour records, 10 classes.
DatasetSpec synthetic_cifar10(std::int64_t samples = 50000);

struct DataRecipe;
/// ImageNet training as the model zoo's ResNet script (create_dataset2, do_train=True): `samples`
/// JPEGs, each through RandomCropDecodeResize(224, scale (0.08, 1), ratio (3/4, 4/3)), flipped,
/// normalised, HWC2CHW in one map() call; the label's TypeCast in another.
DataRecipe imagenet_train_recipe(std::int64_t samples = 1281167);
/// MobileNetV2's ImageNet training script: as ResNet's with RandomColorAdjust(0.4, 0.4, 0.4) after
/// the flip, and a shuffle buffer of 1000 rows before the batch.
DataRecipe mobilenet_train_recipe(std::int64_t samples = 1281167);
/// Mean fraction of an image's area a random resized crop keeps (RandomCropDecodeResize's window,
/// RandomCrop with an area): per attempt a scale s uniform in [scale_min, scale_max] and a ratio r
/// log-uniform in [ratio_min, ratio_max], a window of s x the area with width/height r, accepted if
/// it fits the image (aspect = width / height); after `attempts` misses the whole image. Computed
/// analytically (exact but for the sampler's rounding of the window to whole pixels).
double random_resized_crop_mean_area(double aspect, double scale_min = 0.08, double scale_max = 1.0,
                                     double ratio_min = 0.75, double ratio_max = 4.0 / 3, int attempts = 10);
/// MindSpore's LeNet pipeline on MNIST-shaped images: resize to height x width, rescale,
/// normalise, HWC2CHW, cast the label.
DataRecipe mnist_recipe(std::int64_t height, std::int64_t width);
/// ImageNet evaluation (create_dataset(do_train=False)): the 50,000 validation JPEGs, decoded, the
/// shorter side resized to 256, the centre 224x224 cropped, normalised.
DataRecipe imagenet_eval_recipe();

/// One preprocessing op of a map, as the pipeline model charges it.
enum class MapOpType {
  Decode,
  Resize,
  RandomCrop,
  CenterCrop,
  RandomHorizontalFlip,
  Rescale,
  Normalize,
  HWC2CHW,
  TypeCast,
  SlicePatches,  ///< SlicePatches + project: the rank keeps one height x width patch (the strip)
  /// Decodes only a random resized crop's window of the JPEG and resizes it to height x width, one
  /// op (the model zoo's ImageNet training scripts).
  RandomCropDecodeResize,
  /// Brightness, contrast and saturation, each by a random factor in [1 - x, 1 + x], in random order.
  RandomColorAdjust,
  /// CutOut(length, num_patches): `patches` squares of side `height` set to zero, each centred at a
  /// uniformly random pixel and clipped at the borders.
  CutOut,
  /// RandomErasing(prob, scale, ratio): with probability `prob`, one random rectangle of `scale`
  /// (fraction of the area) and `ratio` (height / width) set to a constant (the timm and MindCV
  /// definition).
  RandomErasing,
};
const char* map_op_name(MapOpType t);

struct MapOp {
  MapOpType type;
  /// Output size for Resize and crops; Resize with width 0 scales the shorter side to `height`,
  /// keeping the aspect ratio.
  std::int64_t height = 0, width = 0;
  double area = 1.0;  ///< RandomCrop: mean fraction of the area kept before resizing; SlicePatches: the patches
  /// The dataset's map() call the op belongs to: ops of one call run together on that call's
  /// workers, one stage of the execution tree. -1: as the model zoo's scripts group them (see
  /// DataRecipe::calls).
  std::int64_t call = -1;
  /// RandomCropDecodeResize: the window's scale (fraction of the area) and width/height ratio ranges.
  double scale_min = 0.08, scale_max = 1.0, ratio_min = 0.75, ratio_max = 4.0 / 3;
  /// RandomColorAdjust: factors drawn in [max(0, 1 - x), 1 + x] for each.
  double brightness = 0, contrast = 0, saturation = 0;
  /// RandomCrop: zero padding on every side before the crop (CIFAR-10's RandomCrop(32, padding=4)).
  std::int64_t pad = 0;
  /// CutOut: the squares (num_patches).
  std::int64_t patches = 1;
  /// RandomErasing: the probability an image is erased; RandomHorizontalFlip: that it is flipped.
  double prob = 0.5;
  /// The op is a Python function (a transform written in Python, as MindCV's RandomErasing): each
  /// row also pays a call into the interpreter (host.python_call_us).
  bool python = false;
  /// Dataset offload (MindSpore's map(offload=True)): the op runs on the device as a kernel of the
  /// step's graph, not on the host; the batch leaves the host as the ops before it left it.
  bool offload = false;
  bool random() const {
    return type == MapOpType::RandomCrop || type == MapOpType::RandomHorizontalFlip ||
           type == MapOpType::RandomCropDecodeResize || type == MapOpType::RandomColorAdjust ||
           type == MapOpType::CutOut || type == MapOpType::RandomErasing;
  }
};

/// One map() call of the dataset script: its ops (indices into DataRecipe::maps, in order) and the
/// column it maps.
struct MapCall {
  std::vector<std::size_t> ops;
  std::string column;  ///< "image" or "label"
  std::string name;    ///< "Map(Decode,RandomCrop,...)", as MindSpore's profiler names map ops by their operations
};

/// The workload's default dataset (its samples count fixes the epoch length) and map recipe.
struct DataRecipe {
  DatasetSpec dataset;
  std::vector<MapOp> maps;
  /// The script's shuffle(buffer_size) before the batch, rows; 0: none (the sampler shuffles).
  /// pipeline.shuffle_buffer, when set (>= 0), replaces it.
  std::int64_t shuffle_buffer = 0;
  /// The map() calls in the order the script makes them. Ops with an explicit `call` are grouped
  /// by it, in ascending order; otherwise as the model zoo's scripts do: the image ops in one call
  /// (`operations=trans`), the label's TypeCast in its own, a SlicePatches in its own after them.
  std::vector<MapCall> calls() const;
  /// Index of the first random map op: a cache placed after the deterministic prefix holds
  /// samples after maps[0 .. first_random).
  std::size_t first_random() const;
  /// A sample as it leaves the host (the host's maps applied; offloaded ops not): height, width,
  /// channels and bytes per value (1 until a Rescale or Normalize makes it float32).
  struct Output {
    double height = 0, width = 0, channels = 0, bytes_per_value = 1;
    double values() const { return height * width * channels; }
  };
  Output host_output() const;
};

/// How a map op changes a sample's geometry (`o`): a resize or crop its height and width, Rescale
/// and Normalize its values to float32. Offloaded ops are the caller's to skip.
void apply_map_geometry(const MapOp& op, DataRecipe::Output& o);

/// Mean fraction of an image of width/height `aspect` that RandomErasing erases when it erases
/// (timm's and MindCV's definition): per attempt a target area uniform in [scale_min, scale_max]
/// of the image and an aspect h/w log-uniform in [ratio_min, ratio_max], accepted when the
/// rectangle fits; nothing erased after `attempts` misses. Integrated numerically (deterministic).
double random_erasing_mean_area(double aspect, double scale_min = 0.02, double scale_max = 1.0 / 3,
                                double ratio_min = 0.3, double ratio_max = 3.3, int attempts = 10);

}  // namespace ascendsim::workloads
