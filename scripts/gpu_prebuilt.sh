#!/usr/bin/env bash
# Runs binaries built on a developer machine (carried in BIN_DIR with the shared libraries they need
# as .deb files in .debs/) on the GPU machine, so a device call spends no time compiling. The test
# binaries name the fixtures and the duet binary by the paths of the machine that built them
# (/work/main/build, /work/shared/fixtures); this script lays those paths out here.
# Usage: [STEP_SECONDS=N] scripts/gpu_prebuilt.sh BIN_DIR FIXTURES_DIR LOG_DIR [CMD...]: the commands
# run in order, each with `duet` and `duet_cuda_tests` in build/ as on the building machine and $REPO
# naming the checkout (where other binaries carried in BIN_DIR stay). scripts/ab_prebuilt.sh and
# scripts/peer_session.sh are commands made for it.
# Beforehand, on the building machine (a checkout at /work/main): `cmake -S . -B build && cmake
# --build build --target duet duet_cuda_tests`, copy both binaries into BIN_DIR, and fill .debs/ with
# `apt-get download libsndfile1 libflac12 libvorbis0a libvorbisenc2 libopus0 libogg0 libmpg123-0
# libmp3lame0 libsoxr0 libutf8proc2 libpcre2-8-0 libgomp1`; BIN_DIR, .debs and FIXTURES_DIR travel.
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
if [ "$repo" != /work/main ]; then
  ln -sfn "$repo/scripts" scripts
  ln -sfn "$repo/bench" bench
fi
# Each command is stopped after STEP_SECONDS (default 300; exit 124): a kernel that hangs must not
# spend the rest of the call, and the commands after it still run.
for cmd in "$@"; do
  echo "== $cmd" >> "$logs/commands.txt"
  timeout "${STEP_SECONDS:-300}" bash -c "$cmd" >> "$logs/commands.txt" 2>&1
  echo "exit $?" >> "$logs/commands.txt"
done
