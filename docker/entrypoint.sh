#!/usr/bin/env bash
# The advisor image's entry point, for all three services:
#   SageMaker starts `<image> train`          -> python -m advisor.train (reads /opt/ml)
#   Vertex AI / Azure ML give a command       -> it runs as given (python -m advisor.train ...)
#   options only (`--model fcn ...`)          -> python -m advisor.train with those options
set -euo pipefail

if [[ $# -eq 0 ]]; then
    exec python -m advisor.train --help
fi
case "$1" in
    train)
        shift
        exec python -m advisor.train train "$@"
        ;;
    -*)
        exec python -m advisor.train "$@"
        ;;
    *)
        exec "$@"
        ;;
esac
