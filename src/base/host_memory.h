// Zero-filled host memory for weights, activations and states, on a 64-byte cache line (a product's
// vector loads then do not straddle two lines: base/aligned_vector.h). A block of a megabyte or more comes
// straight from the kernel (already zero, so never written twice), starts on a 2 MiB boundary and
// asks for transparent huge pages: a decode step streams every weight once, and on 4 KiB pages a
// core's prefetchers stop at every page boundary and each page costs a TLB miss (and a fault when
// first written).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

namespace duet {

// `bytes` of zeroed host memory, freed when the last owner lets go. Throws duet::Error naming the
// size when the system refuses it.
std::shared_ptr<uint8_t> allocate_zeroed_host(size_t bytes);

}  // namespace duet
