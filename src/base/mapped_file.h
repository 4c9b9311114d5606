// A whole file mapped read-only into memory, so that weights are read in place
// instead of copied. The mapping lives as long as the object.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace duet {

class MappedFile {
public:
    // Maps the file read-only; errors name the path and the system's reason.
    // A zero-length file is valid: size() is 0 and data() is nullptr.
    static MappedFile open(const std::string& path);

    MappedFile() = default;
    MappedFile(MappedFile&& other) noexcept;
    MappedFile& operator=(MappedFile&& other) noexcept;
    MappedFile(const MappedFile&) = delete;
    MappedFile& operator=(const MappedFile&) = delete;
    ~MappedFile();

    const uint8_t* data() const { return data_; }
    size_t size() const { return size_; }
    const std::string& path() const { return path_; }

private:
    void release() noexcept;

    const uint8_t* data_ = nullptr;
    size_t size_ = 0;
    std::string path_;
};

}  // namespace duet
