// Reading and writing safetensors files, and opening a model's checkpoint
// (one file, a sharded set with an index, or a directory of files). Tensors are
// read in place from memory-mapped files; every offset and size in a header is
// checked against the file before any pointer is handed out.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/dtype.h"
#include "base/mapped_file.h"

namespace duet {

struct TensorEntry {
    std::string name;
    DType dtype = DType::F32;
    std::vector<int64_t> shape;
    const uint8_t* data = nullptr;  // inside the mapped file; not necessarily aligned
    size_t nbytes = 0;
    std::string file;  // the safetensors file that holds it
    // The bytes are in a device's memory (a TensorSet's device storage): the host cannot read them.
    bool on_device = false;

    int64_t numel() const;
};

class SafetensorsFile {
public:
    static SafetensorsFile open(const std::string& path);

    // Sorted by name.
    const std::vector<TensorEntry>& tensors() const { return tensors_; }
    const TensorEntry* find(std::string_view name) const;
    const std::map<std::string, std::string>& metadata() const { return metadata_; }
    const std::string& path() const { return path_; }

private:
    std::string path_;
    MappedFile mapped_;
    std::vector<TensorEntry> tensors_;
    std::map<std::string, std::string> metadata_;
};

// A model's weights, possibly split over several files. Entries stay at the
// same address for the checkpoint's lifetime, including after a move.
class Checkpoint {
public:
    // `path` is a .safetensors file or a directory holding
    // model.safetensors.index.json, model.safetensors, or any *.safetensors files.
    static Checkpoint open(const std::string& path);

    const TensorEntry* find(std::string_view name) const;
    // Throws "PATH: missing tensor 'name'" when absent.
    const TensorEntry& get(std::string_view name) const;
    // Sorted by name.
    std::vector<const TensorEntry*> all() const;
    size_t total_bytes() const;
    const std::string& path() const { return path_; }
    size_t size() const { return by_name_.size(); }

private:
    void add_file(std::unique_ptr<SafetensorsFile> file);

    std::string path_;
    std::vector<std::unique_ptr<SafetensorsFile>> files_;
    std::map<std::string, const TensorEntry*, std::less<>> by_name_;
};

// Converts a floating-point tensor (F32, F16, BF16, F8_E4M3) to f32.
std::vector<float> read_f32(const TensorEntry& tensor);

// Converts an I32 or I64 tensor (ids, codes) to int32; a value that does not fit is an error.
std::vector<int32_t> read_i32(const TensorEntry& tensor);

struct TensorToWrite {
    std::string name;
    DType dtype = DType::F32;
    std::vector<int64_t> shape;
    const void* data = nullptr;
    size_t nbytes = 0;
};

// Writes the tensors in the given order; nbytes must equal numel * dtype size.
void write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace duet
