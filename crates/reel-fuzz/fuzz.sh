#!/usr/bin/env bash
# The fuzz targets of reel-fuzz under libFuzzer, on the stable toolchain (docs/fuzzing.md).
#
#   fuzz.sh build                  build every target with coverage instrumentation
#   fuzz.sh run SECONDS [TARGET..] run each target (all by default) for SECONDS, one after
#                                  another, from its corpus; exits 1 at the first crash
#   fuzz.sh campaign SECONDS       run every target at once for SECONDS (nice 19), new
#                                  inputs kept in $REEL_FUZZ_WORK/<target>, logs beside them
#   fuzz.sh minimize [TARGET..]    merge corpus/<target> and the campaign's inputs into a
#                                  small set with the same edges covered, as the new corpus
#                                  (the crash-* inputs stay as they are)
#
# The corpora in crates/reel-fuzz/corpus/ are only read by `run` (new inputs go to a
# scratch folder); a crash leaves its input as $REEL_FUZZ_WORK/<target>-crash-<sha1>.
# Coverage comes from LLVM's SanitizerCoverage (`-C passes=sancov-module`, stable rustc)
# and libFuzzer (the libfuzzer-sys crate builds it; needs a C++ compiler). The build goes
# to its own target folder: instrumented code must not mix with the normal build.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cd "$root"
export CARGO_TARGET_DIR=${REEL_FUZZ_TARGET_DIR:-$root/target/fuzz}
work=${REEL_FUZZ_WORK:-$root/target/fuzz-work}
host=$(rustc -vV | sed -n 's/^host: //p')
bin=$CARGO_TARGET_DIR/$host/release
targets() { ls "$here/corpus"; }

build() {
    # --target keeps the instrumentation off build scripts and proc macros. Release with
    # debug assertions and overflow checks: an overflow is a finding too.
    RUSTFLAGS="-C passes=sancov-module -C llvm-args=-sanitizer-coverage-level=4 \
-C llvm-args=-sanitizer-coverage-inline-8bit-counters -C llvm-args=-sanitizer-coverage-pc-table \
-C llvm-args=-sanitizer-coverage-trace-compares" \
    CARGO_PROFILE_RELEASE_DEBUG_ASSERTIONS=true \
    CARGO_PROFILE_RELEASE_OVERFLOW_CHECKS=true \
    CARGO_PROFILE_RELEASE_LTO=false \
    CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16 \
    CARGO_PROFILE_RELEASE_DEBUG=line-tables-only \
    CARGO_INCREMENTAL=0 \
        cargo build --locked --release --target "$host" -p reel-fuzz --features libfuzzer --bins
}

# One target for $1 seconds, from its corpus (read only) and $work/<target>; more
# libFuzzer flags after.
fuzz_one() {
    local secs=$1 t=$2
    shift 2
    mkdir -p "$work/$t"
    "$bin/$t" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
        -print_final_stats=1 -artifact_prefix="$work/$t-" "$@" "$work/$t" "$here/corpus/$t"
}

case "${1:-}" in
build)
    build
    ;;
run)
    secs=${2:?seconds}
    shift 2
    [ $# -gt 0 ] || set -- $(targets)
    for t in "$@"; do
        echo "== fuzz $t for ${secs}s"
        mkdir -p "$work"
        if ! fuzz_one "$secs" "$t" >"$work/run-$t.log" 2>&1; then
            tail -n 40 "$work/run-$t.log"
            echo "fuzz target $t crashed; input: $(ls "$work/$t"-* 2>/dev/null)" >&2
            exit 1
        fi
        grep -E '^stat::(number_of_executed_units|new_units_added)|^Done ' "$work/run-$t.log" || true
    done
    ;;
campaign)
    secs=${2:?seconds}
    mkdir -p "$work"
    pids=()
    # A crash does not end a target's campaign: libFuzzer's fork mode keeps going and
    # leaves each crashing input as $REEL_FUZZ_WORK/<target>-crash-<sha1>.
    for t in $(targets); do
        nice -n 19 bash -c "$(declare -f fuzz_one); bin=$bin work=$work here=$here \
            fuzz_one $secs $t -fork=1 -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1" \
            >"$work/campaign-$t.log" 2>&1 &
        pids+=($!)
    done
    status=0
    for p in "${pids[@]}"; do wait "$p" || status=1; done
    exit $status
    ;;
minimize)
    shift
    [ $# -gt 0 ] || set -- $(targets)
    for t in "$@"; do
        fresh=$(mktemp -d)
        mkdir -p "$work/$t"
        # A set cover of the edges (not of their hit counts): a few hundred files a target.
        "$bin/$t" -set_cover_merge=1 -use_counters=0 -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
            "$fresh" "$here/corpus/$t" "$work/$t" >"$work/merge-$t.log" 2>&1
        # The inputs that found bugs stay, under their names.
        cp "$here/corpus/$t"/crash-* "$fresh"/ 2>/dev/null || true
        rm -rf "$here/corpus/$t"
        mv "$fresh" "$here/corpus/$t"
        chmod 755 "$here/corpus/$t"
        echo "$t: $(ls "$here/corpus/$t" | wc -l) files"
    done
    ;;
*)
    sed -n '2,19p' "$0" >&2
    exit 64
    ;;
esac
