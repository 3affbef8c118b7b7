// Image preparation cost per item on real files, one thread: decode only; the whole eval prep
// (decode, PIL bilinear resize of the crop window, center crop) as prepare() runs it (a JPEG
// decoded only where the window reads) and with the whole image decoded (the way before); and the
// per-delivery training augmentation (RandomResizedCrop(224) + RandomHorizontalFlip() on the
// decoded image, read in place); and the client's gather of one 224×224 item into a batch, as
// HWC (a copy) or straight into CHW planes (client/layout.h).
//
//   build/prep_bench --benchmark_min_time=1 [DIR]      (DIR: an ImageFolder of .jpg/.jpeg/.png;
//                                                       default build/e2e-data; the first 200 files)
#include <algorithm>
#include <cstring>
#include <cstdlib>
#include <vector>

#include <benchmark/benchmark.h>

#include "client/layout.h"
#include "common/augment_wire.h"
#include "prep/augment.h"
#include "image_files.h"
#include "prep/image_prep.h"

namespace joader {
namespace {

std::string g_dir = "build/e2e-data";

const std::vector<std::vector<uint8_t>>& files() {
  static const std::vector<std::vector<uint8_t>> all = read_image_files(g_dir);
  return all;
}

void BM_DecodeOnly(benchmark::State& state) {
  size_t i = 0;
  for (auto _ : state) benchmark::DoNotOptimize(decode_image(files()[i++ % files().size()], 1ull << 30));
  state.SetItemsProcessed(state.iterations());
}

// The evaluation pipeline: Resize(256) + CenterCrop(224).
const PrepSpec kEval{.raw = false, .resize = 256, .crop = 224};

void BM_Prepare_Resize256_Crop224(benchmark::State& state) {
  const PrepSpec& spec = kEval;
  std::vector<uint8_t> out;
  size_t i = 0;
  for (auto _ : state) prepare(spec, files()[i++ % files().size()], out);
  state.SetItemsProcessed(state.iterations());
}

void BM_Prepare_Resize256_Crop224_WholeDecode(benchmark::State& state) {
  const PrepSpec& spec = kEval;
  std::vector<uint8_t> out;
  size_t i = 0;
  for (auto _ : state) {
    const Image img = decode_image(files()[i++ % files().size()], spec.max_pixels);
    resize_window(img, prep_geometry(spec, img.width, img.height), spec.crop, spec.crop, out);
  }
  state.SetItemsProcessed(state.iterations());
}

// The eval resize + crop alone, on decoded images, with each horizontal pass (image_prep.h).
void BM_Resize256_Crop224(benchmark::State& state, HorizontalPass pass) {
  std::vector<Image> decoded;
  for (size_t i = 0; i < std::min<size_t>(files().size(), 50); ++i) decoded.push_back(decode_image(files()[i], 1ull << 30));
  std::vector<uint8_t> out;
  size_t i = 0;
  for (auto _ : state) {
    const Image& img = decoded[i++ % decoded.size()];
    resize_window(ImageView{img.rgb.data(), img.width, img.height, size_t{img.width} * 3},
                  prep_geometry(kEval, img.width, img.height), kEval.crop, kEval.crop, out, pass);
  }
  state.SetItemsProcessed(state.iterations());
}

// RandomResizedCrop(224) + RandomHorizontalFlip, torchvision's defaults.
std::vector<AugmentOp> crop_and_flip() {
  return ops_from_json({R"({"random_resized_crop": {"size": 224}})", R"({"random_horizontal_flip": {}})"});
}

void BM_Augment_RandomResizedCrop224_Flip(benchmark::State& state) {
  std::vector<Image> decoded;
  for (size_t i = 0; i < std::min<size_t>(files().size(), 50); ++i) decoded.push_back(decode_image(files()[i], 1ull << 30));
  const std::vector<AugmentOp> ops = crop_and_flip();
  uint32_t i = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(augment(decoded[i % decoded.size()], ops, 1, i / 50, i % 50));
    ++i;
  }
  state.SetItemsProcessed(state.iterations());
}

// What a training job's binding does per item: RandomResizedCrop(224) + flip of a decoded image,
// into its slot of a 64-item NCHW uint8 batch (9.6 MB) — the augmented image stored and then
// gathered into planes (before), or its rows written into the planes as the resample makes them.
void BM_AugmentIntoBatch(benchmark::State& state, bool by_rows) {
  std::vector<Image> decoded;
  for (size_t i = 0; i < std::min<size_t>(files().size(), 50); ++i) decoded.push_back(decode_image(files()[i], 1ull << 30));
  const std::vector<AugmentOp> ops = crop_and_flip();
  const size_t pixels = 224 * 224, n = 64;
  std::vector<uint8_t> batch(n * pixels * 3);
  uint32_t i = 0;
  for (auto _ : state) {
    const Image& img = decoded[i % decoded.size()];
    uint8_t* slot = &batch[(i % n) * pixels * 3];
    if (by_rows) {
      ByteRows rows(slot, 224, true);
      augment(ImageView{img.rgb.data(), img.width, img.height, size_t{img.width} * 3}, ops, 1, i / 50, i % 50, rows);
    } else {
      const Image out = augment(img, ops, 1, i / 50, i % 50);
      hwc_to_chw(out.rgb.data(), pixels, slot);
    }
    benchmark::DoNotOptimize(batch.data());
    ++i;
  }
  state.SetItemsProcessed(state.iterations());
}

// 64 items of 224×224×3, as in a batch (9.6 MB: more than the core's caches, as in the binding).
void BM_Gather224(benchmark::State& state, bool chw) {
  const size_t pixels = 224 * 224, n = 64;
  std::vector<uint8_t> arena(n * pixels * 3), batch(n * pixels * 3);
  for (size_t i = 0; i < arena.size(); ++i) arena[i] = static_cast<uint8_t>(i * 7);
  for (auto _ : state) {
    for (size_t i = 0; i < n; ++i) {
      if (chw) {
        hwc_to_chw(&arena[i * pixels * 3], pixels, &batch[i * pixels * 3]);
      } else {
        std::memcpy(&batch[i * pixels * 3], &arena[i * pixels * 3], pixels * 3);
      }
    }
    benchmark::DoNotOptimize(batch.data());
  }
  state.SetItemsProcessed(state.iterations() * n);
}
BENCHMARK_CAPTURE(BM_Gather224, hwc_copy, false)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Gather224, chw_one_pass, true)->Unit(benchmark::kMicrosecond);

BENCHMARK_CAPTURE(BM_Resize256_Crop224, by_rows, HorizontalPass::kByRows)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Resize256_Crop224, by_columns, HorizontalPass::kByColumns)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_DecodeOnly)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Augment_RandomResizedCrop224_Flip)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_AugmentIntoBatch, image_then_planes, false)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_AugmentIntoBatch, rows_into_planes, true)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Prepare_Resize256_Crop224)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Prepare_Resize256_Crop224_WholeDecode)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace joader

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (argc > 1) joader::g_dir = argv[1];
  benchmark::RunSpecifiedBenchmarks();
  return 0;
}
