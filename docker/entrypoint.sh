#!/bin/bash
# Entry point of the sol-execbench images: checks the FlashInfer trace folder, locks GPU clocks
# only when asked and permitted, runs the command, and restores the clocks on exit.
#
# SOL_EXECBENCH_ENTRYPOINT_LOCK_CLOCKS=1 asks for locking at SOL_EXECBENCH_GPU_CLK_MHZ (and
# SOL_EXECBENCH_DRAM_CLK_MHZ where the tool can). Locking changes the GPU for every user of the
# machine: never ask for it on a shared machine. It is refused when another process computes on
# the GPU, or when the clock tool may not be run (sudo without a password, or root).
set -uo pipefail

FLASHINFER_TRACE_DIR="${FLASHINFER_TRACE_DIR:-/sol-execbench/data/flashinfer-trace}"
export FLASHINFER_TRACE_DIR
export SOL_EXECBENCH_CLOCKS_LOCKED=0
LOCKED_WITH=""

if [ ! -d "${FLASHINFER_TRACE_DIR}" ]; then
    echo "ERROR: FLASHINFER_TRACE_DIR (${FLASHINFER_TRACE_DIR}) is not a folder in the container." >&2
    echo "       Mount the flashinfer-trace data there (scripts/run_docker.sh mounts the repository at" >&2
    echo "       /sol-execbench, so data/flashinfer-trace of the repository; an empty folder will do for" >&2
    echo "       problems without safetensors inputs), or set FLASHINFER_TRACE_DIR to a mounted folder." >&2
    exit 1
fi

as_root() {
    if [ "$(id -u)" = "0" ]; then "$@"; else sudo -n "$@"; fi
}

lock_nvidia() {
    local others
    others="$(nvidia-smi --query-compute-apps=pid --format=csv,noheader 2>/dev/null | grep -c . || true)"
    if [ "${others}" != "0" ]; then
        echo "WARNING: ${others} other process(es) compute on the GPU: not locking clocks (shared GPU)" >&2
        return 1
    fi
    as_root nvidia-smi -lgc "${SOL_EXECBENCH_GPU_CLK_MHZ},${SOL_EXECBENCH_GPU_CLK_MHZ}" >/dev/null || return 1
    LOCKED_WITH=nvidia
    if [ -n "${SOL_EXECBENCH_DRAM_CLK_MHZ:-}" ]; then
        as_root nvidia-smi -lmc "${SOL_EXECBENCH_DRAM_CLK_MHZ},${SOL_EXECBENCH_DRAM_CLK_MHZ}" >/dev/null || return 1
    fi
}

lock_amd() {
    local smi=/opt/rocm/bin/rocm-smi
    as_root "${smi}" --setperfdeterminism "${SOL_EXECBENCH_GPU_CLK_MHZ}" >/dev/null || return 1
    LOCKED_WITH=amd
}

lock_clocks() {
    [ "${SOL_EXECBENCH_ENTRYPOINT_LOCK_CLOCKS:-0}" = "1" ] || return 0
    if [ -z "${SOL_EXECBENCH_GPU_CLK_MHZ:-}" ]; then
        echo "WARNING: clock locking asked for without SOL_EXECBENCH_GPU_CLK_MHZ: proceeding unlocked" >&2
        return 0
    fi
    local ok=1
    if command -v nvidia-smi >/dev/null 2>&1; then
        lock_nvidia && ok=0
    elif [ -x /opt/rocm/bin/rocm-smi ]; then
        lock_amd && ok=0
    fi
    if [ "${ok}" = "0" ]; then
        export SOL_EXECBENCH_CLOCKS_LOCKED=1
        echo "Clocks locked at ${SOL_EXECBENCH_GPU_CLK_MHZ} MHz" >&2
    else
        echo "WARNING: clock locking failed or not permitted: proceeding unlocked" >&2
    fi
}

restore_clocks() {
    case "${LOCKED_WITH}" in
        nvidia) as_root nvidia-smi -rgc >/dev/null; [ -n "${SOL_EXECBENCH_DRAM_CLK_MHZ:-}" ] && as_root nvidia-smi -rmc >/dev/null ;;
        amd) as_root /opt/rocm/bin/rocm-smi --resetperfdeterminism >/dev/null ;;
    esac
    LOCKED_WITH=""
}

trap restore_clocks EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
lock_clocks
if [ "$#" -eq 0 ]; then
    set -- bash
fi
"$@"
