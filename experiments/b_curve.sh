#!/bin/bash
# How much of B each band matmul loses between its block rows, against B's size, at one shape family not in
# the suite or a held-out set (m = k = 1920; B = 4 k n bytes from 23 to 56 MiB): experiments/address_sweep.sh
# with a few allocations per size (the median over allocations is the curve's point). The model reads
# TILE 16's curve (perfmodel.b_curve); the others are recorded beside it.
#   source .gpu/setup.sh && OUT=$OUT bash experiments/b_curve.sh
set -u
here=$(dirname "$0")
sizes() { local step=$1 from=$2 to=$3 s=""; for ((n = from; n <= to; n += step)); do s+="1920,$n,1920 "; done; echo "$s"; }
SPECS="matmul.tiled:tile=16:$(sizes 128 3200 7680):;"
SPECS+="matmul.tiled:tile=32:$(sizes 256 3328 7680):;"
SPECS+="matmul.coarsened:tile=32,coarse=2:$(sizes 256 3328 7680):;"
SPECS+="matmul.coarsened:tile=32,coarse=8:$(sizes 256 3328 7680):"
SPECS="$SPECS" ALLOCS=${ALLOCS:-4} FOLDER=b_curve bash "$here/address_sweep.sh"
