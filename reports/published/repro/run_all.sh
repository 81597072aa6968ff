#!/usr/bin/env bash
# Runs every repro script in this folder (each standalone: torch and the library only)
# and prints a summary. Each script exits 1 if its finding reproduces, 0 if it does not,
# 2 if this machine cannot run it (no GPU, the library missing or failing to import).
#
#   bash reports/published/repro/run_all.sh            # every script
#   bash reports/published/repro/run_all.sh flag_gems  # those whose name starts so
#   PYTHON=python3.12 LOG_DIR=repro-logs bash reports/published/repro/run_all.sh
#
# Exit status: 0 when every script ran (whatever it found), 2 when one could not run.
set -u
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
python="${PYTHON:-python3}"
log_dir="${LOG_DIR:-}"
[ -n "$log_dir" ] && mkdir -p "$log_dir"

"$python" - <<'EOF'
import platform
from importlib import metadata
try:
    import torch
    gpu = torch.cuda.get_device_name() if torch.cuda.is_available() else "no CUDA device"
    print(f"python {platform.python_version()}, torch {torch.__version__}, GPU: {gpu}")
except Exception as exc:  # noqa: BLE001
    print(f"torch: {exc}")
for dist in ("triton", "liger-kernel", "flag-gems"):
    try:
        print(f"{dist} {metadata.version(dist)}")
    except metadata.PackageNotFoundError:
        print(f"{dist}: not installed")
EOF

reproduced=() not_reproduced=() not_run=()
for script in "$here"/${1:-}*.py; do
    name="$(basename "$script" .py)"
    echo
    echo "=== $name"
    if [ -n "$log_dir" ]; then
        "$python" "$script" 2>&1 | tee "$log_dir/$name.log"
        status=${PIPESTATUS[0]}
    else
        "$python" "$script" 2>&1
        status=$?
    fi
    case $status in
        1) reproduced+=("$name") ;;
        0) not_reproduced+=("$name") ;;
        *) not_run+=("$name (exit $status)") ;;
    esac
done

echo
echo "=== summary: ${#reproduced[@]} reproduced, ${#not_reproduced[@]} not reproduced, ${#not_run[@]} could not run"
for n in ${reproduced[@]+"${reproduced[@]}"}; do echo "  REPRODUCED      $n"; done
for n in ${not_reproduced[@]+"${not_reproduced[@]}"}; do echo "  NOT REPRODUCED  $n"; done
for n in ${not_run[@]+"${not_run[@]}"}; do echo "  COULD NOT RUN   $n"; done
[ ${#not_run[@]} -eq 0 ] || exit 2
exit 0
