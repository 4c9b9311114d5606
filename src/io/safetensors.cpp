#include "io/safetensors.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <limits>
#include <optional>
#include <set>

#include "base/error.h"
#include "base/half.h"
#include "base/json.h"

namespace duet {

namespace fs = std::filesystem;

namespace {

constexpr uint64_t kMaxHeaderBytes = 100'000'000;
constexpr const char* kIndexFileName = "model.safetensors.index.json";
constexpr const char* kSingleFileName = "model.safetensors";

std::string format_shape(const std::vector<int64_t>& shape) {
    std::string out = "[";
    for (size_t i = 0; i < shape.size(); ++i) {
        if (i > 0) out += ", ";
        out += std::to_string(shape[i]);
    }
    return out + "]";
}

// Element count of a shape, rejecting negative dimensions and overflow.
int64_t checked_numel(const std::vector<int64_t>& shape, std::string_view what) {
    for (int64_t d : shape) require(d >= 0, what, ": shape ", format_shape(shape), " has a negative dimension");
    if (std::find(shape.begin(), shape.end(), 0) != shape.end()) return 0;
    int64_t n = 1;
    for (int64_t d : shape) {
        require(n <= std::numeric_limits<int64_t>::max() / d, what, ": shape ", format_shape(shape),
                " has too many elements");
        n *= d;
    }
    return n;
}

// Byte size of numel elements, rejecting sizes that do not fit in memory.
size_t checked_nbytes(int64_t numel, DType dtype, const std::vector<int64_t>& shape, std::string_view what) {
    size_t element = dtype_size(dtype);
    require(static_cast<uint64_t>(numel) <= std::numeric_limits<size_t>::max() / element, what, ": shape ",
            format_shape(shape), " is too large for dtype ", dtype_name(dtype));
    return static_cast<size_t>(numel) * element;
}

std::string known_dtype_names() {
    std::string out;
    for (DType t : {DType::F32, DType::F16, DType::BF16, DType::F8_E4M3, DType::I8, DType::U8, DType::I32,
                    DType::I64}) {
        if (!out.empty()) out += ", ";
        out += dtype_name(t);
    }
    return out;
}

uint64_t read_u64_le(const uint8_t* p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
    return v;
}

struct ByteRange {
    uint64_t begin;
    uint64_t end;
    const std::string* name;
};

TensorEntry parse_entry(const std::string& path, const std::string& name, const json::Value& info,
                        const uint8_t* data_section, uint64_t data_size) {
    std::string what = str_cat(path, ": tensor '", name, "'");
    require(info.is_object(), what, ": expected an object with dtype, shape and data_offsets, got ",
            info.describe());

    const json::Value* dtype_value = info.find("dtype");
    require(dtype_value != nullptr, what, ": missing 'dtype'");
    const std::string& dtype_text = dtype_value->as_string(what + ": dtype");
    std::optional<DType> dtype = parse_dtype(dtype_text);
    require(dtype.has_value(), what, ": unknown dtype '", dtype_text, "' (expected one of ", known_dtype_names(),
            ")");

    const json::Value* shape_value = info.find("shape");
    require(shape_value != nullptr, what, ": missing 'shape'");
    require(shape_value->is_array(), what, ": shape: expected an array of integers, got ", shape_value->describe());
    std::vector<int64_t> shape;
    for (const json::Value& dim : shape_value->items()) shape.push_back(dim.as_int(what + ": shape"));
    int64_t numel = checked_numel(shape, what);
    size_t nbytes = checked_nbytes(numel, *dtype, shape, what);

    const json::Value* offsets_value = info.find("data_offsets");
    require(offsets_value != nullptr, what, ": missing 'data_offsets'");
    require(offsets_value->is_array() && offsets_value->items().size() == 2, what,
            ": data_offsets: expected [begin, end], got ", offsets_value->describe());
    int64_t begin = offsets_value->items()[0].as_int(what + ": data_offsets");
    int64_t end = offsets_value->items()[1].as_int(what + ": data_offsets");
    std::string offsets_text = str_cat("data_offsets [", begin, ", ", end, "]");
    require(begin >= 0 && end >= 0, what, ": ", offsets_text, " must not be negative");
    require(begin <= end, what, ": ", offsets_text, " end before they begin");
    require(static_cast<uint64_t>(end) <= data_size, what, ": ", offsets_text, " run past the end of the data (",
            data_size, " bytes)");
    require(static_cast<uint64_t>(end - begin) == nbytes, what, ": ", offsets_text, " hold ", end - begin,
            " bytes, but dtype ", dtype_name(*dtype), " shape ", format_shape(shape), " needs ", nbytes);

    TensorEntry entry;
    entry.name = name;
    entry.dtype = *dtype;
    entry.shape = std::move(shape);
    entry.data = data_section + begin;
    entry.nbytes = nbytes;
    entry.file = path;
    return entry;
}

void check_no_overlap(const std::string& path, std::vector<ByteRange> ranges) {
    std::sort(ranges.begin(), ranges.end(),
              [](const ByteRange& a, const ByteRange& b) { return a.begin < b.begin; });
    for (size_t i = 1; i < ranges.size(); ++i) {
        const ByteRange& prev = ranges[i - 1];
        const ByteRange& cur = ranges[i];
        require(prev.end <= cur.begin, path, ": tensors '", *prev.name, "' [", prev.begin, ", ", prev.end,
                "] and '", *cur.name, "' [", cur.begin, ", ", cur.end, "] overlap");
    }
}

std::string join_path(const std::string& dir, const std::string& name) { return (fs::path(dir) / name).string(); }

bool is_regular_file(const std::string& path) {
    std::error_code ec;
    return fs::is_regular_file(path, ec);
}

// Index shard names must stay inside the checkpoint directory.
bool is_plain_relative_path(const std::string& name) {
    if (name.empty()) return false;
    fs::path p(name);
    if (p.is_absolute()) return false;
    for (const fs::path& part : p) {
        if (part == "..") return false;
    }
    return true;
}

void write_all(int fd, const std::string& path, const void* data, size_t size) {
    const char* p = static_cast<const char*>(data);
    while (size > 0) {
        ssize_t n = ::write(fd, p, size);
        if (n < 0) {
            if (errno == EINTR) continue;
            fail(path, ": cannot write: ", std::strerror(errno));
        }
        p += n;
        size -= static_cast<size_t>(n);
    }
}

}  // namespace

int64_t TensorEntry::numel() const { return checked_numel(shape, str_cat("tensor '", name, "'")); }

SafetensorsFile SafetensorsFile::open(const std::string& path) {
    SafetensorsFile file;
    file.path_ = path;
    file.mapped_ = MappedFile::open(path);
    const uint8_t* bytes = file.mapped_.data();
    const uint64_t size = file.mapped_.size();

    require(size >= 8, path, ": file is ", size, " bytes, too short for a safetensors header (expected at least 8)");
    uint64_t header_size = read_u64_le(bytes);
    require(header_size <= kMaxHeaderBytes, path, ": header length ", header_size,
            " is over the 100 MB limit (is this a safetensors file?)");
    require(header_size <= size - 8, path, ": header length ", header_size, " runs past the end of the file (",
            size - 8, " bytes after the length field)");

    std::string_view header_text(reinterpret_cast<const char*>(bytes + 8), header_size);
    json::Value header = json::parse(header_text, path + ": header");
    require(header.is_object(), path, ": header: expected a JSON object, got ", header.describe());

    const uint8_t* data_section = bytes + 8 + header_size;
    const uint64_t data_size = size - 8 - header_size;
    std::vector<ByteRange> ranges;
    for (const auto& [name, info] : header.members()) {
        if (name == "__metadata__") {
            require(info.is_object(), path, ": __metadata__: expected an object of strings, got ", info.describe());
            for (const auto& [key, value] : info.members()) {
                file.metadata_[key] = value.as_string(str_cat(path, ": __metadata__: '", key, "'"));
            }
            continue;
        }
        file.tensors_.push_back(parse_entry(path, name, info, data_section, data_size));
    }
    for (const TensorEntry& t : file.tensors_) {
        if (t.nbytes == 0) continue;  // empty tensors occupy no bytes and cannot overlap
        uint64_t begin = static_cast<uint64_t>(t.data - data_section);
        ranges.push_back({begin, begin + t.nbytes, &t.name});
    }
    check_no_overlap(path, std::move(ranges));

    std::sort(file.tensors_.begin(), file.tensors_.end(),
              [](const TensorEntry& a, const TensorEntry& b) { return a.name < b.name; });
    return file;
}

const TensorEntry* SafetensorsFile::find(std::string_view name) const {
    auto it = std::lower_bound(tensors_.begin(), tensors_.end(), name,
                               [](const TensorEntry& t, std::string_view n) { return t.name < n; });
    if (it == tensors_.end() || it->name != name) return nullptr;
    return &*it;
}

Checkpoint Checkpoint::open(const std::string& path) {
    Checkpoint ckpt;
    ckpt.path_ = path;

    std::error_code ec;
    fs::file_status status = fs::status(path, ec);
    require(fs::exists(status), path, ": no such file or directory");
    if (!fs::is_directory(status)) {
        ckpt.add_file(std::make_unique<SafetensorsFile>(SafetensorsFile::open(path)));
        return ckpt;
    }

    std::string index_path = join_path(path, kIndexFileName);
    if (is_regular_file(index_path)) {
        json::Value index = json::parse_file(index_path);
        require(index.is_object(), index_path, ": expected a JSON object, got ", index.describe());
        const json::Value* weight_map = index.find("weight_map");
        require(weight_map != nullptr && weight_map->is_object(), index_path,
                ": expected a 'weight_map' object mapping tensor names to shard files");
        require(!weight_map->members().empty(), index_path, ": 'weight_map' lists no tensors");

        std::map<std::string, SafetensorsFile*> shards;
        for (const auto& [tensor, shard_value] : weight_map->members()) {
            const std::string& shard =
                shard_value.as_string(str_cat(index_path, ": weight_map: '", tensor, "'"));
            require(is_plain_relative_path(shard), index_path, ": tensor '", tensor, "' maps to shard '", shard,
                    "', expected a file name inside ", path);
            auto it = shards.find(shard);
            if (it == shards.end()) {
                std::string shard_path = join_path(path, shard);
                require(is_regular_file(shard_path), index_path, ": shard '", shard, "' (for tensor '", tensor,
                        "') does not exist in ", path);
                auto file = std::make_unique<SafetensorsFile>(SafetensorsFile::open(shard_path));
                it = shards.emplace(shard, file.get()).first;
                ckpt.files_.push_back(std::move(file));
            }
            require(it->second->find(tensor) != nullptr, index_path, ": tensor '", tensor, "' is mapped to shard '",
                    shard, "', which has no such tensor");
        }
        std::vector<std::unique_ptr<SafetensorsFile>> files = std::move(ckpt.files_);
        ckpt.files_.clear();
        for (auto& file : files) ckpt.add_file(std::move(file));
        return ckpt;
    }

    std::string single_path = join_path(path, kSingleFileName);
    if (is_regular_file(single_path)) {
        ckpt.add_file(std::make_unique<SafetensorsFile>(SafetensorsFile::open(single_path)));
        return ckpt;
    }

    std::vector<std::string> found;
    for (fs::directory_iterator it(path, ec), end; !ec && it != end; it.increment(ec)) {
        std::error_code file_ec;
        if (it->path().extension() == ".safetensors" && it->is_regular_file(file_ec)) {
            found.push_back(it->path().string());
        }
    }
    require(!ec, path, ": cannot list the directory: ", ec.message());
    require(!found.empty(), path, ": no ", kSingleFileName, ", ", kIndexFileName, " or *.safetensors file");
    std::sort(found.begin(), found.end());
    for (const std::string& file_path : found) {
        ckpt.add_file(std::make_unique<SafetensorsFile>(SafetensorsFile::open(file_path)));
    }
    return ckpt;
}

void Checkpoint::add_file(std::unique_ptr<SafetensorsFile> file) {
    for (const TensorEntry& t : file->tensors()) {
        auto [it, inserted] = by_name_.emplace(t.name, &t);
        require(inserted, path_, ": tensor '", t.name, "' appears in both ", it->second->file, " and ", t.file);
    }
    files_.push_back(std::move(file));
}

const TensorEntry* Checkpoint::find(std::string_view name) const {
    auto it = by_name_.find(name);
    return it == by_name_.end() ? nullptr : it->second;
}

const TensorEntry& Checkpoint::get(std::string_view name) const {
    const TensorEntry* t = find(name);
    require(t != nullptr, path_, ": missing tensor '", name, "'");
    return *t;
}

std::vector<const TensorEntry*> Checkpoint::all() const {
    std::vector<const TensorEntry*> out;
    out.reserve(by_name_.size());
    for (const auto& [name, entry] : by_name_) out.push_back(entry);
    return out;
}

size_t Checkpoint::total_bytes() const {
    size_t total = 0;
    for (const auto& [name, entry] : by_name_) total += entry->nbytes;
    return total;
}

namespace {

void require_host_bytes(const TensorEntry& tensor) {
    require(!tensor.on_device, "tensor '", tensor.name, "' is in device memory; the host cannot read it");
}

}  // namespace

std::vector<int32_t> read_i32(const TensorEntry& tensor) {
    require_host_bytes(tensor);
    require(tensor.dtype == DType::I32 || tensor.dtype == DType::I64, "tensor '", tensor.name, "' in ", tensor.file,
            " has dtype ", dtype_name(tensor.dtype), ", expected I32 or I64");
    const size_t n = static_cast<size_t>(tensor.numel()), element = dtype_size(tensor.dtype);
    require(tensor.nbytes == n * element, "tensor '", tensor.name, "' has ", tensor.nbytes, " bytes, but dtype ",
            dtype_name(tensor.dtype), " shape ", format_shape(tensor.shape), " needs ", n * element);
    std::vector<int32_t> out(n);
    for (size_t i = 0; i < n; ++i) {
        int64_t v = 0;
        if (tensor.dtype == DType::I32) {
            int32_t narrow;
            std::memcpy(&narrow, tensor.data + 4 * i, 4);  // the data may be unaligned
            v = narrow;
        } else {
            std::memcpy(&v, tensor.data + 8 * i, 8);
        }
        require(v >= INT32_MIN && v <= INT32_MAX, "tensor '", tensor.name, "' in ", tensor.file, ": value ", v,
                " at ", i, " is out of the int32 range");
        out[i] = static_cast<int32_t>(v);
    }
    return out;
}

std::vector<float> read_f32(const TensorEntry& tensor) {
    require_host_bytes(tensor);
    require(dtype_is_float(tensor.dtype), "tensor '", tensor.name, "' has dtype ", dtype_name(tensor.dtype),
            ", expected a floating-point type");
    int64_t numel = tensor.numel();
    size_t expected = checked_nbytes(numel, tensor.dtype, tensor.shape, str_cat("tensor '", tensor.name, "'"));
    require(tensor.nbytes == expected, "tensor '", tensor.name, "' has ", tensor.nbytes, " bytes, but dtype ",
            dtype_name(tensor.dtype), " shape ", format_shape(tensor.shape), " needs ", expected);
    require(tensor.data != nullptr || expected == 0, "tensor '", tensor.name, "' has no data");

    const size_t n = static_cast<size_t>(numel);
    std::vector<float> out(n);
    if (n == 0) return out;
    const uint8_t* src = tensor.data;
    switch (tensor.dtype) {
        case DType::F32:
            std::memcpy(out.data(), src, n * sizeof(float));
            break;
        case DType::F16:
        case DType::BF16: {
            const bool is_bf16 = tensor.dtype == DType::BF16;
            for (size_t i = 0; i < n; ++i) {
                uint16_t bits;
                std::memcpy(&bits, src + 2 * i, sizeof bits);  // the data may be unaligned
                out[i] = is_bf16 ? bf16_to_f32(bits) : f16_to_f32(bits);
            }
            break;
        }
        case DType::F8_E4M3:
            for (size_t i = 0; i < n; ++i) out[i] = fp8_e4m3_to_f32(src[i]);
            break;
        default:
            break;  // excluded by the dtype check above
    }
    return out;
}

void write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                       const std::map<std::string, std::string>& metadata) {
    std::string header = "{";
    if (!metadata.empty()) {
        json::Value meta = json::Value::object();
        for (const auto& [key, value] : metadata) meta.set(key, value);
        header += "\"__metadata__\":" + json::dump(meta);
    }
    std::set<std::string_view> names;
    uint64_t offset = 0;
    for (const TensorToWrite& t : tensors) {
        std::string what = str_cat(path, ": tensor '", t.name, "'");
        require(t.name != "__metadata__", what, ": the name is reserved for metadata");
        require(names.insert(t.name).second, what, ": the name appears twice");
        int64_t numel = checked_numel(t.shape, what);
        size_t expected = checked_nbytes(numel, t.dtype, t.shape, what);
        require(t.nbytes == expected, what, ": nbytes ", t.nbytes, " does not match dtype ", dtype_name(t.dtype),
                " shape ", format_shape(t.shape), " (expected ", expected, ")");
        require(t.data != nullptr || t.nbytes == 0, what, ": data is null");

        json::Value shape = json::Value::array();
        for (int64_t d : t.shape) shape.push(d);
        json::Value offsets = json::Value::array();
        offsets.push(offset).push(offset + t.nbytes);
        json::Value info = json::Value::object();
        info.set("dtype", std::string(dtype_name(t.dtype))).set("shape", std::move(shape));
        info.set("data_offsets", std::move(offsets));
        if (header.size() > 1) header += ',';
        header += json::dump(json::Value(t.name)) + ':' + json::dump(info);
        offset += t.nbytes;
    }
    header += '}';
    // Readers that map the file can then use the data section 8-byte aligned.
    header.append((8 - header.size() % 8) % 8, ' ');

    uint8_t length[8];
    uint64_t header_size = header.size();
    for (int i = 0; i < 8; ++i) length[i] = static_cast<uint8_t>(header_size >> (8 * i));

    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) fail(path, ": cannot open for writing: ", std::strerror(errno));
    try {
        write_all(fd, path, length, sizeof length);
        write_all(fd, path, header.data(), header.size());
        for (const TensorToWrite& t : tensors) write_all(fd, path, t.data, t.nbytes);
    } catch (...) {
        ::close(fd);
        ::unlink(path.c_str());  // never leave a truncated file that looks valid
        throw;
    }
    if (::close(fd) != 0) {
        int err = errno;
        ::unlink(path.c_str());
        fail(path, ": cannot write: ", std::strerror(err));
    }
}

}  // namespace duet
