// A read-only view of an uncompressed ("stored") zip archive, as torch.save writes its checkpoints.
// The central directory is parsed here and every entry's bounds are checked against the file;
// zip64 records are read (torch.save always writes them); compressed entries, encryption and
// multi-disk archives are refused by name.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/mapped_file.h"

namespace duet {

struct ZipEntry {
    std::string name;
    const uint8_t* data = nullptr;  // inside the mapped file
    size_t size = 0;
};

class ZipArchive {
public:
    // Errors name the path and what is wrong (not a zip, truncated, compressed entry ...).
    static ZipArchive open(const std::string& path);

    const std::vector<ZipEntry>& entries() const { return entries_; }
    const ZipEntry* find(std::string_view name) const;
    const std::string& path() const { return mapped_.path(); }

private:
    MappedFile mapped_;
    std::vector<ZipEntry> entries_;
};

}  // namespace duet
