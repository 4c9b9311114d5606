// Sampling on the GPU by the CPU's rules (sample/sampler.cpp) with the same random numbers
// (sample/philox.h): one block per row, the whole draw on the device, the step counter read there,
// so the launches can be recorded in a graph and replayed.
//
// Each logit gets a 64-bit order key: the value's bits mapped so that a larger value has a smaller
// key (−0 as +0, a NaN of either sign as one NaN above every number, as the CPU ranks them), then its
// index. The CPU's order (larger first, ties to the lower index) is the
// keys' order and keys are unique, so "the first m candidates" is "the keys up to the m-th
// smallest", which a radix select finds with exact integer counts. The candidates are then taken
// in sorted pieces of up to kPiece keys (a bitonic sort in shared memory); over each piece the
// untempered softmax mass and the tempered weights are prefix-summed in double by a fixed-order
// block scan. The top-p cut is the first position whose mass reaches p, the draw the first whose
// cumulative weight exceeds uniform · total. Only the grouping of those sums differs from the CPU's
// running sums, so an index can differ only where a boundary lies within rounding of a cut; the
// same inputs always give the same index. When the top-k fit in one warp (top_k ≤ 32, the usual
// case) that warp sorts them (by counting, in shared memory) and sums them with shuffles instead,
// without block-wide barriers.
#include <algorithm>
#include <climits>
#include <cmath>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/early_launch.cuh"
#include "kernels/cuda/ops.h"
#include "sample/philox.h"

namespace duet::cuda {

namespace {

constexpr int kThreads = 1024;
constexpr int kWarps = kThreads / kWarpSize;
constexpr int kPiece = 4096;  // keys sorted at once in shared memory
constexpr int kItems = kPiece / kThreads;
constexpr int kBins = 256;    // one byte of the key per radix pass
constexpr uint64_t kNoKey = ~uint64_t(0);
constexpr uint64_t kNoPosition = kNoKey;

struct Shared {
    uint64_t keys[kPiece];
    double scan[2][kWarps];
    uint64_t least[kWarps];
    unsigned hist[kBins];
    unsigned fill;
    // What one thread finds and every thread then reads.
    unsigned bin, before, in_bin;
    double total;
    uint64_t kept_last;
    int redraw;
};

// A logit's rank: the high half of its order key (smaller ranks first).
__device__ __forceinline__ uint32_t order_rank(float x) {
    uint32_t bits = __float_as_uint(x);
    if ((bits & 0x7FFFFFFFu) == 0) bits = 0;  // −0 ties with +0, as the CPU's comparisons have it
    if ((bits & 0x7FFFFFFFu) > 0x7F800000u) bits = 0x7FC00000u;  // every NaN one, above +inf
    const uint32_t ascending = (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
    return ~ascending;
}

// The order key of a logit of rank `rank` at index i.
__device__ __forceinline__ uint64_t key_of_rank(uint32_t rank, int i) { return (uint64_t(rank) << 32) | uint32_t(i); }

__device__ __forceinline__ uint64_t order_key(float x, int i) { return key_of_rank(order_rank(x), i); }

__device__ __forceinline__ float key_value(uint64_t key) {
    const uint32_t ascending = ~uint32_t(key >> 32);
    return __uint_as_float((ascending & 0x80000000u) ? (ascending & 0x7FFFFFFFu) : ~ascending);
}

__device__ __forceinline__ int32_t key_index(uint64_t key) { return static_cast<int32_t>(uint32_t(key)); }

__device__ __forceinline__ uint64_t least(uint64_t a, uint64_t b) { return a < b ? a : b; }

// A row's order keys as every pass reads them. A row of up to kHeld · kThreads logits (the code and
// candidate rows Drama 3 samples) is read once, its ranks held in registers: the kernel then has all
// of it before it lets the next kernel start (whose weight loads would queue these reads behind
// them), and its radix passes can work on 32-bit ranks (select_held). A longer row is read from
// memory by each pass.
constexpr int kHeld = 5;
struct RowKeys {
    const float* row;
    int count;
    bool held;
    int live = 0;             // held ranks of this thread
    uint32_t rank[kHeld]{};   // of logits threadIdx.x + j · kThreads

    __device__ RowKeys(const float* row_, int count_) : row(row_), count(count_), held(count_ <= kHeld * kThreads) {
        if (!held) return;
        const int tid = static_cast<int>(threadIdx.x);
        live = count > tid ? min(kHeld, (count - tid + kThreads - 1) / kThreads) : 0;
        float value[kHeld];
#pragma unroll
        for (int j = 0; j < kHeld; ++j) value[j] = j < live ? row[tid + j * kThreads] : 0.0f;
#pragma unroll
        for (int j = 0; j < kHeld; ++j) rank[j] = order_rank(value[j]);
    }

    // Uses every held rank here, so that the ranks (and the loads they come from) are computed before
    // whatever the caller does next: a kernel lets the next one start only after this.
    __device__ __forceinline__ void arrive() const {
#pragma unroll
        for (int j = 0; j < kHeld; ++j) asm volatile("" ::"r"(rank[j]));
    }

    // f(key) for each of this thread's keys, in index order.
    template <typename F>
    __device__ __forceinline__ void for_each(F f) const {
        if (held) {
#pragma unroll
            for (int j = 0; j < kHeld; ++j) {
                if (j < live) f(key_of_rank(rank[j], threadIdx.x + j * kThreads));
            }
        } else {
            for (int i = threadIdx.x; i < count; i += kThreads) f(order_key(row[i], i));
        }
    }
};

// The smallest of every thread's `value` over a block of kBlockWarps warps; every thread gets it.
// `warp_least` is shared memory of a key a warp (free when called: the first barrier waits for its
// last readers).
template <int kBlockWarps>
__device__ uint64_t block_min(uint64_t value, uint64_t* warp_least) {
#pragma unroll
    for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
        value = least(value, __shfl_xor_sync(0xFFFFFFFFu, value, offset));
    }
    const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
    __syncthreads();
    if (lane == 0) warp_least[warp] = value;
    __syncthreads();
    uint64_t best = warp_least[0];
    for (int w = 1; w < kBlockWarps; ++w) best = least(best, warp_least[w]);
    return best;
}

// The sum of every thread's `value` in a fixed order; every thread gets it.
__device__ double block_sum_double(double value, Shared& sh) {
    value = warp_sum(value);
    const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
    __syncthreads();
    if (lane == 0) sh.scan[0][warp] = value;
    __syncthreads();
    double total = 0.0;
    for (int w = 0; w < kWarps; ++w) total += sh.scan[0][w];
    return total;
}

// Prefix sums of two values over the threads in order: each thread gets the sums over the threads
// before it, and the block's totals.
__device__ void block_scan2(double a, double b, double& a_before, double& b_before, double& a_total, double& b_total,
                            Shared& sh) {
    const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
    double a_incl = a, b_incl = b;
    warp_inclusive_sums(a_incl, b_incl);
    double a_lane_before = __shfl_up_sync(0xFFFFFFFFu, a_incl, 1);
    double b_lane_before = __shfl_up_sync(0xFFFFFFFFu, b_incl, 1);
    if (lane == 0) a_lane_before = b_lane_before = 0.0;
    __syncthreads();
    if (lane == kWarpSize - 1) {
        sh.scan[0][warp] = a_incl;
        sh.scan[1][warp] = b_incl;
    }
    __syncthreads();
    double a_warps = 0.0, b_warps = 0.0;
    a_total = b_total = 0.0;
    for (int w = 0; w < kWarps; ++w) {
        if (w == warp) {
            a_warps = a_total;
            b_warps = b_total;
        }
        a_total += sh.scan[0][w];
        b_total += sh.scan[1][w];
    }
    a_before = a_warps + a_lane_before;
    b_before = b_warps + b_lane_before;
}

// The row's first key (its argmax, the lowest index on ties).
__device__ uint64_t first_key(const RowKeys& keys, Shared& sh) {
    uint64_t best = kNoKey;
    keys.for_each([&](uint64_t key) { best = least(best, key); });
    return block_min<kWarps>(best, sh.least);
}

// After a pass has filled sh.hist: the bin in which the `need`-th counted key lies (sh.bin), the keys
// in the bins before it (sh.before) and in it (sh.in_bin), found by warp 0 for the caller's next
// barrier to publish. Lane l holds bins 8l … 8l+7; the lane whose range reaches `need` names the bin.
__device__ void find_bin(unsigned need, Shared& sh) {
    if (threadIdx.x >= kWarpSize) return;
    const int lane = threadIdx.x;
    constexpr int kPerLane = kBins / kWarpSize;
    unsigned counts[kPerLane], sum = 0;
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) sum += counts[j] = sh.hist[lane * kPerLane + j];
    unsigned incl = sum;
#pragma unroll
    for (int offset = 1; offset < kWarpSize; offset *= 2) {
        const unsigned up = __shfl_up_sync(0xFFFFFFFFu, incl, offset);
        if (lane >= offset) incl += up;
    }
    unsigned before = incl - sum;
    if (before < need && need <= incl) {
        for (int j = 0; j < kPerLane; ++j) {
            if (need <= before + counts[j]) {
                sh.bin = unsigned(lane * kPerLane + j);
                sh.before = before;
                sh.in_bin = counts[j];
                break;
            }
            before += counts[j];
        }
    }
}

// The key t such that exactly `want` of the row's keys in [lo, hi] are at most t, for 0 < want <
// their number: a radix select over the key's bytes, most significant first, with exact counts. The
// index bytes above the row's largest index are zero in every key and are skipped.
__device__ uint64_t select_keys(const RowKeys& keys, uint64_t lo, uint64_t hi, unsigned want, Shared& sh) {
    const int count = keys.count;
    const int index_bits = 32 - __clz(count - 1 > 0 ? count - 1 : 1);
    const int top_index_shift = (index_bits - 1) / 8 * 8;
    uint64_t mask = 0, prefix = 0;
    unsigned need = want;
    for (int shift = 56;;) {
        __syncthreads();
        for (int b = threadIdx.x; b < kBins; b += kThreads) sh.hist[b] = 0;
        __syncthreads();
        keys.for_each([&](uint64_t key) {
            if (key >= lo && key <= hi && (key & mask) == prefix) atomicAdd(&sh.hist[(key >> shift) & 0xFF], 1u);
        });
        __syncthreads();
        find_bin(need, sh);
        __syncthreads();
        need -= sh.before;
        prefix |= uint64_t(sh.bin) << shift;
        mask |= uint64_t(0xFF) << shift;
        if (sh.in_bin == need || shift == 0) {
            // The whole bin is taken: the largest key with the bytes chosen so far (the skipped
            // index bytes stay zero, as they are in every key).
            const uint64_t t = prefix | ((uint64_t(1) << shift) - 1);
            return t < hi ? t : hi;
        }
        shift = shift > 32 ? shift - 8 : shift == 32 ? top_index_shift : shift - 8;
    }
}

// select_keys for a whole held row (lo 0, hi the last key), its radix passes over the 32-bit
// ranks. A pass's time is the instructions the block issues, a set for every key, and a rank's test
// and byte take a fraction of a 64-bit key's. Only where the want-th key's rank is shared by keys
// after it (equal logits) do the index bytes remain, for select_keys to find.
__device__ uint64_t select_held(const RowKeys& keys, unsigned want, Shared& sh) {
    uint32_t prefix = 0, mask = 0;
    unsigned need = want;
    for (int shift = 24; shift >= 0; shift -= 8) {
        __syncthreads();
        for (int b = threadIdx.x; b < kBins; b += kThreads) sh.hist[b] = 0;
        __syncthreads();
#pragma unroll
        for (int j = 0; j < kHeld; ++j) {
            const uint32_t r = keys.rank[j];
            if (j < keys.live && ((r ^ prefix) & mask) == 0) atomicAdd(&sh.hist[(r >> shift) & 0xFF], 1u);
        }
        __syncthreads();
        find_bin(need, sh);
        __syncthreads();
        need -= sh.before;
        prefix |= sh.bin << shift;
        mask |= 0xFFu << shift;
        if (sh.in_bin == need) return (uint64_t(prefix | ((1u << shift) - 1)) << 32) | 0xFFFFFFFFu;
    }
    const uint64_t tied = uint64_t(prefix) << 32;  // the keys of the want-th key's rank
    return select_keys(keys, tied, tied | 0xFFFFFFFFu, need, sh);
}

// Gathers the n keys of the row in [lo, t] into sh.keys, in no particular order (n ≤ kPiece:
// exactly that many lie there), and pads them with kNoKey to a power of two.
__device__ int gather_piece(const RowKeys& keys, uint64_t lo, uint64_t t, int n, Shared& sh) {
    __syncthreads();
    if (threadIdx.x == 0) sh.fill = 0;
    __syncthreads();
    keys.for_each([&](uint64_t key) {
        if (key >= lo && key <= t) {
            const unsigned slot = atomicAdd(&sh.fill, 1u);
            if (slot < kPiece) sh.keys[slot] = key;
        }
    });
    int padded = 1;
    while (padded < n) padded *= 2;
    for (int pos = n + threadIdx.x; pos < padded; pos += kThreads) sh.keys[pos] = kNoKey;
    __syncthreads();
    return padded;
}

// Bitonic sort of sh.keys[0, padded), a compare-exchange of one pair per thread and pass.
__device__ void sort_piece(int padded, Shared& sh) {
    constexpr int kPairs = kPiece / 2 / kThreads;
    const int pairs = padded / 2;
    for (int size = 2; size <= padded; size *= 2) {
        for (int stride = size / 2; stride > 0; stride /= 2) {
            int first[kPairs];
            uint64_t a[kPairs], b[kPairs];
#pragma unroll
            for (int u = 0; u < kPairs; ++u) {
                const int pair = static_cast<int>(threadIdx.x) + u * kThreads;
                first[u] = 2 * pair - (pair & (stride - 1));
                if (pair < pairs) {
                    a[u] = sh.keys[first[u]];
                    b[u] = sh.keys[first[u] + stride];
                }
            }
#pragma unroll
            for (int u = 0; u < kPairs; ++u) {
                const int pair = static_cast<int>(threadIdx.x) + u * kThreads;
                if (pair < pairs && (a[u] > b[u]) == ((first[u] & size) == 0)) {
                    sh.keys[first[u]] = b[u];
                    sh.keys[first[u] + stride] = a[u];
                }
            }
            __syncthreads();
        }
    }
}

// The next piece of candidates: the first min(remaining, kPiece) keys in [lo, hi], where
// `remaining` keys lie. Returns how many.
__device__ int load_piece(const RowKeys& keys, uint64_t lo, uint64_t hi, int remaining, Shared& sh) {
    const int n = remaining < kPiece ? remaining : kPiece;
    const uint64_t t = n == remaining ? hi : select_keys(keys, lo, hi, unsigned(n), sh);
    sort_piece(gather_piece(keys, lo, t, n, sh), sh);
    return n;
}

// Cumulative untempered mass (each candidate's exp(x − top) / plain_total) and tempered weight
// (exp((x − top) / temperature)) through each of this thread's positions of the loaded piece
// (positions kItems·thread …), continuing the given carries. Every thread gets the piece's ends.
struct PieceSums {
    double mass[kItems];
    double weight[kItems];
};

__device__ void sum_piece(int n, double top, double plain_total, double temperature, double mass_carry,
                          double weight_carry, PieceSums& s, double& mass_end, double& weight_end, Shared& sh) {
    double mass = 0.0, weight = 0.0;
#pragma unroll
    for (int j = 0; j < kItems; ++j) {
        const int pos = threadIdx.x * kItems + j;
        if (pos < n) {
            const double x = key_value(sh.keys[pos]);
            mass += exp(x - top) / plain_total;
            weight += exp((x - top) / temperature);
        }
        s.mass[j] = mass;
        s.weight[j] = weight;
    }
    double mass_before, weight_before, mass_total, weight_total;
    block_scan2(mass, weight, mass_before, weight_before, mass_total, weight_total, sh);
#pragma unroll
    for (int j = 0; j < kItems; ++j) {
        s.mass[j] = mass_carry + (mass_before + s.mass[j]);
        s.weight[j] = weight_carry + (weight_before + s.weight[j]);
    }
    mass_end = mass_carry + mass_total;
    weight_end = weight_carry + weight_total;
}

// The first position of the loaded piece before `limit` whose cumulative weight exceeds `target`,
// or kNoPosition.
__device__ uint64_t first_above(const PieceSums& s, int limit, double target, Shared& sh) {
    uint64_t mine = kNoPosition;
#pragma unroll
    for (int j = kItems - 1; j >= 0; --j) {
        const int pos = threadIdx.x * kItems + j;
        if (pos < limit && target < s.weight[j]) mine = uint64_t(pos);
    }
    return block_min<kWarps>(mine, sh.least);
}

// The draw when the top-k fit in one warp (n ≤ 32 keys gathered, unsorted): warp 0 sorts them by
// counting and sums with shuffles, by the same rules as the pieces below. Every thread gets the index.
__device__ int32_t sample_in_warp(int n, double temperature, double top_p, float uniform, Shared& sh) {
    if (threadIdx.x < kWarpSize) {
        // Sorted by counting: a lane's position is the number of keys below its own (keys are
        // unique), all of them read at once from shared memory, where a sorting network is 15
        // dependent rounds of exchanges.
        const int lane = static_cast<int>(threadIdx.x);
        const bool live = lane < n;
        const uint64_t mine = live ? sh.keys[lane] : kNoKey;
        int position = 0;
#pragma unroll
        for (int j = 0; j < kWarpSize; ++j) position += (j < n) & (sh.keys[j] < mine);
        uint64_t* sorted = sh.keys + kWarpSize;
        if (live) sorted[position] = mine;
        __syncwarp();
        const uint64_t key = live ? sorted[lane] : kNoKey;
        const double top = key_value(__shfl_sync(0xFFFFFFFFu, key, 0));
        const double x = live ? double(key_value(key)) : top;
        // The tempered weights and their running sums are found beside the untempered mass, not
        // after its cut: a running sum through a lane at or before the cut does not depend on the
        // lanes after it, so these are the sums over the kept lanes.
        const double plain = live ? exp(x - top) : 0.0;
        double weight = live ? exp((x - top) / temperature) : 0.0;
        double plain_total = plain;
#pragma unroll
        for (int offset = 1; offset < kWarpSize; offset *= 2) {
            const double up = __shfl_up_sync(0xFFFFFFFFu, weight, offset);
            plain_total += __shfl_xor_sync(0xFFFFFFFFu, plain_total, kWarpSize / 2 / offset);
            if (lane >= offset) weight += up;
        }
        double mass = live ? plain / plain_total : 0.0;
#pragma unroll
        for (int offset = 1; offset < kWarpSize; offset *= 2) {
            const double up = __shfl_up_sync(0xFFFFFFFFu, mass, offset);
            if (lane >= offset) mass += up;
        }
        const unsigned reached = __ballot_sync(0xFFFFFFFFu, live && mass >= top_p);
        const int cut = reached != 0 ? __ffs(reached) - 1 : n - 1;
        const double target = double(uniform) * __shfl_sync(0xFFFFFFFFu, weight, cut);
        const unsigned above = __ballot_sync(0xFFFFFFFFu, lane <= cut && target < weight);
        const int pos = above != 0 ? __ffs(above) - 1 : cut;  // else uniform within rounding of 1
        const uint64_t chosen = __shfl_sync(0xFFFFFFFFu, key, pos);
        if (lane == 0) sh.kept_last = chosen;
    }
    __syncthreads();
    return key_index(sh.kept_last);
}

// sample_index for one row, by every thread of the block alike; every thread gets the index.
__device__ int32_t sample_row(const RowKeys& keys, float temperature, int64_t top_k, float top_p, float uniform,
                              Shared& sh) {
    const int count = keys.count;
    if (temperature == 0.0f) return key_index(first_key(keys, sh));
    const int k = top_k == 0 || top_k >= count ? count : static_cast<int>(top_k);
    const uint64_t hi = k >= count ? kNoKey
                        : keys.held ? select_held(keys, unsigned(k), sh)
                                    : select_keys(keys, 0, kNoKey, unsigned(k), sh);
    if (k <= kWarpSize) {
        gather_piece(keys, 0, hi, k, sh);
        return sample_in_warp(k, temperature, top_p, uniform, sh);
    }

    // The top-p cut: walk the top-k in pieces until the untempered mass reaches p.
    int n = load_piece(keys, 0, hi, k, sh);
    const double top = key_value(sh.keys[0]);
    double plain = 0.0;
    if (n == k) {
        for (int j = 0; j < kItems; ++j) {
            const int pos = threadIdx.x * kItems + j;
            if (pos < n) plain += exp(double(key_value(sh.keys[pos])) - top);
        }
    } else {
        keys.for_each([&](uint64_t key) {
            if (key <= hi) plain += exp(double(key_value(key)) - top);
        });
    }
    const double plain_total = block_sum_double(plain, sh);
    const double p = top_p, t = temperature;

    PieceSums s;
    double mass_carry = 0.0, weight_carry = 0.0, total = 0.0;
    uint64_t kept_last = kNoKey;
    int done = 0, pieces = 1, cut = 0;  // cut: the last kept position in the current piece
    for (;;) {
        double mass_end, weight_end;
        sum_piece(n, top, plain_total, t, mass_carry, weight_carry, s, mass_end, weight_end, sh);
        uint64_t mine = kNoPosition;
        for (int j = kItems - 1; j >= 0; --j) {
            const int pos = threadIdx.x * kItems + j;
            if (pos < n && s.mass[j] >= p) mine = uint64_t(pos);
        }
        const uint64_t reached = block_min<kWarps>(mine, sh.least);
        if (reached != kNoPosition) {
            cut = static_cast<int>(reached);
            if (threadIdx.x == cut / kItems) {
                sh.total = s.weight[cut % kItems];
                sh.kept_last = sh.keys[cut];
            }
            __syncthreads();
            total = sh.total;
            kept_last = sh.kept_last;
            break;
        }
        done += n;
        if (done == k) {  // all of the top-k kept
            cut = n - 1;
            total = weight_end;
            kept_last = sh.keys[n - 1];
            break;
        }
        mass_carry = mass_end;
        weight_carry = weight_end;
        const uint64_t lo = sh.keys[n - 1] + 1;
        n = load_piece(keys, lo, hi, k - done, sh);
        ++pieces;
    }

    // The draw: the first kept candidate whose cumulative weight exceeds uniform · total.
    const double target = double(uniform) * total;
    if (pieces == 1) {
        const uint64_t pos = first_above(s, cut + 1, target, sh);
        return key_index(pos != kNoPosition ? sh.keys[pos] : kept_last);
    }
    weight_carry = 0.0;
    done = 0;
    n = load_piece(keys, 0, hi, k, sh);
    for (;;) {
        double mass_end, weight_end;
        sum_piece(n, top, plain_total, t, 0.0, weight_carry, s, mass_end, weight_end, sh);
        const bool last = sh.keys[n - 1] >= kept_last;
        int limit = n;
        if (last) {  // the kept candidates of the piece: the keys up to kept_last
            int below = 0;
            while (below < limit) {
                const int mid = (below + limit) / 2;
                if (sh.keys[mid] <= kept_last) {
                    below = mid + 1;
                } else {
                    limit = mid;
                }
            }
        }
        const uint64_t pos = first_above(s, limit, target, sh);
        if (pos != kNoPosition) return key_index(sh.keys[pos]);
        if (last) return key_index(kept_last);  // uniform within rounding of 1
        done += n;
        weight_carry = weight_end;
        const uint64_t lo = sh.keys[n - 1] + 1;
        n = load_piece(keys, lo, hi, k - done, sh);
    }
}

__global__ __launch_bounds__(kThreads) void sample_kernel(const float* logits, int count, SamplingParams params,
                                                          const int32_t* step, uint32_t slot, int32_t* out) {
    // The draw before the wait: the step counter is written by the host, or by a kernel finished
    // before this launch began (its load and the Philox rounds took a microsecond after the wait).
    const float uniform = uniform_draw(params.seed, static_cast<uint32_t>(*step), slot + blockIdx.x);
    wait_for_inputs();  // launched early: before this only the step counter is read
    const RowKeys keys(logits + int64_t(blockIdx.x) * count, count);
    keys.arrive();
    allow_next_kernel();
    __shared__ Shared sh;
    const int32_t choice = sample_row(keys, params.temperature, params.top_k, params.top_p, uniform, sh);
    if (threadIdx.x == 0) out[blockIdx.x] = choice;
}

__global__ __launch_bounds__(kThreads) void sample_with_ras_kernel(const float* logits, int count,
                                                                   SamplingParams params, RasParams ras,
                                                                   int32_t* recent, const int32_t* step, uint32_t slot,
                                                                   int32_t exempt, int32_t* out,
                                                                   const int32_t* live) {
    // Both draws before the wait, as sample_kernel's; the window (`recent`) only after it, since the
    // kernel before may be this one's last run.
    const uint32_t counter = static_cast<uint32_t>(*step);
    const float uniform = uniform_draw(params.seed, counter, slot);
    const float redraw_uniform = uniform_draw(params.seed, counter, slot + 1);
    wait_for_inputs();  // launched early: before this only the step counter is read
    if (live != nullptr && *live == 0) return;  // the same for every thread
    const RowKeys keys(logits, count);
    keys.arrive();
    allow_next_kernel();
    __shared__ Shared sh;
    int32_t choice = sample_row(keys, params.temperature, params.top_k, params.top_p, uniform, sh);
    const int64_t held = recent[0];
    if (threadIdx.x == 0) {
        // ras_should_redraw over the window's last min(held, ras.window) choices.
        int redraw = 0;
        if (params.temperature != 0.0f && choice != exempt) {
            const int64_t window = ras.window < 0 || ras.window > held ? held : ras.window;
            int64_t seen = 0;
            for (int64_t i = held - window; i < held; ++i) seen += recent[1 + i] == choice;
            redraw = seen >= ras.min_repeats;
        }
        sh.redraw = redraw;
    }
    __syncthreads();
    if (sh.redraw) {
        choice = sample_row(keys, 1.0f, 0, 1.0f, redraw_uniform, sh);
    }
    if (threadIdx.x != 0) return;
    *out = choice;
    if (choice == exempt || ras.window <= 0) return;
    if (held == ras.window) {
        for (int64_t i = 1; i < held; ++i) recent[i] = recent[i + 1];
        recent[held] = choice;
    } else {
        recent[1 + held] = choice;
        recent[0] = static_cast<int32_t>(held + 1);
    }
}

// A greedy draw over one long row by many blocks: each finds the first key of its share and stores
// it in the scratch; the last block to count itself done (count_block_last) takes the least
// of those, writes its index and zeroes the counter for the next launch.
constexpr int kArgmaxThreads = 256;
constexpr int kArgmaxBlocks = 128;
constexpr int64_t kArgmaxLeast = 16384;  // rows shorter than this stay with one block
struct ArgmaxScratch {
    uint64_t best[kArgmaxBlocks];
    unsigned done;
};

__global__ __launch_bounds__(kArgmaxThreads) void argmax_blocks_kernel(const float* logits, int count,
                                                                       ArgmaxScratch* scratch, int32_t* out) {
    constexpr int kArgmaxWarps = kArgmaxThreads / kWarpSize;
    __shared__ uint64_t warp_least[kArgmaxWarps];
    __shared__ bool last;
    wait_for_inputs();  // launched early: nothing before this reads or writes memory
    allow_next_kernel();
    const int stride = gridDim.x * kArgmaxThreads;
    uint64_t best = kNoKey;
#pragma unroll 4
    for (int i = blockIdx.x * kArgmaxThreads + threadIdx.x; i < count; i += stride) {
        best = least(best, order_key(logits[i], i));
    }
    best = block_min<kArgmaxWarps>(best, warp_least);
    if (threadIdx.x == 0) {
        scratch->best[blockIdx.x] = best;
        last = count_block_last(&scratch->done, gridDim.x);
    }
    __syncthreads();
    if (!last) return;
    uint64_t all = kNoKey;
    for (int b = threadIdx.x; b < gridDim.x; b += kArgmaxThreads) {
        all = least(all, __ldcg(reinterpret_cast<const unsigned long long*>(&scratch->best[b])));  // not L1's copy
    }
    all = block_min<kArgmaxWarps>(all, warp_least);
    if (threadIdx.x == 0) {
        *out = key_index(all);
        scratch->done = 0;
    }
}

__global__ void uniform_draws_kernel(const uint64_t* seeds, const uint64_t* steps, const uint32_t* slots, int64_t n,
                                     float* out) {
    const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i < n) out[i] = uniform_draw(seeds[i], steps[i], slots[i]);
}

__global__ void philox_blocks_kernel(const uint32_t* counters, const uint32_t* keys, int64_t n, uint32_t* out) {
    const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i >= n) return;
    uint32_t block[4] = {counters[4 * i], counters[4 * i + 1], counters[4 * i + 2], counters[4 * i + 3]};
    philox4x32_rounds(block, keys[2 * i], keys[2 * i + 1]);
    for (int j = 0; j < 4; ++j) out[4 * i + j] = block[j];
}

// The checks sample_index makes (sampler.cpp), with its messages, and the row size.
void check_sampling(int64_t count, const SamplingParams& p) {
    require(count > 0, "sampling: no logits");
    require(count <= INT_MAX, "sampling: rows of ", count, " logits exceed the GPU sampler's ", INT_MAX);
    if (p.temperature == 0.0f) return;
    require(p.temperature > 0.0f && std::isfinite(p.temperature), "sampling: temperature ", p.temperature,
            " must be positive (0 means argmax)");
    require(p.top_p > 0.0f && p.top_p <= 1.0f, "sampling: top_p ", p.top_p, " must be in (0, 1]");
    require(p.top_k >= 0, "sampling: top_k ", p.top_k, " must not be negative");
}

}  // namespace

size_t argmax_scratch_bytes() { return sizeof(ArgmaxScratch); }

void sample(const float* logits, int64_t rows, int64_t count, const SamplingParams& params, const DrawCounter& draws,
            int32_t* out, void* argmax_scratch, cudaStream_t stream) {
    check_sampling(count, params);
    require(rows <= INT_MAX, "sampling: ", rows, " rows exceed the GPU sampler's ", INT_MAX);
    if (rows <= 0) return;
    if (params.temperature == 0.0f && rows == 1 && count >= kArgmaxLeast && argmax_scratch != nullptr) {
        const int64_t blocks = std::min<int64_t>(kArgmaxBlocks, (count + 4 * kArgmaxThreads - 1) / (4 * kArgmaxThreads));
        launch_early(argmax_blocks_kernel, dim3(static_cast<unsigned>(blocks)), dim3(kArgmaxThreads), 0, stream,
                     "argmax_blocks_kernel", logits, static_cast<int>(count),
                     static_cast<ArgmaxScratch*>(argmax_scratch), out);
        return;
    }
    SamplingParams p = params;
    p.seed = draws.seed;
    launch_early(sample_kernel, dim3(static_cast<unsigned>(rows)), dim3(kThreads), 0, stream, "sample_kernel", logits,
                 static_cast<int>(count), p, draws.step, draws.slot, out);
}

void sample_with_ras(const float* logits, int64_t count, const SamplingParams& params, const RasParams& ras,
                     int32_t* recent, const DrawCounter& draws, int32_t exempt, int32_t* out, const int32_t* live,
                     cudaStream_t stream) {
    check_sampling(count, params);
    SamplingParams p = params;
    p.seed = draws.seed;
    launch_early(sample_with_ras_kernel, dim3(1), dim3(kThreads), 0, stream, "sample_with_ras_kernel", logits,
                 static_cast<int>(count), p, ras, recent, draws.step, draws.slot, exempt, out, live);
}

void uniform_draws(const uint64_t* seeds, const uint64_t* steps, const uint32_t* slots, int64_t n, float* out,
                   cudaStream_t stream) {
    if (n <= 0) return;
    uniform_draws_kernel<<<static_cast<unsigned>((n + 255) / 256), 256, 0, stream>>>(seeds, steps, slots, n, out);
    DUET_CUDA_CHECK_LAUNCH("uniform_draws_kernel");
}

void philox_blocks(const uint32_t* counters, const uint32_t* keys, int64_t n, uint32_t* out, cudaStream_t stream) {
    if (n <= 0) return;
    philox_blocks_kernel<<<static_cast<unsigned>((n + 255) / 256), 256, 0, stream>>>(counters, keys, n, out);
    DUET_CUDA_CHECK_LAUNCH("philox_blocks_kernel");
}

}  // namespace duet::cuda
