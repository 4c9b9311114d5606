// Builds PyTorch-style checkpoints from bytes for tests: a stored zip writer and a protocol-2 pickle
// writer for state dicts, so hostile or broken files can be made without Python.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace duet::testing {

// A zip with stored entries; `method` other than 0 marks every entry as compressed (data unchanged).
inline std::string make_stored_zip(const std::vector<std::pair<std::string, std::string>>& entries,
                                   uint16_t method = 0) {
    auto u16 = [](std::string& s, uint16_t v) { s += char(v & 0xFF); s += char(v >> 8); };
    auto u32 = [&](std::string& s, uint32_t v) { u16(s, uint16_t(v & 0xFFFF)); u16(s, uint16_t(v >> 16)); };
    std::string out, dir;
    for (const auto& [name, data] : entries) {
        const uint32_t offset = uint32_t(out.size());
        u32(out, 0x04034b50); u16(out, 20); u16(out, 0); u16(out, method); u16(out, 0); u16(out, 0);
        u32(out, 0); u32(out, uint32_t(data.size())); u32(out, uint32_t(data.size()));
        u16(out, uint16_t(name.size())); u16(out, 0);
        out += name;
        out += data;
        u32(dir, 0x02014b50); u16(dir, 20); u16(dir, 20); u16(dir, 0); u16(dir, method); u16(dir, 0); u16(dir, 0);
        u32(dir, 0); u32(dir, uint32_t(data.size())); u32(dir, uint32_t(data.size()));
        u16(dir, uint16_t(name.size())); u16(dir, 0); u16(dir, 0); u16(dir, 0); u16(dir, 0); u32(dir, 0);
        u32(dir, offset);
        dir += name;
    }
    const uint32_t dir_offset = uint32_t(out.size());
    out += dir;
    u32(out, 0x06054b50); u16(out, 0); u16(out, 0); u16(out, uint16_t(entries.size()));
    u16(out, uint16_t(entries.size())); u32(out, uint32_t(dir.size())); u32(out, dir_offset); u16(out, 0);
    return out;
}

// Protocol-2 pickle pieces in the form torch.save writes them.
struct PickleWriter {
    std::string bytes = "\x80\x02";

    PickleWriter& op(char c) { bytes += c; return *this; }
    PickleWriter& str(const std::string& s) {
        bytes += 'X';
        for (int i = 0; i < 4; ++i) bytes += char((s.size() >> (8 * i)) & 0xFF);
        bytes += s;
        return *this;
    }
    PickleWriter& integer(uint32_t v) {  // BININT
        bytes += 'J';
        for (int i = 0; i < 4; ++i) bytes += char((v >> (8 * i)) & 0xFF);
        return *this;
    }
    PickleWriter& global(const std::string& module, const std::string& name) {
        bytes += 'c' + module + '\n' + name + '\n';
        return *this;
    }
    PickleWriter& int_tuple(const std::vector<uint32_t>& v) {
        op('(');
        for (uint32_t x : v) integer(x);
        return op('t');
    }
    // key: _rebuild_tensor_v2((storage), offset, size, stride, False, OrderedDict())
    PickleWriter& tensor(const std::string& name, const std::string& storage_type, const std::string& key,
                         uint32_t storage_numel, uint32_t offset, const std::vector<uint32_t>& shape,
                         const std::vector<uint32_t>& stride) {
        str(name).global("torch._utils", "_rebuild_tensor_v2").op('(');
        op('(').str("storage").global("torch", storage_type).str(key).str("cpu").integer(storage_numel).op('t').op('Q');
        integer(offset).int_tuple(shape).int_tuple(stride).op('\x89');
        global("collections", "OrderedDict").op(')').op('R');
        return op('t').op('R');
    }
};

}  // namespace duet::testing
