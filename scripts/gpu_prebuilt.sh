#!/usr/bin/env bash
# Runs binaries built on a developer machine (carried in BIN_DIR with the shared libraries they need
# as .deb files in .debs/) on the GPU machine, so a device call spends no time compiling. The test
# binaries name the fixtures and the duet binary by the paths of the machine that built them
# (/work/main/build, /work/shared/fixtures); this script lays those paths out here.
# Usage: scripts/gpu_prebuilt.sh BIN_DIR FIXTURES_DIR LOG_DIR [CMD...]: the commands run in order,
# each with `duet` and `duet_cuda_tests` in build/ as on the building machine and $REPO naming the
# checkout (where other binaries carried in BIN_DIR stay).
set -uo pipefail
bin=$(realpath "${1:?binary dir}")
fixtures=$(realpath "${2:?fixtures dir}")
logs=$(realpath -m "${3:?log dir}")
shift 3
mkdir -p "$logs" /tmp/duet-libs /work/main/build /work/shared
for f in .debs/*.deb; do dpkg -x "$f" /tmp/duet-libs; done
export LD_LIBRARY_PATH=/tmp/duet-libs/usr/lib/x86_64-linux-gnu:/usr/local/cuda/lib64:/usr/local/cuda/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
cp "$bin"/duet "$bin"/duet_cuda_tests /work/main/build/
[ -e /work/shared/fixtures ] || ln -s "$fixtures" /work/shared/fixtures
export REPO=$(pwd)  # for the commands: the carried checkout
repo=$REPO
cd /work/main
ln -sfn "$repo/scripts" scripts
ln -sfn "$repo/bench" bench
for cmd in "$@"; do
  echo "== $cmd" >> "$logs/commands.txt"
  bash -c "$cmd" >> "$logs/commands.txt" 2>&1
  echo "exit $?" >> "$logs/commands.txt"
done
