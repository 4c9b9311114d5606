#include "io/zip_archive.h"

#include "base/error.h"

namespace duet {

namespace {

constexpr uint32_t kEndOfCentralDirectory = 0x06054b50;
constexpr uint32_t kCentralDirectoryEntry = 0x02014b50;
constexpr uint32_t kLocalFileHeader = 0x04034b50;
constexpr uint32_t kZip64EndLocator = 0x07064b50;
constexpr uint32_t kZip64EndRecord = 0x06064b50;
constexpr uint16_t kZip64ExtraField = 0x0001;
constexpr size_t kEndRecordSize = 22;
constexpr size_t kZip64LocatorSize = 20;
constexpr size_t kZip64EndRecordSize = 56;
constexpr size_t kCentralEntrySize = 46;
constexpr size_t kLocalHeaderSize = 30;

uint16_t u16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
uint32_t u32(const uint8_t* p) {
    return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) | (static_cast<uint32_t>(p[2]) << 16) |
           (static_cast<uint32_t>(p[3]) << 24);
}
uint64_t u64(const uint8_t* p) { return static_cast<uint64_t>(u32(p)) | (static_cast<uint64_t>(u32(p + 4)) << 32); }

// Where the central directory is and how many entries it holds, from the end record or, when the
// archive has one (torch.save always writes it), the zip64 end record.
struct Directory {
    uint64_t count = 0, size = 0, offset = 0;
    uint64_t end = 0;  // where the directory must stop: the first end record
};

Directory find_directory(const uint8_t* base, size_t size, const std::string& path) {
    require(size >= kEndRecordSize, path, ": not a zip archive (", size, " bytes, too short; truncated?)");
    // The end record sits in the last 22 bytes plus at most a 65535-byte comment.
    size_t end = size - kEndRecordSize;
    const size_t lowest = size > kEndRecordSize + 65535 ? size - kEndRecordSize - 65535 : 0;
    while (!(u32(base + end) == kEndOfCentralDirectory && end + kEndRecordSize + u16(base + end + 20) == size)) {
        require(end > lowest, path, ": not a zip archive (no end of central directory record; truncated?)");
        --end;
    }
    const uint8_t* rec = base + end;
    require(u16(rec + 4) == 0 && u16(rec + 6) == 0, path, ": multi-disk zip archives are not supported");
    require(u16(rec + 8) == u16(rec + 10), path, ": inconsistent entry counts in the zip end record");
    Directory dir{u16(rec + 10), u32(rec + 12), u32(rec + 16), end};

    if (end >= kZip64LocatorSize && u32(base + end - kZip64LocatorSize) == kZip64EndLocator) {
        const uint8_t* locator = base + end - kZip64LocatorSize;
        const uint64_t record = u64(locator + 8);
        require(u32(locator + 4) == 0 && u32(locator + 16) <= 1, path, ": multi-disk zip archives are not supported");
        require(record <= end - kZip64LocatorSize && kZip64EndRecordSize <= end - kZip64LocatorSize - record &&
                    u32(base + record) == kZip64EndRecord,
                path, ": zip64 end record missing at offset ", record, " (truncated?)");
        const uint8_t* rec64 = base + record;
        require(u32(rec64 + 16) == 0 && u32(rec64 + 20) == 0 && u64(rec64 + 24) == u64(rec64 + 32), path,
                ": multi-disk zip archives are not supported");
        dir = {u64(rec64 + 32), u64(rec64 + 40), u64(rec64 + 48), record};
    }
    require(dir.offset <= dir.end && dir.size <= dir.end - dir.offset, path, ": zip central directory (offset ",
            dir.offset, ", ", dir.size, " bytes) lies outside the file (truncated?)");
    // Each entry takes at least 46 bytes of directory, which bounds the count before anything is reserved.
    require(dir.count <= dir.size / kCentralEntrySize, path, ": zip directory claims ", dir.count, " entries in ",
            dir.size, " bytes");
    return dir;
}

// Replaces 32-bit fields saturated at 0xFFFFFFFF with their values from the zip64 extra field,
// which holds, in this order, only the ones that are saturated.
void read_zip64_extra(const uint8_t* extra, size_t len, uint64_t& uncompressed, uint64_t& compressed,
                      uint64_t& local_offset, const std::string& path, const std::string& name) {
    size_t pos = 0;
    while (pos + 4 <= len) {
        const uint16_t id = u16(extra + pos), field_len = u16(extra + pos + 2);
        require(pos + 4 + field_len <= len, path, ": zip entry '", name, "' has a malformed extra field");
        if (id == kZip64ExtraField) {
            size_t at = pos + 4;
            for (uint64_t* v : {&uncompressed, &compressed, &local_offset}) {
                if (*v != 0xFFFFFFFFu) continue;
                require(at + 8 <= pos + 4 + field_len, path, ": zip entry '", name, "' has a short zip64 field");
                *v = u64(extra + at);
                at += 8;
            }
            return;
        }
        pos += 4 + field_len;
    }
}

}  // namespace

ZipArchive ZipArchive::open(const std::string& path) {
    ZipArchive zip;
    zip.mapped_ = MappedFile::open(path);
    const uint8_t* base = zip.mapped_.data();
    const Directory dir = find_directory(base, zip.mapped_.size(), path);
    // Entry data lies before the directory.
    const uint64_t data_end = dir.offset;
    const uint64_t dir_end = dir.offset + dir.size;
    uint64_t pos = dir.offset;
    zip.entries_.reserve(static_cast<size_t>(dir.count));
    for (uint64_t i = 0; i < dir.count; ++i) {
        require(pos + kCentralEntrySize <= dir_end && u32(base + pos) == kCentralDirectoryEntry, path,
                ": zip central directory entry ", i, " is malformed");
        const uint8_t* e = base + pos;
        const uint16_t flags = u16(e + 8), method = u16(e + 10);
        uint64_t compressed = u32(e + 20), uncompressed = u32(e + 24), local_offset = u32(e + 42);
        const uint16_t name_len = u16(e + 28), extra_len = u16(e + 30), comment_len = u16(e + 32);
        require(pos + kCentralEntrySize + name_len + extra_len + comment_len <= dir_end, path,
                ": zip central directory entry ", i, " runs past the directory");
        ZipEntry entry;
        entry.name.assign(reinterpret_cast<const char*>(e + kCentralEntrySize), name_len);
        read_zip64_extra(e + kCentralEntrySize + name_len, extra_len, uncompressed, compressed, local_offset, path,
                         entry.name);
        pos += kCentralEntrySize + name_len + extra_len + comment_len;

        require((flags & 1) == 0, path, ": zip entry '", entry.name, "' is encrypted");
        require(method == 0, path, ": zip entry '", entry.name, "' is compressed (method ", method,
                "); only stored entries, as torch.save writes them, are supported");
        require(compressed == uncompressed, path, ": zip entry '", entry.name, "' is stored with ", compressed,
                " bytes but claims ", uncompressed);
        // The local header repeats the name and may carry its own (padding) extra field; its sizes may be
        // zero when a data descriptor follows, so the central directory's sizes are the ones used.
        require(local_offset <= data_end && kLocalHeaderSize <= data_end - local_offset &&
                    u32(base + local_offset) == kLocalFileHeader,
                path, ": zip entry '", entry.name, "' has no local header at offset ", local_offset);
        const uint8_t* local = base + local_offset;
        const uint64_t data_offset = local_offset + kLocalHeaderSize + u16(local + 26) + u16(local + 28);
        require(data_offset <= data_end && compressed <= data_end - data_offset, path, ": zip entry '", entry.name,
                "' (", compressed, " bytes at offset ", data_offset, ") runs past the end of the data (truncated?)");
        entry.data = base + data_offset;
        entry.size = static_cast<size_t>(compressed);
        zip.entries_.push_back(std::move(entry));
    }
    return zip;
}

const ZipEntry* ZipArchive::find(std::string_view name) const {
    for (const ZipEntry& e : entries_)
        if (e.name == name) return &e;
    return nullptr;
}

}  // namespace duet
