#include "base/host_memory.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "base/error.h"

namespace duet {

namespace {

constexpr size_t kPage = 4096;
constexpr size_t kHugePage = size_t{2} << 20;
// Below this, the allocator's memory on a cache line: a huge page's alignment would waste more than it saves.
constexpr size_t kMappedFrom = size_t{1} << 20;
constexpr size_t kCacheLine = 64;

// A private anonymous mapping of `bytes` (rounded up to whole pages) that starts on a huge-page
// boundary: map one huge page more, then give back the unaligned head and the tail. Every whole huge
// page of the block can then be one; the last part of one stays in small pages, so no memory is
// taken beyond the block (rounding each block up to huge pages took 4 % more for nano-8l's weights).
uint8_t* map_aligned(size_t bytes, size_t& mapped) {
    mapped = (bytes + kPage - 1) / kPage * kPage;
    const size_t padded = mapped + kHugePage;
    void* p = ::mmap(nullptr, padded, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) fail("cannot allocate ", bytes, " bytes of host memory: ", std::strerror(errno));
    const auto start = reinterpret_cast<uintptr_t>(p);
    const uintptr_t aligned = (start + kHugePage - 1) / kHugePage * kHugePage;
    if (aligned > start) ::munmap(p, aligned - start);
    const uintptr_t end = start + padded, used_end = aligned + mapped;
    if (end > used_end) ::munmap(reinterpret_cast<void*>(used_end), end - used_end);
    // Only a hint: where transparent huge pages are off the block is still plain zeroed memory.
    ::madvise(reinterpret_cast<void*>(aligned), mapped, MADV_HUGEPAGE);
    return reinterpret_cast<uint8_t*>(aligned);
}

}  // namespace

std::shared_ptr<uint8_t> allocate_zeroed_host(size_t bytes) {
    if (bytes < kMappedFrom) {
        const size_t lines = (bytes + kCacheLine - 1) / kCacheLine;
        auto* p = static_cast<uint8_t*>(std::aligned_alloc(kCacheLine, (lines == 0 ? 1 : lines) * kCacheLine));
        if (p == nullptr) fail("cannot allocate ", bytes, " bytes of host memory");
        std::memset(p, 0, bytes);
        return std::shared_ptr<uint8_t>(p, [](uint8_t* q) { std::free(q); });
    }
    size_t mapped = 0;
    uint8_t* p = map_aligned(bytes, mapped);
    return std::shared_ptr<uint8_t>(p, [mapped](uint8_t* q) { ::munmap(q, mapped); });
}

}  // namespace duet
