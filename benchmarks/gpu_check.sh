#!/usr/bin/env bash
# The GPU half of the project in one call, on a machine with an NVIDIA GPU and torch installed:
#
#   bash benchmarks/gpu_check.sh OUT_DIR SECONDS [STEP ...] [-- BACKGROUND_STEP ...]
#
# Steps (all of them, in this order, when none is named):
#   env        the GPU, its clocks, nvcc, torch, Triton
#   standalone the CUDA kernels' own torch-free tests, then under compute-sanitizer memcheck and racecheck
#   pytest     pytest -m gpu: the CUDA and Triton kernels through torch, forward and backward
#   profile    nox --no-venv -s profile_examples -- --device cuda: examples, timing pass, sweeps, benchmark
#              (or its two halves: `examples` or examples:NAME,NAME, and `sweeps` or sweeps:NAME,NAME)
#   ring       ring attention on NCCL beside torch's own context_parallel (benchmarks/context_parallel.py)
#   diagnose   attn-profile diagnose on every trace of the GPU's set
#   kernels    our CUDA and Triton kernels against SDPA flash, forward and backward (do_bench)
#
# Steps after `--` run in the background, beside the others from the start (those that do not need a
# quiet GPU: the standalone tests and their sanitizers). Every step runs under what is left of
# SECONDS (a step that runs out is killed and the next one is skipped, so the call ends in time) and
# logs to OUT_DIR/logs/<step>.log; a step that fails does not stop the others. At the end:
# OUT_DIR/steps.txt (a line a step: exit status and seconds), OUT_DIR/logs.tar.gz, and
# OUT_DIR/profiles.tar.gz (the GPU's profile set, profiles/<gpu>/).
#
# On a machine with torch but no network, bring the two packages the trace half and the main job need
# that such an image may lack, as wheels downloaded elsewhere (orjson; nox and what it needs), then:
#   pip install --no-index --no-deps --target /tmp/site wheels/*.whl && export PYTHONPATH=/tmp/site
#   bash benchmarks/gpu_check.sh /tmp/gc 540 env examples kernels sweeps pytest -- standalone ring
set -u
out=${1:?usage: gpu_check.sh OUT_DIR SECONDS [STEP ...]}
budget=${2:?usage: gpu_check.sh OUT_DIR SECONDS [STEP ...]}
shift 2
steps=() background=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do steps+=("$1"); shift; done
[ $# -gt 0 ] && shift && background=("$@")
[ ${#steps[@]} -gt 0 ] || steps=(env standalone pytest profile ring diagnose kernels)
cd "$(dirname "$0")/.."
mkdir -p "$out/logs"
deadline=$((SECONDS + budget))
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
build=$(mktemp -d)

left() { echo $((deadline - SECONDS)); }

# run NAME LIMIT CMD...: CMD under min(LIMIT, what is left), its output in logs/NAME.log.
run() {
    local name=$1 limit=$2 start=$SECONDS rc
    shift 2
    [ "$(left)" -lt "$limit" ] && limit=$(left)
    if [ "$limit" -lt 10 ]; then
        echo "$name skipped: no time left" | tee -a "$out/steps.txt"
        return 0
    fi
    echo "== $name (limit ${limit}s)"
    timeout --kill-after=5 "$limit" "$@" >>"$out/logs/$name.log" 2>&1
    rc=$?
    echo "$name rc=$rc $((SECONDS - start))s" | tee -a "$out/steps.txt"
    tail -n 4 "$out/logs/$name.log"
}

step_env() {
    run env 60 bash -c 'nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,memory.total \
        --format=csv; nvcc --version | tail -2; python -c "import torch, triton; \
        print(torch.__version__, torch.version.cuda, triton.__version__, torch.cuda.get_device_name())"'
}

step_standalone() {
    local arch
    arch=$(python -c "import torch; print(''.join(map(str, torch.cuda.get_device_capability())))")
    local nv=(nvcc -std=c++17 -O3 -lineinfo -gencode "arch=compute_$arch,code=sm_$arch" -Icsrc)
    for t in csrc/cuda/test_flash_*.cu; do
        local name
        name=$(basename "$t" .cu)
        local kernels=(csrc/cuda/flash_fwd.cu)
        [ -f csrc/cuda/flash_bwd.cu ] && kernels+=(csrc/cuda/flash_bwd.cu)
        run "build-$name" 240 "${nv[@]}" "$t" "${kernels[@]}" -o "$build/$name" || continue
        [ -x "$build/$name" ] || continue
        run "$name" 120 "$build/$name"
        run "memcheck-$name" 180 compute-sanitizer --tool memcheck --error-exitcode 1 "$build/$name"
        run "racecheck-$name" 180 compute-sanitizer --tool racecheck --error-exitcode 1 "$build/$name"
    done
}

step_pytest() {
    run pytest 420 python -m pytest -q -p no:cacheprovider -m gpu -rs \
        tests/test_custom_cuda.py tests/test_custom_triton.py tests/test_custom_contract.py
}

step_profile() {
    run profile 900 nox --no-venv -s profile_examples -- --device cuda
}

step_examples() {
    # examples:naive,sdpa_flash runs those two; plain `examples` runs every variant's example.
    local names=${1:-}
    run "examples${names:+-${names//,/-}}" 900 \
        python -m attn.profiling example --out profiles --device cuda ${names//,/ }
}

step_sweeps() {
    # sweeps:timing_pass,benchmark runs those two; plain `sweeps` runs profile_examples' six.
    local names=${1:-timing_pass,scaling,decoding,training,benchmark,dispatch} sweep
    for sweep in ${names//,/ }; do
        run "$sweep" 600 python -m attn.profiling."$sweep" --out profiles --device cuda
    done
}

step_ring() {
    run ring 240 python benchmarks/context_parallel.py
}

step_diagnose() {
    # shellcheck disable=SC2016
    run diagnose 120 bash -c 'for t in profiles/nvidia-*/*/trace.json.gz profiles/nvidia-*/*/rank*/trace.json.gz; do
        [ -f "$t" ] || continue; echo "### $t"; python -m attn.profiling diagnose "$t" || echo "rc=$?"; done'
}

step_kernels() {
    run kernels 300 python benchmarks/gpu_kernels.py --json "$out/logs/kernels.json"
    # The standalone programs' own timing mode, where they have one (CUDA events, no torch).
    local t
    for t in "$build"/test_flash_*; do
        [ -x "$t" ] && grep -q -- "--time" "csrc/cuda/$(basename "$t").cu" &&
            run "time-$(basename "$t")" 60 "$t" --time
    done
}

do_step() {
    local name=${1%%:*} arg=""
    [ "$name" != "$1" ] && arg=${1#*:}
    "step_$name" $arg
}

if [ ${#background[@]} -gt 0 ]; then
    (for s in "${background[@]}"; do do_step "$s"; done) &
fi
for s in "${steps[@]}"; do do_step "$s"; done
wait  # the background steps are bounded by the same deadline

# What comes back: the set (traces are scrubbed by analyze) and the logs, one archive each.
tar -czf "$out/profiles.tar.gz" profiles/nvidia-* 2>/dev/null || echo "no GPU profile set written"
tar -czf "$out/logs.tar.gz" -C "$out" logs steps.txt
rm -rf "$build"
cat "$out/steps.txt"
