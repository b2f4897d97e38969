#!/usr/bin/env bash
# One fresh run of every benchmark, in one go, for the README's benchmark table (issue 12): prints the machine,
# its load before and after, and each script's table; the whole log goes to out/benchmarks/LATEST.txt, or with
# --write-shipped to the committed benchmarks/results/LATEST.txt (the README's table quotes that file).
# Run it on a quiet machine (nothing else running): the figures are wall and CPU time.
set -o pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
DIR=out/benchmarks
case "${1:-}" in
  --write-shipped) DIR=benchmarks/results ;;
  "") ;;
  *) echo "usage: benchmarks/run_all.sh [--write-shipped]" >&2; exit 2 ;;
esac
mkdir -p "$DIR"
LOG=$DIR/LATEST.txt
{
  echo "# launchsim benchmarks, $(date -u +%Y-%m-%dT%H:%M:%SZ), commit $(git rev-parse --short HEAD)"
  echo "machine: $($PY -c "import sys; sys.path.insert(0, 'benchmarks'); import machine, os; print(machine.cpu_name(), os.cpu_count(), 'cores')"), Python $($PY -c 'import platform; print(platform.python_version())')"
  echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
  for cmd in "bench_targets.py" "bench_engine.py --repeats 3" "bench_sweep.py" "bench_optimizer.py --repeats 1" \
             "bench_serve.py --runs 1"; do
    echo; echo "## python benchmarks/$cmd"
    $PY benchmarks/$cmd 2>&1 | sed 's/.*\r//'; echo "(exit ${PIPESTATUS[0]})"
  done
  echo; echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
} 2>&1 | tee $LOG.tmp
mv $LOG.tmp $LOG
