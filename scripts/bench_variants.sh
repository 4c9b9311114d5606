#!/usr/bin/env bash
# Times variants of duet against each other in one call on the GPU machine, so that they share the
# card, its clocks and the measured copy bandwidth: each build is duet compiled with its own CUDA
# flags, each run is `duet bench --random-weights` of one build with its own environment.
# Usage: scripts/bench_variants.sh LOG_DIR BUILDS RUN...
#   BUILDS  "name=cuda flags;name=cuda flags" (e.g. "base=-DSOME_SWITCH;new="); "name@DIR=flags" builds
#           the sources in DIR instead (e.g. an earlier commit unpacked by `git archive`)
#   RUN     "build env-assignments arch preset" (env "-" for none; e.g. "new DUET_CUDA_EARLY_LAUNCH=0 drama3 a3b")
set -uo pipefail
logs=${1:?log dir}
builds=${2:?builds}
shift 2
mkdir -p "$logs"
cd "$(dirname "$0")/.."
export PATH="/usr/local/cuda/bin:$PATH"

IFS=';' read -ra specs <<< "$builds"
for spec in "${specs[@]}"; do
  name=${spec%%=*}
  flags=${spec#*=}
  source=.
  if [[ $name == *@* ]]; then source=${name#*@}; name=${name%%@*}; fi
  cmake -S "$source" -B "build-$name" -DCMAKE_CUDA_ARCHITECTURES=90a -DDUET_TESTS=OFF "-DCMAKE_CUDA_FLAGS=$flags" \
    > "$logs/configure-$name.txt" 2>&1
  cmake --build "build-$name" -j"$(nproc)" --target duet > "$logs/build-$name.txt" 2>&1 ||
    { tail -30 "$logs/build-$name.txt"; exit 1; }
done

for run in "$@"; do
  read -r build env arch preset <<< "$run"
  [ "$env" = - ] && env=
  line=$(env $env "./build-$build/duet" bench --device cuda --arch "$arch" --preset "$preset" --random-weights \
    2>> "$logs/bench_stderr.txt")
  echo "{\"variant\": \"$build $env\", \"result\": $line}" >> "$logs/variants.jsonl"
  echo "$build $env $arch $preset: $line" | cut -c1-400
done

scripts/bench_table.py "$logs/variants.jsonl"
