# The data sets and models of the DCT benchmarks, sourced by bench/dct/run.sh and sweep.sh (which
# define FRUGAL and run first): XMC, GCIDE and FM, dct_data and args.
#   xmc     synthetic XMC 20k features x 5k labels (build/demo-data; LSH network, hidden 128),
#   xmc512  the same data and network with hidden 512 (DCT-MP's XMC case: a slice of 128 or more per rank),
#   fmnist  Fashion-MNIST, MLP 784-1024-1024-10 (exact softmax, every layer sliced over M ranks),
#   gcide   GCIDE reverse dictionary, headwords with >= 5 definitions (~4.6k labels; hidden 512,
#           exact softmax, lr 0.005 as in bench/data).
XMC=build/demo-data
GCIDE=.bench/gcide-min5
FM=/usr/share/datasets/fashion-mnist

# dct_data [gcide]: makes what is missing: the synthetic XMC set (when build/demo-data has none)
# and, when asked, GCIDE.
dct_data() {
  if [ ! -f "$XMC/train.txt" ]; then
    XMC=.bench/xmc20k
    [ -f "$XMC/train.txt" ] || run "$FRUGAL" data synth-xmc --features 20000 --labels 5000 --train 20000 --test 2000 \
      --nnz 75 --labels-per-point 5 --seed 1 --out "$XMC"
  fi
  if [ "${1:-}" = gcide ] && [ ! -f "$GCIDE/train.txt" ]; then
    run "$FRUGAL" data gcide --out "$GCIDE" --seed 1 --min-label-points 5
  fi
}

# The model and data flags of each set (everything but the parallel scheme and the epochs).
args() {
  case "$1" in
    xmc) echo "--train $XMC/train.txt --test $XMC/test.txt --hidden 128 --sampler lsh --batch 128 --lr 1e-3" ;;
    xmc512) echo "--train $XMC/train.txt --test $XMC/test.txt --hidden 512 --sampler lsh --batch 128 --lr 1e-3" ;;
    fmnist) echo "--format idx --train $FM/train --test $FM/t10k --layers 1024,1024 --batch 128 --lr 1e-3" ;;
    gcide) echo "--train $GCIDE/train.txt --test $GCIDE/test.txt --hidden 512 --sampler exact --batch 128 --lr 0.005" ;;
  esac
}
