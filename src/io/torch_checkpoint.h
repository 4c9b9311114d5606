// PyTorch checkpoints as torch.save writes them (a zip holding data.pkl and one entry per storage),
// read without Python: the zip is parsed here, data.pkl by a restricted unpickler that accepts only a
// tensor state dict, and every tensor's size, stride and offset is checked against its storage.
// Contiguous tensors are used in place in the mapped file; others are copied out contiguous.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "io/safetensors.h"
#include "io/zip_archive.h"

namespace duet {

class TorchCheckpoint {
public:
    static TorchCheckpoint open(const std::string& path);

    const TensorEntry* find(std::string_view name) const;
    // In the pickle's order.
    const std::vector<TensorEntry>& tensors() const { return tensors_; }
    const std::string& path() const { return zip_.path(); }

private:
    ZipArchive zip_;
    std::vector<TensorEntry> tensors_;
    std::map<std::string, size_t, std::less<>> by_name_;
    std::vector<std::unique_ptr<uint8_t[]>> copies_;  // non-contiguous tensors made contiguous
};

}  // namespace duet
