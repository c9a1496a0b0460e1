#!/usr/bin/env bash
# Installs augsbert (and the dependencies pyproject.toml pins) into the new conda environment.
# Snakemake runs this once per environment, from the directory it runs in. The source is
# $AUGSBERT_SOURCE (a clone, a wheel or a pip URL such as git+https://...@<tag>) or else the
# git checkout that directory belongs to.
set -euo pipefail
source="${AUGSBERT_SOURCE:-$(git rev-parse --show-toplevel 2>/dev/null || true)}"
if [ -z "$source" ]; then
  echo "augsbert: set AUGSBERT_SOURCE to the augsbert clone, wheel or pip URL to install into the conda environment" >&2
  exit 1
fi
python -m pip install --no-input "$source"
