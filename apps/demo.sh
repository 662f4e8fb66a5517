#!/usr/bin/env bash
# The demo: a real training run on a small built-in synthetic data set. Filled in with the trainer.
set -euo pipefail
echo "demo: the trainer is not built yet" >&2
exit 1
