#include "models/tensor_set.h"

#include "base/error.h"

namespace duet {

uint8_t* TensorSet::add(const std::string& name, DType dtype, std::vector<int64_t> shape) {
    require(by_name_.find(name) == by_name_.end(), "tensor set: '", name, "' added twice");
    Owned& t = tensors_.emplace_back();
    t.entry.name = name;
    t.entry.dtype = dtype;
    t.entry.shape = std::move(shape);
    t.entry.file = "(memory)";
    t.bytes.assign(static_cast<size_t>(t.entry.numel()) * dtype_size(dtype), 0);
    t.entry.data = t.bytes.data();
    t.entry.nbytes = t.bytes.size();
    by_name_[name] = &t.entry;
    return t.bytes.data();
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
    for (const Owned& t : tensors_) total += t.bytes.size();
    return total;
}

void TensorSet::write(const std::string& path) const {
    std::vector<TensorToWrite> out;
    for (const Owned& t : tensors_) {
        out.push_back({t.entry.name, t.entry.dtype, t.entry.shape, t.bytes.data(), t.bytes.size()});
    }
    write_safetensors(path, out);
}

}  // namespace duet
