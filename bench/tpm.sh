#!/usr/bin/env bash
# make bench's TPM figures (called by bench/run.sh; runs alone too): `security unlock-keychain` of a
# keychain sealed to a TPM against one that is not, both at this machine's tuned scrypt cost, on a
# swtpm started here on 127.0.0.1 (as Tests/tpm does) and stopped at the end; and the rate of
# wrong passwords the TPM allows: tries until its dictionary-attack lockout, then one per
# interval. Writes WORK/tpm-unlock.json (timing.py's medians) and WORK/tpm-lockout.txt.
#
#   bench/tpm.sh BIN WORK      BIN: security and keychain-tpm-helper; BENCH_TPM_ROUNDS (default 15)
set -euo pipefail
bin=$1 work=$2
here=$(cd "$(dirname "$0")" && pwd)
rounds=${BENCH_TPM_ROUNDS:-15}
for tool in swtpm tpm2_getcap; do
    command -v "$tool" >/dev/null || { echo "bench/tpm.sh: $tool is missing (apt-get install swtpm tpm2-tools)" >&2; exit 1; }
done

# For free_port only: sourcing it defines the suites' functions and sets their counters, nothing
# else, and none of its names is one this script uses.
# shellcheck source=Tests/lib.sh
. "$here/../Tests/lib.sh"
port=$(free_port)
state=$(mktemp -d "$work/tpm-XXXXXX")
timeout 1800 swtpm socket --tpm2 --server type=tcp,port="$port",bindaddr=127.0.0.1 \
    --ctrl type=tcp,port=$((port + 1)),bindaddr=127.0.0.1 --tpmstate dir="$state/state" \
    --flags not-need-init,startup-clear > "$state/swtpm.log" 2>&1 &
swtpm_pid=$!
cleanup() {
    for kc in "$state"/*.keychain-db; do [ -e "$kc" ] && "$bin/security" delete-keychain "$kc" >/dev/null 2>&1; done
    kill "$swtpm_pid" 2>/dev/null
    wait "$swtpm_pid" 2>/dev/null
    rm -rf "$state"
}
trap cleanup EXIT
mkdir -p "$state/state"
export KEYCHAIN_TPM_TCTI="swtpm:host=127.0.0.1,port=$port"
for _ in $(seq 1 100); do
    TPM2TOOLS_TCTI=$KEYCHAIN_TPM_TCTI tpm2_getcap properties-fixed >/dev/null 2>&1 && break
    sleep 0.1
done

# Two keychains with the same (tuned) KDF cost: one left to its password, one sealed to the TPM.
plain=$state/plain.keychain-db sealed=$state/sealed.keychain-db
printf 'bench password\n' | "$bin/security" create-keychain "$plain" >/dev/null
printf 'bench password\n' | "$bin/security" create-keychain "$sealed" >/dev/null
printf 'bench password\n' | "$bin/security" tpm-enroll "$sealed" >/dev/null 2>&1
"$bin/security" tpm-status "$sealed" | grep -q '^sealed: *yes, to this TPM'

# Each run is a whole `security unlock-keychain` (scrypt, and for the sealed one the TPM's unseal
# and its rollback counter through keychain-tpm-helper), the way a user or the PAM module pays it.
python3 - "$state/spec.json" "$bin" "$plain" "$sealed" "$rounds" <<'PY'
import json, sys
spec, bin, plain, sealed, rounds = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
case = lambda kc: {"argv": [bin + "/security", "unlock-keychain", kc], "stdin": "bench password\n", "expect": ""}
json.dump({"rounds": rounds, "warmup": 2, "cases": {"unlock/plain": case(plain), "unlock/sealed": case(sealed)}}, open(spec, "w"))
PY
python3 "$here/timing.py" "$state/spec.json" > "$work/tpm-unlock.json"

# The wrong-password rate: tries until the TPM refuses every password (errSecQuotaExceeded, 244),
# with the TPM's own lockout settings (swtpm's defaults; a real TPM's are its maker's or its owner's).
props=$(TPM2TOOLS_TCTI=$KEYCHAIN_TPM_TCTI tpm2_getcap properties-variable)
maximum=$(sed -n 's/^TPM2_PT_MAX_AUTH_FAIL: *//p' <<< "$props")
interval=$(sed -n 's/^TPM2_PT_LOCKOUT_INTERVAL: *//p' <<< "$props")
tries=0
while [ "$tries" -lt 100 ]; do
    status=0
    printf 'wrong %s\n' "$tries" | "$bin/security" unlock-keychain "$sealed" >/dev/null 2>&1 || status=$?
    [ "$status" = 244 ] && break
    [ "$status" = 51 ] || { echo "bench/tpm.sh: a wrong password gave status $status" >&2; exit 1; }
    tries=$((tries + 1))
done
[ "$tries" -lt 100 ] || { echo "bench/tpm.sh: the TPM never locked out" >&2; exit 1; }
printf 'tries %d\nmaximum %d\ninterval %d\n' "$tries" "$((maximum))" "$((interval))" > "$work/tpm-lockout.txt"
