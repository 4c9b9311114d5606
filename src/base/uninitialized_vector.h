// A std::vector whose new elements are left uninitialised (default-initialised: for float, no value),
// for buffers that are written whole right after they are made. A plain std::vector<float>(n) has
// the calling thread zero every element first, and for a large buffer fault in every page: a pass of
// one thread that more threads in the writer that follows do not shorten. Here the pages are first
// touched by the threads that write them.
#pragma once

#include <memory>
#include <new>
#include <utility>
#include <vector>

namespace duet {

template <class T>
struct UninitializedAllocator : std::allocator<T> {
    template <class U>
    struct rebind {
        using other = UninitializedAllocator<U>;
    };
    UninitializedAllocator() = default;
    template <class U>
    UninitializedAllocator(const UninitializedAllocator<U>&) noexcept {}

    template <class U>
    void construct(U* p) noexcept {
        ::new (static_cast<void*>(p)) U;
    }
    template <class U, class... Args>
    void construct(U* p, Args&&... args) {
        ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
    }
};

template <class T>
using UninitializedVector = std::vector<T, UninitializedAllocator<T>>;

}  // namespace duet
