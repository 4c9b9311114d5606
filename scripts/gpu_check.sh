#!/usr/bin/env bash
# The checks that need the GPU machine (kept out of CI): build for Hopper, run every suite there
# (the CPU suites then also exercise the AVX-512 kernels, where the host has them, and the CUDA suites
# run on a real device, once more under compute-sanitizer), then the benchmarks on both backends.
# Usage: [CPU_TESTS=0] [SANITIZER=0] scripts/gpu_check.sh FIXTURES_DIR LOG_DIR [BENCH_SPECS...], a spec
# being "device arch preset" for `duet bench`, or "peer arch preset" for bench/peer_transformers.py.
set -uo pipefail
fixtures=$(realpath "${1:?fixtures dir}")
logs=${2:?log dir}
shift 2
mkdir -p "$logs"
cd "$(dirname "$0")/.."
export PATH="/usr/local/cuda/bin:$PATH"

{ nvidia-smi --query-gpu=name,memory.total,clocks.max.memory --format=csv; lscpu | grep -E "Model name|^CPU\(s\)|Flags" | cut -c1-200; } > "$logs/machine.txt" 2>&1
cmake -S . -B build-gpu -DCMAKE_CUDA_ARCHITECTURES=90a -DDUET_FIXTURES_DIR="$fixtures" > "$logs/configure.txt" 2>&1
cmake --build build-gpu -j"$(nproc)" > "$logs/build.txt" 2>&1 || { tail -40 "$logs/build.txt"; exit 1; }

cpu_rc=skipped
if [ "${CPU_TESTS:-1}" = 1 ]; then ./build-gpu/duet_tests > "$logs/cpu_tests.txt" 2>&1; cpu_rc=$?; fi
./build-gpu/duet_cuda_tests > "$logs/cuda_tests.txt" 2>&1; cuda_rc=$?
# API errors are left out: one test provokes an allocation failure on purpose.
san_rc=skipped
if [ "${SANITIZER:-1}" = 1 ]; then
  compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 9 ./build-gpu/duet_cuda_tests > "$logs/cuda_sanitizer.txt" 2>&1; san_rc=$?
fi
for spec in "$@"; do
  set -- $spec
  if [ "$1" = peer ]; then
    python3 bench/peer_transformers.py --arch "$2" --preset "$3" >> "$logs/bench.jsonl" 2>> "$logs/peer_stderr.txt"
  else
    ./build-gpu/duet bench --device "$1" --arch "$2" --preset "$3" --random-weights >> "$logs/bench.jsonl" 2>> "$logs/bench_stderr.txt"
  fi
done

echo "suite            exit  summary"
printf "cpu tests        %-4s  %s\n" "$cpu_rc" "$(grep -sE '^\[  (PASSED|FAILED) ' "$logs/cpu_tests.txt" | head -1)"
printf "cuda tests       %-4s  %s\n" "$cuda_rc" "$(grep -E '^\[  (PASSED|FAILED) ' "$logs/cuda_tests.txt" | head -1)"
printf "cuda sanitizer   %-4s  %s\n" "$san_rc" "$(grep -E 'ERROR SUMMARY' "$logs/cuda_sanitizer.txt" | head -1)"
grep -E "FAILED|Failure|error" "$logs/cuda_tests.txt" | head -20
scripts/bench_table.py "$logs/bench.jsonl" 2>/dev/null
