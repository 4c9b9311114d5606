#include "models/tensor_set.h"

#include "base/error.h"
#include "base/host_memory.h"

namespace duet {

TensorSet::Owned& TensorSet::add_entry(const std::string& name, DType dtype, std::vector<int64_t> shape) {
    require(by_name_.find(name) == by_name_.end(), "tensor set: '", name, "' added twice");
    Owned& t = tensors_.emplace_back();
    t.entry.name = name;
    t.entry.dtype = dtype;
    t.entry.shape = std::move(shape);
    t.entry.file = "(memory)";
    t.entry.nbytes = static_cast<size_t>(t.entry.numel()) * dtype_size(dtype);
    by_name_[name] = &t.entry;
    return t;
}

uint8_t* TensorSet::add(const std::string& name, DType dtype, std::vector<int64_t> shape) {
    Owned& t = add_entry(name, dtype, std::move(shape));
    t.bytes = allocate_zeroed_host(t.entry.nbytes);
    t.entry.data = t.bytes.get();
    return t.bytes.get();
}

uint8_t* TensorSet::add_on_device(const std::string& name, DType dtype, std::vector<int64_t> shape) {
    require(device_ != nullptr, "tensor set: '", name, "' asked for device memory, but the set has no device storage");
    Owned& t = add_entry(name, dtype, std::move(shape));
    t.device_bytes = device_->allocate(t.entry.nbytes);
    t.entry.file = str_cat("(", device_->name(), " memory)");
    t.entry.data = static_cast<const uint8_t*>(t.device_bytes.get());
    t.entry.on_device = true;
    return static_cast<uint8_t*>(t.device_bytes.get());
}

const TensorEntry* TensorSet::find(std::string_view name) const {
    auto it = by_name_.find(name);
    return it == by_name_.end() ? nullptr : it->second;
}

std::vector<const TensorEntry*> TensorSet::all() const {
    std::vector<const TensorEntry*> out;
    for (const Owned& t : tensors_) out.push_back(&t.entry);
    return out;
}

size_t TensorSet::total_bytes() const {
    size_t total = 0;
    for (const Owned& t : tensors_) total += t.entry.nbytes;
    return total;
}

size_t TensorSet::device_bytes() const {
    size_t total = 0;
    for (const Owned& t : tensors_) total += t.entry.on_device ? t.entry.nbytes : 0;
    return total;
}

void TensorSet::write(const std::string& path) const {
    std::vector<TensorToWrite> out;
    for (const Owned& t : tensors_) {
        if (t.entry.on_device) {
            fail(path, ": cannot write tensor '", t.entry.name, "': it is in ", device_->name(),
                 " device memory (random weights made on a device are not written out)");
        }
        out.push_back({t.entry.name, t.entry.dtype, t.entry.shape, t.bytes.get(), t.entry.nbytes});
    }
    write_safetensors(path, out);
}

}  // namespace duet
