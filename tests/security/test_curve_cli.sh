#!/usr/bin/env bash
# Job secrets from the command line (docs/SECURITY.md):
#   keygen      loom keygen writes 40 Z85 characters and a newline, mode 0600; refuses to
#               replace a file without --force; --force replaces it by a new 0600 file,
#               and refuses a FIFO, a link (the victim intact) or a directory
#   bad files   missing, group/other-readable, wrong length, not Z85, a directory: a clear
#               message naming the file and a non-zero status, from loom run, loom train
#               and a node given LOOM_SECRET_FILE, before any process of a job starts
#   throw-away  loom run with no secret makes one (mode 0600 in a 0700 directory under
#               TMPDIR), gives every process the same one, and removes it when the job ends
#               well, when a process fails, and when the launcher is stopped by SIGTERM
#   given       loom run --secret FILE hands every process FILE and leaves it in place
#   insecure    loom run --insecure runs without a secret; the scheduler says so in one line
# Usage: test_curve_cli.sh LOOM_BINARY DEMO_BINARY
set -u
LOOM=${1:?usage: $0 LOOM_BINARY DEMO_BINARY}
DEMO=${2:?usage: $0 LOOM_BINARY DEMO_BINARY}
# shellcheck source-path=SCRIPTDIR source=../lib/common.sh
source "$(dirname "$0")/../lib/common.sh"
work_dir curve
LAUNCHER_PID=""
clear_env
cleanup() {
    [[ -n $LAUNCHER_PID ]] && kill -KILL "$LAUNCHER_PID" 2>/dev/null
    # Children die with the launcher (PR_SET_PDEATHSIG); the sleeping worker's group too.
    [[ -s $WORK/worker.pid ]] && kill -KILL -- "-$(<"$WORK/worker.pid")" 2>/dev/null
    wait 2>/dev/null
    remove_work
}
trap cleanup EXIT
fail_show() { show_tails 30 "$WORK"/*.out; }
# expect STATUS PATTERN COMMAND...: COMMAND exits with STATUS and its stderr matches PATTERN.
expect() {
    local want=$1 pattern=$2
    shift 2
    "$@" >"$WORK/cmd.out" 2>&1
    local rc=$?
    [[ $rc -eq $want ]] || fail "$* exited $rc, expected $want"
    grep -qE -- "$pattern" "$WORK/cmd.out" || fail "$*: no line matching '$pattern'"
}
mode() { stat -c %a "$1"; }

# --- keygen
key=$WORK/job.secret
"$LOOM" keygen "$key" || fail "keygen failed"
[[ $(mode "$key") == 600 ]] || fail "keygen wrote mode $(mode "$key"), expected 600"
z85='^[][0-9a-zA-Z.:+=^!/*?&<>(){}@%$#-]{40}$' # the 85 characters of Z85
[[ $(wc -c <"$key") -eq 41 && $(head -c 40 "$key") =~ $z85 && $(tail -c 1 "$key" | od -An -c) == *'\n' ]] ||
    fail "keygen did not write 40 Z85 characters and a newline"
before=$(<"$key")
expect 1 "already exists; left alone \(--force replaces it\)" "$LOOM" keygen "$key"
[[ $(<"$key") == "$before" ]] || fail "keygen without --force changed the file"
chmod 644 "$key"
"$LOOM" keygen --force "$key" || fail "keygen --force failed"
[[ $(<"$key") != "$before" ]] || fail "keygen --force kept the old key"
[[ $(mode "$key") == 600 ]] || fail "keygen --force left mode $(mode "$key")"
# --force replaces only a regular file of the user: a FIFO, a link (to a victim file, or
# dangling) and a directory are refused by name and left as they were, the victim intact.
mkfifo "$WORK/fifo"
expect 1 "$WORK/fifo is a FIFO, not a regular file" "$LOOM" keygen --force "$WORK/fifo"
[[ -p $WORK/fifo ]] || fail "keygen --force replaced a FIFO"
echo "not a key" >"$WORK/victim"
ln -s "$WORK/victim" "$WORK/link"
expect 1 "$WORK/link is a symbolic link, not a regular file" "$LOOM" keygen --force "$WORK/link"
[[ -L $WORK/link && $(<"$WORK/victim") == "not a key" ]] ||
    fail "keygen --force replaced a link or wrote through it"
ln -s "$WORK/nothing" "$WORK/dangling"
expect 1 "$WORK/dangling is a symbolic link" "$LOOM" keygen --force "$WORK/dangling"
[[ -L $WORK/dangling && ! -e $WORK/nothing ]] || fail "keygen --force followed a dangling link"
mkdir "$WORK/dir"
expect 1 "$WORK/dir is a directory, not a regular file" "$LOOM" keygen --force "$WORK/dir"
[[ -d $WORK/dir && -z $(ls -A "$WORK/dir") ]] || fail "keygen --force changed a directory"
! compgen -G "$key.*" >/dev/null || fail "keygen --force left a temporary file"
expect 2 "missing FILE" "$LOOM" keygen
expect 1 "cannot create $WORK/no/such/dir" "$LOOM" keygen "$WORK/no/such/dir"
"$LOOM" help keygen | grep -q -- "--force" || fail "loom help keygen lists no --force"

# --- bad secret files: each refused by loom run (before any child), loom train, and a node
printf '%s\n' "$(head -c 40 "$key")" >"$WORK/readable" && chmod 640 "$WORK/readable"
head -c 39 "$key" >"$WORK/short" && chmod 600 "$WORK/short"
printf '%040d\n' 0 | tr 0 '~' >"$WORK/notz85" && chmod 600 "$WORK/notz85"
{ head -c 20 "$key"; printf '\0'; head -c 39 "$key" | tail -c 19; echo; } >"$WORK/nul"
chmod 600 "$WORK/nul"
mkdir -m 700 "$WORK/adir"
bad=(
    "$WORK/missing|cannot open secret file $WORK/missing: No such file or directory"
    "$WORK/readable|secret file $WORK/readable has mode 0640: group or others may use it"
    "$WORK/short|secret file $WORK/short does not hold one key of 40 characters"
    "$WORK/notz85|secret file $WORK/notz85 is not a Z85-encoded key"
    "$WORK/nul|secret file $WORK/nul is not a Z85-encoded key"
    "$WORK/adir|secret file $WORK/adir is not a regular file"
)
printf 'x\n' >"$WORK/train.txt"
for case in "${bad[@]}"; do
    file=${case%%|*}
    msg=${case#*|}
    rm -f "$WORK/started"
    expect 2 "^loom run: $msg" "$LOOM" run --secret "$file" -- touch "$WORK/started"
    [[ ! -e $WORK/started ]] || fail "loom run started a process with bad secret $file"
    expect 2 "^loom run: $msg" "$LOOM" train lr --train "$WORK/train.txt" --secret "$file"
    expect 1 "^loom error: $msg.*\(LOOM_SECRET_FILE\)" \
        env LOOM_ROLE=worker LOOM_SCHEDULER=127.0.0.1:1 LOOM_SECRET_FILE="$file" "$DEMO"
done
expect 2 "--secret and --insecure exclude each other" "$LOOM" run --secret "$key" --insecure -- true
expect 2 "--secret needs a value" "$LOOM" train lr --train "$WORK/train.txt" --secret

# --- throw-away secret. Every process records the secret it was given, its mode and its
# directory's mode; TMPDIR is a directory of the test's own, so that what is left is seen.
mkdir "$WORK/tmp"
cat >"$WORK/node.sh" <<'EOF'
#!/usr/bin/env bash
f=$LOOM_SECRET_FILE
echo "$f $(stat -c %a "$f") $(stat -c %a "$(dirname "$f")")" >>"$SEEN"
case "$LOOM_ROLE:${MODE:-}" in
worker:fail) exit 1 ;;
worker:hang) echo $$ >"$WORK/worker.pid"; exec sleep 60 ;;
esac
exec "$DEMO"
EOF
chmod +x "$WORK/node.sh"
export WORK DEMO SEEN=$WORK/seen.txt
# check_seen MIN MAX: MIN to MAX processes saw one and the same secret, 0600 in a 0700
# directory, in $WORK/tmp, and nothing of it is left.
check_seen() {
    local n
    n=$(wc -l <"$SEEN")
    ((n >= $1 && n <= $2)) || fail "$n processes recorded a secret, expected $1 to $2"
    [[ $(cut -d' ' -f1 "$SEEN" | sort -u | wc -l) -eq 1 ]] || fail "processes got different secrets"
    grep -qvE "^$WORK/tmp/loom-job\.[^/]+/secret 600 700$" "$SEEN" &&
        fail "a throw-away secret was not 0600 in a private directory: $(cat "$SEEN")"
    [[ -z $(ls -A "$WORK/tmp") ]] || fail "the throw-away secret was left behind: $(ls -A "$WORK/tmp")"
    rm -f "$SEEN"
}
TMPDIR=$WORK/tmp "$LOOM" run --servers 1 --workers 2 --timeout 60 -- "$WORK/node.sh" \
    >"$WORK/ok.out" 2>&1 || fail "a job with the throw-away secret failed"
[[ $(grep -c 'BSP tally exact' "$WORK/ok.out") -eq 2 ]] || fail "the job did not compute its tally"
grep -q "without a secret" "$WORK/ok.out" && fail "a job with a secret warned that it has none"
check_seen 4 4

MODE=fail TMPDIR=$WORK/tmp "$LOOM" run --servers 1 --workers 2 --timeout 60 -- "$WORK/node.sh" \
    >"$WORK/fail.out" 2>&1
rc=$?
[[ $rc -eq 1 ]] || fail "a job whose workers fail exited $rc, expected 1"
check_seen 2 4 # the scheduler and the first failing worker; the others may be stopped first

MODE=hang TMPDIR=$WORK/tmp "$LOOM" run --servers 1 --workers 1 -- "$WORK/node.sh" \
    >"$WORK/signal.out" 2>&1 &
LAUNCHER_PID=$!
# Poll, up to 30 s, until the worker hangs and all three processes have
# recorded their secret (the server may record it after the worker started).
for ((i = 0; i < 600; i++)); do
    [[ -s $WORK/worker.pid && -s $SEEN && $(wc -l <"$SEEN") -ge 3 ]] && break
    poll_pause 0.05
done
[[ -s $WORK/worker.pid ]] || fail "the worker did not start"
kill -TERM "$LAUNCHER_PID"
wait "$LAUNCHER_PID"
rc=$?
LAUNCHER_PID=""
[[ $rc -eq 143 ]] || fail "the launcher stopped by SIGTERM exited $rc, expected 143"
check_seen 3 3

# --- a given secret: every process gets that file, and it stays.
"$LOOM" run --servers 1 --workers 1 --secret "$key" -- "$WORK/node.sh" >"$WORK/given.out" 2>&1 ||
    fail "a job with --secret failed"
[[ $(sort -u "$SEEN") == "$key 600 700" ]] || fail "processes did not all get --secret's file: $(cat "$SEEN")"
[[ -f $key ]] || fail "the launcher removed the user's secret"
rm -f "$SEEN"
LOOM_SECRET_FILE=$key "$LOOM" run --servers 1 --workers 1 -- "$WORK/node.sh" >"$WORK/env.out" 2>&1 ||
    fail "a job with LOOM_SECRET_FILE failed"
[[ $(sort -u "$SEEN") == "$key 600 700" ]] || fail "processes did not all get LOOM_SECRET_FILE's file"
rm -f "$SEEN"

# --- --insecure: no secret, and the scheduler says so once.
"$LOOM" run --servers 1 --workers 2 --insecure -- "$DEMO" >"$WORK/insecure.out" 2>&1 ||
    fail "a job with --insecure failed"
[[ $(grep -c 'runs without a secret' "$WORK/insecure.out") -eq 1 ]] ||
    fail "an --insecure job did not warn exactly once"
grep -q '^\[scheduler\] warning: this job runs without a secret' "$WORK/insecure.out" ||
    fail "the warning does not come from the scheduler"
# --- under mpirun (its variables, faked; one host): `loom train --secret FILE` gives every
# rank the secret (a rank with another secret cannot join: the scheduler refuses it), and a
# job without one runs in plain text with one warning, from the scheduler.
"$LOOM" gen lr --out "$WORK/lr.svm" --rows 2000 --features 200 --nnz 10 >"$WORK/gen.out" 2>&1 ||
    fail "loom gen lr failed"
"$LOOM" keygen "$WORK/other.secret" || fail "keygen failed"
# mpirun_job NAME SIZE [VAR=VALUE...] -- COMMAND...: run SIZE ranks; 0 if all exited 0.
# Rank 3 alone gets LAST_RANK_VARS.
mpirun_job() {
    local name=$1 size=$2 r rc=0 jobid=$((RANDOM * 2)) vars=() pids=() extra
    shift 2
    while [[ $1 != -- ]]; do
        vars+=("$1")
        shift
    done
    shift
    for ((r = 0; r < size; r++)); do
        extra=()
        ((r == 3)) && read -ra extra <<<"${LAST_RANK_VARS:-}"
        env TMPDIR="$WORK/tmp" OMPI_COMM_WORLD_RANK=$r OMPI_COMM_WORLD_SIZE="$size" \
            OMPI_COMM_WORLD_LOCAL_SIZE="$size" OMPI_COMM_WORLD_LOCAL_RANK=$r \
            OMPI_MCA_ess_base_jobid=$jobid "OMPI_MCA_orte_hnp_uri=$jobid.0;tcp://127.0.0.1:$$" \
            "${vars[@]}" "${extra[@]}" timeout 60 "$@" >"$WORK/$name.$r.out" 2>&1 &
        pids+=($!)
    done
    for r in "${pids[@]}"; do wait "$r" || rc=1; done
    return $rc
}
train=("$LOOM" train lr --train "$WORK/lr.svm" --servers 1 --workers 3 --epochs 2)
mpirun_job mpi_secret 5 -- "${train[@]}" --secret "$key" || fail "an mpirun job with --secret failed"
grep -l "without a secret" "$WORK"/mpi_secret.*.out && fail "an mpirun job with --secret warned"
LAST_RANK_VARS="LOOM_SECRET_FILE=$WORK/other.secret" \
    mpirun_job mpi_other 5 LOOM_CONNECT_TIMEOUT_MS=5000 LOOM_SECRET_FILE="$key" -- "${train[@]}" &&
    fail "a rank with another secret joined the job"
grep -q "refused a connection" "$WORK/mpi_other.0.out" ||
    fail "the scheduler did not log the refusal of the rank with another secret"
mpirun_job mpi_plain 5 -- "${train[@]}" || fail "an mpirun job without a secret failed"
[[ $(cat "$WORK"/mpi_plain.*.out | grep -c "runs without a secret") -eq 1 ]] ||
    fail "an mpirun job without a secret did not warn exactly once"
grep -q "runs without a secret" "$WORK/mpi_plain.0.out" || fail "the warning is not the scheduler's"
# loom train --insecure: without a secret even if LOOM_SECRET_FILE is inherited, here and
# under mpirun (the rank with the secret that is not the scheduler's would be refused).
mpirun_job mpi_insecure 5 LOOM_SECRET_FILE="$key" -- "${train[@]}" --insecure ||
    fail "an mpirun job with --insecure failed"
[[ $(cat "$WORK"/mpi_insecure.*.out | grep -c "runs without a secret") -eq 1 ]] ||
    fail "an mpirun job with --insecure did not warn exactly once"
LOOM_SECRET_FILE=$key "${train[@]}" --insecure >"$WORK/train_insecure.out" 2>&1 ||
    fail "loom train --insecure failed"
[[ $(grep -c "runs without a secret" "$WORK/train_insecure.out") -eq 1 ]] ||
    fail "loom train --insecure did not run without a secret"
expect 2 "--secret and --insecure exclude each other" "${train[@]}" --secret "$key" --insecure
echo PASS
