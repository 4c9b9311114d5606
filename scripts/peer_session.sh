#!/usr/bin/env bash
# The figures a closing note gives, from one call through scripts/gpu_prebuilt.sh: build/duet on
# `nano` and `a3b` twice around the transformers peers (bench/peer_transformers.py, the Drama 3 peer
# in --mode auto), then both again at --ctx 4096. One JSON line a run in OUT/final.jsonl, the peer's
# versions in OUT/versions.txt, then a table (scripts/bench_table.py).
# Usage: scripts/peer_session.sh OUT (about three minutes: give gpu_prebuilt.sh STEP_SECONDS=600)
set -uo pipefail
out=${1:?out dir}
mkdir -p "$out"
cd /work/main
# The peer's versions as Python sees them (a bare `pip` may be absent or another interpreter's).
python3 -c 'import torch, transformers; print("torch", torch.__version__); print("transformers", transformers.__version__)' \
  > "$out/versions.txt" 2>> "$out/peer_stderr.txt"
duet() {
  timeout 120 ./build/duet bench --device cuda --arch "$1" --preset "$2" --random-weights "${@:3}" 2>> "$out/stderr.txt"
}
peer() { timeout 300 python3 bench/peer_transformers.py "$@" 2>> "$out/peer_stderr.txt"; }
for spec in "nemotron_h nano" "drama3 a3b"; do duet $spec >> "$out/final.jsonl"; done
peer --arch nemotron_h --preset nano >> "$out/final.jsonl"
peer --arch drama3 --preset a3b --mode auto >> "$out/final.jsonl"
for spec in "nemotron_h nano" "drama3 a3b"; do duet $spec >> "$out/final.jsonl"; done
for spec in "nemotron_h nano" "drama3 a3b"; do duet $spec --ctx 4096 >> "$out/final.jsonl"; done
cat "$out/versions.txt"
python3 scripts/bench_table.py "$out/final.jsonl"
