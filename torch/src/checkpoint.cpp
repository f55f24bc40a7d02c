#include "fastrun/torch/checkpoint.h"

#include <unistd.h>

#include <cerrno>
#include <exception>
#include <limits>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/serialize/archive.h>

#include "fastrun/runtime/error.h"
#include "fastrun/runtime/os/atomic_file.h"
#include "fastrun/runtime/process_group/group.h"

namespace fastrun::torch {
namespace {

using ::torch::serialize::InputArchive;
using ::torch::serialize::OutputArchive;

std::int64_t as_int(std::uint64_t v, const char* what, const std::string& path) {
  if (v > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
    throw ConfigError(fmt::format("save_checkpoint {}: {} {} does not fit the archive's int64", path, what, v));
  return static_cast<std::int64_t>(v);
}

std::string shape_of(const at::Tensor& t) { return fmt::format("[{}]", fmt::join(t.sizes(), ", ")); }

// Every parameter and buffer of `m` (and of its serialisable children, the way Module::save
// nests them) is in `ar` with the same shape and dtype. Module::load would otherwise adopt a
// different shape silently (it calls Tensor::set_).
void check_module(const ::torch::nn::Module& m, InputArchive& ar, const std::string& prefix, const std::string& path) {
  auto check = [&](const std::string& key, const at::Tensor& mine, bool is_buffer) {
    at::Tensor saved;
    const char* what = is_buffer ? "buffer" : "parameter";
    if (!ar.try_read(key, saved, is_buffer))
      throw Error(fmt::format("checkpoint {}: the model's {} '{}{}' is not in the file (a checkpoint of another model?)",
                              path, what, prefix, key));
    if (!saved.sizes().equals(mine.sizes()) || saved.scalar_type() != mine.scalar_type())
      throw Error(fmt::format("checkpoint {}: {} '{}{}' is {} {} in the file but {} {} in this model", path, what,
                              prefix, key, shape_of(saved), c10::toString(saved.scalar_type()), shape_of(mine),
                              c10::toString(mine.scalar_type())));
  };
  for (const auto& p : m.named_parameters(/*recurse=*/false)) check(p.key(), p.value(), false);
  for (const auto& b : m.named_buffers(/*recurse=*/false)) check(b.key(), b.value(), true);
  for (const auto& child : m.named_children()) {
    if (!child.value()->is_serializable()) continue;
    InputArchive sub;
    if (!ar.try_read(child.key(), sub))
      throw Error(fmt::format("checkpoint {}: the model's submodule '{}{}' is not in the file", path, prefix, child.key()));
    check_module(*child.value(), sub, prefix + child.key() + ".", path);
  }
}

std::uint64_t read_count(InputArchive& ar, const char* key, const std::string& path) {
  c10::IValue v;
  if (!ar.try_read(key, v) || !v.isInt() || v.toInt() < 0)
    throw Error(fmt::format("checkpoint {}: no non-negative integer '{}'", path, key));
  return static_cast<std::uint64_t>(v.toInt());
}

}  // namespace

void save_checkpoint(const std::string& path, const ::torch::nn::Module& model,
                     const ::torch::optim::Optimizer* optimizer, const TrainingProgress& progress) {
  // 1. The archive in memory (tensors are referenced, not copied, until it is written).
  OutputArchive ar;
  ar.write("fastrun_checkpoint", c10::IValue(std::string(kCheckpointFormat)));
  ar.write("epoch", c10::IValue(as_int(progress.epoch, "epoch", path)));
  ar.write("step", c10::IValue(as_int(progress.step, "step", path)));
  ar.write("sampler_state", c10::IValue(progress.sampler_state));
  OutputArchive model_ar(ar.compilation_unit());
  model.save(model_ar);
  ar.write("model", model_ar);
  if (optimizer) {
    OutputArchive opt_ar(ar.compilation_unit());
    optimizer->save(opt_ar);
    ar.write("optimizer", opt_ar);
  }
  // 2. Streamed into an unnamed temporary. The writer never reports a failure to torch: its zip
  //    writer would throw, and throw again from its destructor while finishing the archive
  //    (std::terminate). The first error is kept, the rest of the bytes dropped, and it is
  //    rethrown here; the temporary is then discarded and `path` keeps the previous checkpoint.
  os::AtomicFile file(path);
  std::exception_ptr failed;
  ar.save_to([&](const void* data, std::size_t n) -> std::size_t {
    if (!failed) {
      try {
        file.write(data, n);
      } catch (...) {
        failed = std::current_exception();
      }
    }
    return n;
  });
  if (failed) std::rethrow_exception(failed);
  // 3. In place, all at once.
  file.commit();
}

void save_checkpoint(Group& group, const std::string& path, const ::torch::nn::Module& model,
                     const ::torch::optim::Optimizer* optimizer, const TrainingProgress& progress) {
  if (group.rank() == 0) save_checkpoint(path, model, optimizer, progress);
}

TrainingProgress load_checkpoint(const std::string& path, ::torch::nn::Module& model, ::torch::optim::Optimizer* optimizer) {
  if (::access(path.c_str(), R_OK) != 0) throw_errno("checkpoint " + path, errno);
  try {
    InputArchive ar;
    ar.load_from(path);
    c10::IValue format;
    if (!ar.try_read("fastrun_checkpoint", format) || !format.isString())
      throw Error(fmt::format("checkpoint {}: not a fastrun checkpoint (no 'fastrun_checkpoint' key; written by "
                              "fastrun::torch::save_checkpoint?)",
                              path));
    if (format.toStringRef() != kCheckpointFormat)
      throw Error(fmt::format("checkpoint {}: format '{}', this build reads '{}'", path, format.toStringRef(),
                              kCheckpointFormat));
    TrainingProgress progress;
    progress.epoch = read_count(ar, "epoch", path);
    progress.step = read_count(ar, "step", path);
    c10::IValue sampler;
    if (!ar.try_read("sampler_state", sampler) || !sampler.isString())
      throw Error(fmt::format("checkpoint {}: no string 'sampler_state'", path));
    progress.sampler_state = sampler.toStringRef();

    // Everything is checked before the module or optimizer changes.
    InputArchive model_ar;
    if (!ar.try_read("model", model_ar)) throw Error(fmt::format("checkpoint {}: no 'model' archive", path));
    check_module(model, model_ar, "", path);
    InputArchive opt_ar;
    if (optimizer && !ar.try_read("optimizer", opt_ar))
      throw Error(fmt::format("checkpoint {}: no optimizer state in the file (it was saved without an optimizer); "
                              "pass nullptr to load the model only",
                              path));
    model.load(model_ar);
    if (optimizer) optimizer->load(opt_ar);
    return progress;
  } catch (const c10::Error& e) {  // LibTorch's own failures (a corrupt zip, an optimizer mismatch)
    throw Error(fmt::format("checkpoint {}: {}", path, e.what_without_backtrace()));
  }
}

}  // namespace fastrun::torch
