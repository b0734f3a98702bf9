#!/usr/bin/env bash
# Whether a change leaves runs alone: the same short runs (30 steps, every task and the variants
# with their own code paths) trained from another checkout and from this one, in fresh folders;
# prints each run's config hashes on both sides and whether metrics.csv, losses.csv and summary.json are equal
# byte for byte. Usage: bash scripts/compare_tables.sh ../base-checkout   (about 3 minutes)
set -euo pipefail
BASE=$(cd "$1" && pwd)
HERE=$(cd "$(dirname "$0")/.." && pwd)
PY="$HERE/.venv/bin/python"
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
# The base's own code and configs: its sinkexp/ with configs/ as sinkexp/conf (this checkout's
# editable install would otherwise serve sinkexp.conf from here).
mkdir -p "$OUT/base-src"
cp -r "$BASE/sinkexp" "$OUT/base-src/"
rm -rf "$OUT/base-src/sinkexp/conf"
ln -s "$BASE/configs" "$OUT/base-src/sinkexp/conf"
runs=("task=trigger" "task=damping" "task=broadcast" "task=backcopy" "task=lm" "task=trigger train.optim=sgd"
      "task=backcopy train.replicas=2" "task=trigger train.optim=sgd train.replicas=2" "task=trigger attn=sink_kv"
      "task=damping attn=gated" "task=trigger model.n_registers=2" "task=broadcast attn=relu")
for side in base here; do
  src=$([ "$side" = base ] && echo "$OUT/base-src" || echo "$HERE")
  for i in "${!runs[@]}"; do
    # shellcheck disable=SC2086  # each run's overrides are words
    (cd "$OUT" && PYTHONPATH="$src" XDG_CACHE_HOME="$OUT/cache-$side" "$PY" -m sinkexp.cli train ${runs[$i]} \
      train.steps=30 eval.every=10 threads=1 "hydra.run.dir=$OUT/$side/r$i/\${sinkexp_config_hash:}" \
      > "$OUT/$side.r$i.log" 2>&1) || { echo "${runs[$i]}: failed on the $side side ($OUT/$side.r$i.log)"; exit 1; }
  done
done
status=0
for i in "${!runs[@]}"; do
  hashes() { ls "$OUT/$1/r$i" | tr '\n' ' '; }
  same=equal
  for run in "$OUT/base/r$i"/*; do
    for table in metrics.csv losses.csv summary.json; do
      cmp -s "$run/$table" "$OUT/here/r$i/$(basename "$run")/$table" || { same=DIFFERENT; status=1; }
    done
  done
  [ "$(hashes base)" = "$(hashes here)" ] || { same="$same, hashes DIFFERENT"; status=1; }
  echo "${runs[$i]}: base [$(hashes base)] here [$(hashes here)] tables $same"
done
exit $status
