#!/usr/bin/env bash
# An A/B of duet binaries built on a developer machine, run through scripts/gpu_prebuilt.sh: ROUNDS
# rounds, each timing every binary on `nano` then `a3b` (`duet bench --device cuda --random-weights`),
# the first binary of a round rotating, so that the builds share the card, its clocks and the
# measured copy bandwidth. One JSON line a run in OUT/ab.jsonl, then a table (scripts/bench_table.py).
# Usage: scripts/ab_prebuilt.sh OUT ROUNDS BIN...  (BIN: a path, absolute or from /work/main, e.g.
# build/duet or $REPO/.gpubin/duet-variant; or NAME=VALUE@PATH, that binary with a switch of the
# environment set, e.g. DUET_CUDA_EXPERT_GRID=resident@build/duet). AB_MODELS picks the models, e.g.
# AB_MODELS="drama3 a3b" (default: "nemotron_h nano;drama3 a3b").
set -uo pipefail
out=${1:?out dir}
rounds=${2:?rounds}
shift 2
mkdir -p "$out"
cd /work/main
bins=("$@")
IFS=';' read -ra models <<< "${AB_MODELS:-nemotron_h nano;drama3 a3b}"
n=${#bins[@]}
for ((r = 0; r < rounds; ++r)); do
  for ((k = 0; k < n; ++k)); do
    bin=${bins[$(((k + r) % n))]}
    setting=
    exe=$bin
    if [[ $bin == *@* ]]; then setting=${bin%%@*}; exe=${bin#*@}; fi
    label=$(basename "$exe")${setting:+ $setting}
    for spec in "${models[@]}"; do
      read -r arch preset <<< "$spec"
      line=$(timeout 120 env $setting "$exe" bench --device cuda --arch "$arch" --preset "$preset" --random-weights \
        2>> "$out/ab_stderr.txt")
      [ -n "$line" ] && echo "{\"variant\": \"$label r$r\", \"result\": $line}" >> "$out/ab.jsonl"
    done
  done
done
[ -f "$out/ab.jsonl" ] && python3 scripts/bench_table.py "$out/ab.jsonl"
