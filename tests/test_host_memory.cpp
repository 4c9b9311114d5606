// Host memory for tensors: zeroed and writable over every byte asked for, whatever the size, and
// large blocks on huge-page boundaries.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>

#include "base/host_memory.h"

namespace duet {
namespace {

TEST(HostMemory, EveryByteIsZeroAndWritable) {
    for (size_t bytes : {size_t{0}, size_t{1}, size_t{4097}, (size_t{1} << 20) - 1, size_t{1} << 20,
                         (size_t{3} << 20) + 5}) {
        const std::shared_ptr<uint8_t> block = allocate_zeroed_host(bytes);
        ASSERT_NE(block, nullptr) << bytes;
        uint8_t* p = block.get();
        EXPECT_TRUE(std::all_of(p, p + bytes, [](uint8_t b) { return b == 0; })) << bytes;
        for (size_t i = 0; i < bytes; ++i) p[i] = static_cast<uint8_t>(i * 7 + 1);
        for (size_t i = 0; i < bytes; i += 4093) ASSERT_EQ(p[i], static_cast<uint8_t>(i * 7 + 1)) << bytes;
    }
}

TEST(HostMemory, LargeBlocksStartOnAHugePageBoundary) {
    for (size_t bytes : {size_t{1} << 20, (size_t{5} << 20) + 3}) {
        const std::shared_ptr<uint8_t> block = allocate_zeroed_host(bytes);
        EXPECT_EQ(reinterpret_cast<uintptr_t>(block.get()) % (size_t{2} << 20), 0u) << bytes;
    }
}

TEST(HostMemory, SmallBlocksStartOnACacheLine) {
    for (size_t bytes : {size_t{0}, size_t{1}, size_t{100}, size_t{65536} + 4}) {
        const std::shared_ptr<uint8_t> block = allocate_zeroed_host(bytes);
        EXPECT_EQ(reinterpret_cast<uintptr_t>(block.get()) % 64, 0u) << bytes;
    }
}

TEST(HostMemory, AnImpossibleSizeIsRefusedByName) {
    try {
        allocate_zeroed_host(size_t{1} << 62);
        FAIL() << "no error for 4 EiB";
    } catch (const std::exception& e) {
        EXPECT_NE(std::string(e.what()).find("cannot allocate 4611686018427387904 bytes of host memory"),
                  std::string::npos)
            << e.what();
    }
}

}  // namespace
}  // namespace duet
