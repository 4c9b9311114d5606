#include "io/torch_checkpoint.h"

#include <cstring>
#include <limits>

#include "base/error.h"
#include "io/torch_pickle.h"

namespace duet {

namespace {

bool mul_overflows(int64_t a, int64_t b, int64_t& out) { return __builtin_mul_overflow(a, b, &out); }
bool add_overflows(int64_t a, int64_t b, int64_t& out) { return __builtin_add_overflow(a, b, &out); }

std::string format_shape(const std::vector<int64_t>& shape) {
    std::string out = "[";
    for (size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
    return out + "]";
}

bool is_contiguous(const PickledTensor& t) {
    int64_t expected = 1;
    for (size_t d = t.shape.size(); d-- > 0;) {
        if (t.shape[d] != 1 && t.stride[d] != expected) return false;
        expected *= t.shape[d];
    }
    return true;
}

// Copies a strided view into contiguous bytes, one element at a time (rare: state dicts are
// nearly always contiguous).
void gather(const PickledTensor& t, const uint8_t* storage, size_t element_size, uint8_t* out, int64_t numel) {
    const size_t rank = t.shape.size();
    std::vector<int64_t> index(rank, 0);
    for (int64_t i = 0; i < numel; ++i) {
        int64_t at = t.offset;
        for (size_t d = 0; d < rank; ++d) at += index[d] * t.stride[d];
        std::memcpy(out + static_cast<size_t>(i) * element_size, storage + static_cast<size_t>(at) * element_size,
                    element_size);
        for (size_t d = rank; d-- > 0;) {
            if (++index[d] < t.shape[d]) break;
            index[d] = 0;
        }
    }
}

}  // namespace

TorchCheckpoint TorchCheckpoint::open(const std::string& path) {
    TorchCheckpoint ckpt;
    ckpt.zip_ = ZipArchive::open(path);

    // Everything lives under one top-level folder (archive/, or the file's stem).
    const ZipEntry* pickle = nullptr;
    std::string prefix;
    for (const ZipEntry& e : ckpt.zip_.entries()) {
        const size_t slash = e.name.find('/');
        if (slash != std::string::npos && e.name.compare(slash, std::string::npos, "/data.pkl") == 0) {
            require(pickle == nullptr, path, ": more than one data.pkl in the archive");
            pickle = &e;
            prefix = e.name.substr(0, slash + 1);
        }
    }
    require(pickle != nullptr, path, ": no data.pkl; not a PyTorch checkpoint saved by torch.save");
    if (const ZipEntry* order = ckpt.zip_.find(prefix + "byteorder")) {
        require(std::string_view(reinterpret_cast<const char*>(order->data), order->size) == "little", path,
                ": big-endian checkpoints are not supported");
    }

    std::vector<PickledTensor> pickled = unpickle_state_dict(pickle->data, pickle->size, path);
    ckpt.tensors_.reserve(pickled.size());
    for (PickledTensor& t : pickled) {
        const std::string what = str_cat(path, ": tensor '", t.name, "'");
        require(!ckpt.by_name_.count(t.name), what, " appears twice");
        const std::string storage_name = prefix + "data/" + t.storage_key;
        const ZipEntry* storage = ckpt.zip_.find(storage_name);
        require(storage != nullptr, what, ": its storage '", storage_name, "' is not in the archive");
        const size_t element_size = dtype_size(t.dtype);
        int64_t storage_bytes = 0;
        require(!mul_overflows(t.storage_numel, static_cast<int64_t>(element_size), storage_bytes) &&
                    static_cast<uint64_t>(storage_bytes) == storage->size,
                what, ": storage '", storage_name, "' holds ", storage->size, " bytes, but the pickle claims ",
                t.storage_numel, " elements of ", dtype_name(t.dtype));

        // The furthest element the view reaches must lie inside the storage.
        int64_t numel = 1, last = t.offset;
        require(t.offset >= 0, what, ": negative storage offset ", t.offset);
        for (size_t d = 0; d < t.shape.size(); ++d) {
            require(t.shape[d] >= 0 && t.stride[d] >= 0, what, ": negative size or stride");
            require(!mul_overflows(numel, t.shape[d], numel), what, ": element count overflows");
        }
        for (size_t d = 0; d < t.shape.size() && numel > 0; ++d) {
            int64_t reach = 0;
            require(!mul_overflows(t.shape[d] - 1, t.stride[d], reach) && !add_overflows(last, reach, last), what,
                    ": stride overflows");
        }
        require(numel == 0 || last < t.storage_numel, what, ": view (offset ", t.offset, ", shape ",
                format_shape(t.shape), ") reaches element ", last, " of a storage of ", t.storage_numel);

        TensorEntry entry;
        entry.name = t.name;
        entry.dtype = t.dtype;
        entry.shape = t.shape;
        entry.nbytes = static_cast<size_t>(numel) * element_size;
        entry.file = path;
        if (numel == 0) {
            entry.data = nullptr;
        } else if (is_contiguous(t)) {
            entry.data = storage->data + static_cast<size_t>(t.offset) * element_size;
        } else {
            auto copy = std::make_unique<uint8_t[]>(entry.nbytes);
            gather(t, storage->data, element_size, copy.get(), numel);
            entry.data = copy.get();
            ckpt.copies_.push_back(std::move(copy));
        }
        ckpt.by_name_[t.name] = ckpt.tensors_.size();
        ckpt.tensors_.push_back(std::move(entry));
    }
    return ckpt;
}

const TensorEntry* TorchCheckpoint::find(std::string_view name) const {
    auto it = by_name_.find(name);
    return it == by_name_.end() ? nullptr : &tensors_[it->second];
}

}  // namespace duet
