// The one header a frugal user includes: the public C++ API. It reaches only public headers (no
// codec, thresholder, kernel, MPI, ZeroMQ, oneDNN, TBB, CUDA, JSON or fmt header), which
// tests/install/check_pkg_config.sh checks against the installed include folder.
#pragma once

// The ground: tensors, batches, errors, rng, parameters, placement, layers, models, metrics, and
// the compute backends as handles (core/device.h: find_backend, resolve_device, set_threads; their
// ops are internal).
#include "core/device.h"
#include "core/binary_metrics.h"
#include "core/check.h"
#include "core/dataset.h"
#include "core/metrics.h"
#include "core/model.h"
#include "core/placement.h"
#include "core/propensity.h"
#include "core/ranking_metrics.h"
#include "core/rng.h"

// Runs of several ranks: frugal::comm::init starts the communicator from the environment or flags
// (mpirun, `frugal launch`, or one rank); make_local_communicators runs ranks as threads.
#include "comm/init.h"
#include "comm/local_communicator.h"

// Data sets: readers, generators, splits, statistics, reference rankers, the batch loader.
#include "core/data/batch_loader.h"
#include "core/data/ctr_format.h"
#include "core/data/ctr_reader.h"
#include "core/data/ctr_stats.h"
#include "core/data/data_format.h"
#include "core/data/dataset_split.h"
#include "core/data/dataset_stats.h"
#include "core/data/dictd_file.h"
#include "core/data/gcide_builder.h"
#include "core/data/idx_file.h"
#include "core/data/label_counts_file.h"
#include "core/data/reference_rankers.h"
#include "core/data/synth_ctr.h"
#include "core/data/synth_xmc.h"
#include "core/data/xmc_file.h"
#include "core/data/xmc_reader.h"

// The run API: every option of `frugal train` (TrainConfig) and the run itself (frugal::run::train),
// with the command line's defaults, checks and records.
#include "train/run/run.h"
#include "train/run/train_config.h"
#include "train/run/train_options.h"

// Training: the trainer, optimizers and regularization, checkpoints.
#include "core/optim/adagrad.h"
#include "core/optim/adam.h"
#include "train/checkpoint.h"
#include "train/early_stopping.h"
#include "train/ensemble_choice.h"
#include "train/served_checkpoint.h"
#include "train/gradient_clipping.h"
#include "train/input_dropout.h"
#include "core/optim/lr_schedule.h"
#include "core/optim/optimizer.h"
#include "core/optim/sgd.h"
#include "train/trainer.h"

// Layers, networks and the Predictor.
#include "layers/dense.h"
#include "train/dlrm_checkpoint.h"
#include "train/dlrm_trainer.h"
#include "layers/lsh/hash_family.h"
#include "layers/mlp_network.h"
#include "layers/network_spec.h"
#include "train/predictor.h"
#include "layers/softmax_output.h"
#include "layers/sparse_dense.h"
#include "layers/xmc_network.h"
