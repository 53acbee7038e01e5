#!/usr/bin/env bash
# The recipes' GPU figures in one go on a machine with an NVIDIA GPU (about 8-12 minutes on an
# H100, the gpt2-small pair included): prints them and keeps a copy in bench/out/.
#
#   bench/gpu_benchmark.sh [PATH/cifar10-jpeg.tar.gz] [more gpu_benchmark.py options]
set -euo pipefail
cd "$(dirname "$0")/.."
data="${1:-../shared/data/cifar10-jpeg.tar.gz}"
if [ $# -gt 0 ]; then shift; fi
python="${PYTHON:-.venv/bin/python}"
mkdir -p bench/out
out="bench/out/gpu_benchmark-$(date -u +%Y%m%dT%H%M%SZ).txt"
if command -v nvidia-smi >/dev/null; then
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out"
fi
"$python" bench/gpu_benchmark.py --data "$data" "$@" 2>&1 | tee -a "$out"
echo "figures kept in $out"
