#!/usr/bin/env bash
# Seeded fault loop that mixes every fault Loom claims to survive (issue 24,
# item 6; docs/FAULTS.md): jobs of 3 servers and 3 workers of failover_check
# (an int64 sum table of known pushes) with --replicas 2,
# --on-server-failure restart, --on-worker-failure continue and a checkpoint
# every EVERY clocks into a directory on a small tmpfs, each job taking a
# random sequence of these events, one after another:
#
#   kill     SIGKILL of a server (the launcher starts a replacement, which
#            must rejoin and take its ranges back) or, near the end of a job,
#            of a worker (the job goes on without it);
#   pause    SIGSTOP of a random node (the scheduler too), for a random time
#            below a third of the heartbeat timeout, then SIGCONT: it must
#            NOT be declared dead, and the job goes on;
#   freeze   SIGSTOP of a server or (near the end) a worker until the
#            scheduler declares it dead, then SIGKILL (a server is replaced)
#            or SIGCONT (the process was declared dead and must stop with
#            status 3 by itself: a dead node never comes back; a server so
#            lost is not replaced, at most one a job);
#   disk     the tmpfs filled with a junk file until a checkpoint write fails
#            with ENOSPC, then the file removed: the failed checkpoints must
#            say so in the log and never be committed, nothing may crash, and
#            a later checkpoint must commit.
#
# Every event waits for its effect (a log line, a pid file, a clocks file),
# and the next starts only once every live worker has ended 2 more clocks
# (the job goes on). Server events also wait until the replacement took its
# ranges back, so at most one server is down at a time besides one frozen
# for good (with 2 replicas a third death at once would be allowed too, but
# docs/FAULTS.md says a second death right after a failover may lose the
# dead master's last round). Worker losses come last in a job: a checkpoint
# needs every worker's part, so none commits after one (docs/FAULTS.md).
#
# After each job (its length is set by the test once the events are done,
# through failover_check --end-file, so the job lasts as long as its faults
# take on a loaded machine and no longer):
#   * every live worker's check: every worker's part of every key exact
#     (a lost worker's: its acknowledged clocks, plus a part of the next);
#   * the scheduler declared dead exactly the nodes killed or frozen, each
#     once: a paused node declared dead fails the test;
#   * no process failed but the killed and frozen ones;
#   * every committed checkpoint the test could copy before the job's
#     cleanup removed it (a background copier polls every 20 ms, and the job
#     keeps the previous one, so in practice all) holds exactly the pushes of
#     the clocks before its clock (failover_check check: the sums computed
#     from the pushes, each worker's saved clock), and `loom checkpoint ls`
#     calls each ok; the job's own directory verifies;
#   * no checkpoint whose write failed for lack of space was committed.
#
# The seed is printed; replay with the same seed (and event count; FROM_JOB
# skips to the job that failed: the events are drawn before a job runs, so
# the same seed gives the same events whatever the timing). Events
# count each kill, pause, freeze and disk fill once; jobs run until at least
# EVENTS have happened. The consistency model rotates through BSP, SSP and
# ASP. Needs root (for a private mount namespace with a tmpfs of DISK_KB KiB).
# Usage:
#   test_fault_mix.sh LOOM FAILOVER_CHECK [SEED [EVENTS [FROM_JOB]]]
# or FAULT_MIX_SEED / FAULT_MIX_EVENTS in the environment (ctest under the
# sanitizers sets a smaller FAULT_MIX_EVENTS); KEEP=1 keeps the work
# directory (with the full log and, if gdb is there, the stacks of a stuck
# job); FAULT_MIX_VERBOSE=2 gives the job LOOM_VERBOSE=2.

# The tmpfs is mounted in a mount namespace of this script's own, so it
# vanishes with the script whatever way it ends and the host never sees it.
if [[ -z ${FAULT_MIX_NS:-} ]]; then
    if ((EUID != 0)); then
        echo "skipped: needs root (a private mount namespace with a small tmpfs for the checkpoints)"
        exit 77
    fi
    if ! unshare -m --propagation private true 2>/dev/null; then
        echo "skipped: unshare -m failed: no mount namespaces here (a container without CAP_SYS_ADMIN?)"
        exit 77
    fi
    FAULT_MIX_NS=1 exec unshare -m --propagation private bash "$0" "$@"
fi
SEED=${3:-${FAULT_MIX_SEED:-1}}
EVENTS=${4:-${FAULT_MIX_EVENTS:-100}}
FROM_JOB=${5:-0} # replay: skip the jobs before this one (their events still count)
# shellcheck source-path=SCRIPTDIR source=../lib/mp.sh
source "$(dirname "$0")/../lib/mp.sh" "$1" "$2"
# shellcheck source-path=SCRIPTDIR source=../lib/ft.sh
source "$(dirname "$0")/../lib/ft.sh" # newest

HB_TIMEOUT=2000 # ms; heartbeats every 250 ms
EVERY=20        # clocks between checkpoints
DISK_KB=2048    # the tmpfs: about 20 checkpoints of this job (each about 50 KiB)
RANDOM=$SEED
modes=(bsp ssp asp)
DISK=$WORK/disk
CK=$DISK/ck
mkdir "$DISK"
mount -t tmpfs -o size=${DISK_KB}k,mode=0755 loom-fault-mix "$DISK" || fail "cannot mount a tmpfs on $DISK"
# A lazy unmount first: the job's processes may still hold files there.
trap 'umount -l "$DISK" 2>/dev/null; cleanup' EXIT
echo "seed $SEED, $EVENTS events at least (replay: $0 LOOM FAILOVER_CHECK $SEED $EVENTS)"
start=$SECONDS

# job_failed MESSAGE: fail, showing the job's log without its routine lines
# (as it was when the failure was seen, if snapshot_log ran then), and the
# stuck worker's threads if stuck_stacks wrote them.
job_failed() {
    [[ -e $WORK/job.out ]] || snapshot_log
    rm -f "$WORK"/job[0-9]*.out
    fail "job $job (seed $SEED; replay: $0 LOOM FAILOVER_CHECK $SEED $EVENTS $job): $*"
}

# snapshot_log: the job's log now, into $WORK/job.out (shown on failure):
# the last lines but the routine ones, then the first stall reports (what a
# request, a clock or the min clock waits on: LOOM_STALL_REPORT_MS below).
# Taken before gdb attaches to a stuck job: a process it pauses is declared
# dead, and what follows says nothing of the failure.
snapshot_log() {
    cp "$out" "$WORK/full-job$job.log" # kept with KEEP=1
    {
        grep -vE " clock [0-9]+\$|checkpoint part .* written|checkpoint at clock [0-9]+ committed" "$out" |
            tail -n 30
        echo "... the stall reports:"
        grep -E "has waited [0-9]+ s|has not finished clock" "$out" | head -n 8
    } >"$WORK/job.out"
}

pid_of() { cat "$PIDS/$1-$2.pid" 2>/dev/null; }

# done_clock W: sets DONE to the last clock worker W recorded as acknowledged
# and ended (-1: none). progress() asks 50 times a second for minutes, so
# this starts no process: it keeps each worker's clocks file open and reads
# only the lines appended since its last call (a line still being written is
# kept until its newline comes). forget_clocks closes the files between jobs.
declare -A CLOCKS_FD=() CLOCKS_LAST=() CLOCKS_PART=()
done_clock() {
    local w=$1 f=$PIDS/worker-$1.clocks line fd
    if [[ -z ${CLOCKS_FD[$w]:-} ]]; then
        DONE=-1
        [[ -e $f ]] || return 0
        exec {fd}<"$f"
        CLOCKS_FD[$w]=$fd CLOCKS_LAST[$w]=-1 CLOCKS_PART[$w]=""
    fi
    while IFS= read -r -u "${CLOCKS_FD[$w]}" line; do
        line=${CLOCKS_PART[$w]}$line
        CLOCKS_PART[$w]=""
        [[ -n $line ]] && CLOCKS_LAST[$w]=$line
    done
    CLOCKS_PART[$w]+=$line # what read returned without its newline
    DONE=${CLOCKS_LAST[$w]}
}

forget_clocks() {
    local fd
    for fd in "${CLOCKS_FD[@]}"; do exec {fd}<&-; done
    CLOCKS_FD=() CLOCKS_LAST=() CLOCKS_PART=()
}

# stacks: with gdb, every thread's stack of every process of a stuck job, in
# $WORK/stacks-job$job.txt (kept with KEEP=1), to say where it waits.
stacks() {
    local f
    command -v gdb >/dev/null || return 0
    # Workers first: attaching pauses a process, and a server paused for
    # long is declared dead, which ends the job.
    for f in "$PIDS"/worker-*.pid "$PIDS"/server-*.pid "$PIDS"/scheduler-*.pid; do
        echo "=== ${f##*/}"
        timeout 30 gdb -p "$(<"$f")" -batch -ex "thread apply all bt" 2>&1 | grep -E "^(Thread|#)"
    done >"$WORK/stacks-job$job.txt"
}

# stuck_stacks W: worker W's threads from the stacks file (but ZeroMQ's own),
# a line a frame: the function, and its source line where the build has it;
# into $WORK/stuck.out (shown on failure).
stuck_stacks() {
    local f=$WORK/stacks-job$job.txt
    [[ -s $f ]] || return 0
    awk -v want="=== worker-$1.pid" '
        /^===/ { on = ($0 == want); next }
        on && /^Thread/ { keep = $0 !~ /"ZMQbg/; if (keep) print; next }
        on && keep && /^#/ {
            at = ""
            if (match($0, / at [^ ]+:[0-9]+$/)) at = " " substr($0, RSTART + 4)
            fn = $0
            sub(/^#[0-9]+ +(0x[0-9a-f]+ in )?/, "", fn)
            sub(/ \(.*/, "", fn)
            print "  " fn at
        }' "$f" >"$WORK/stuck.out"
}

# progress N: until every live worker has ended N more clocks (the job goes on).
progress() {
    local w want deadline=$((SECONDS + 60))
    for w in "${live[@]}"; do
        done_clock "$w"
        want=$((DONE + $1))
        while done_clock "$w" && ((DONE < want)); do
            kill -0 "$launcher" 2>/dev/null || job_failed "the job ended while worker $w was at clock $DONE"
            ((SECONDS < deadline)) || {
                snapshot_log
                stacks
                stuck_stacks "$w"
                job_failed "worker $w did not get past clock $want within 60 s after $what"
            }
            poll_pause 0.02 # a poll, not a synchronisation: the condition is the clocks file
        done
    done
}

# count PATTERN: lines of the job's log matching the extended regex.
count() { grep -cE -- "$1" "$out"; }

died_re() { echo "^\[scheduler\] .*$1 $2 \(node [0-9]+\) died"; }

# new_pid ROLE RANK OLD: until ROLE RANK's pid file names a live process other than OLD.
new_pid() {
    local deadline=$((SECONDS + 60)) p
    while :; do
        p=$(pid_of "$1" "$2")
        [[ -n $p && $p != "$3" ]] && kill -0 "$p" 2>/dev/null && return 0
        kill -0 "$launcher" 2>/dev/null || job_failed "the job ended before $1 $2's replacement came up"
        ((SECONDS < deadline)) || job_failed "no replacement for $1 $2 wrote its pid file within 60 s"
        poll_pause 0.02 # a poll: the condition is the pid file
    done
}

# replaced S OLD_PID TOOK: server S's replacement is up, back and took its
# ranges back (the scheduler's TOOK-th such line).
replaced() {
    new_pid server "$1" "$2"
    wait_for_lines "$out" "^\[scheduler\] .*server $1 took its ranges back\$" "$3" 120 "$launcher"
}

# snapshotter: copies every committed checkpoint of $CK into $SNAP while the
# job runs, before a later commit removes it. A copy that races with that
# removal fails (cp cannot open a removed file) and is dropped and counted in
# $SNAP.missed; one that succeeds is whole, since committed files no longer change.
snapshotter() {
    local m d name
    while :; do
        for m in "$CK"/ckpt-*/MANIFEST; do
            [[ -e $m ]] || continue
            d=${m%/MANIFEST}
            name=${d##*/}
            [[ -e $SNAP/$name || -e $SNAP.missed.$name ]] && continue
            if cp -r "$d" "$SNAP/.$name" 2>/dev/null && [[ -e $SNAP/.$name/MANIFEST ]]; then
                mv "$SNAP/.$name" "$SNAP/$name"
            else
                rm -rf "${SNAP:?}/.$name"
                [[ -e $m ]] && continue # a copy that met a file still being put in place: again
                : >"$SNAP.missed.$name"
            fi
        done
        poll_pause 0.02 # the polling period of the copier, no synchronisation
    done
}

# filler: while $DISK/fill exists, keep the tmpfs full (a commit's cleanup frees space).
filler() {
    while [[ -e $DISK/fill ]]; do
        cat /dev/zero >>"$DISK/junk" 2>/dev/null
        poll_pause 0.02
    done
}

events=0
for ((job = 0; events < EVENTS; job++)); do
    mode=${modes[job % 3]}
    n=$((8 + RANDOM % 5))           # events in this job
    lose=$((RANDOM % 3))            # of which worker losses, the last ones
    # The plan: "KIND ROLE RANK ARG" an event (KIND 0 kill, 1 pause for ARG
    # ms, 2 freeze then SIGCONT if ARG is 1 else SIGKILL, 3 disk), drawn
    # before the job runs, so that FROM_JOB can skip jobs and still replay.
    plan=()
    live=(0 1 2)    # workers not lost
    servers=(0 1 2) # servers that are up or will be (not frozen for good)
    gone=""         # the server frozen for good, if any
    for ((e = 0; e < n; e++)); do
        arg=0
        if ((e >= n - lose)); then
            kind=$((RANDOM % 2 ? 0 : 2)) # a worker: kill or freeze
            role=worker
            rank=${live[RANDOM % ${#live[@]}]}
        else
            r=$((RANDOM % 100))
            # Kills 25 %, pauses 50 %, freezes 10 %, a full disk 15 %: a
            # server's death costs the heartbeat timeout and a rejoin, a pause
            # at most a third of it, so a run of 100 fits in about 5 minutes.
            if ((r < 25)); then kind=0; elif ((r < 75)); then kind=1; elif ((r < 85)); then kind=2; else kind=3; fi
            role=server
            rank=${servers[RANDOM % ${#servers[@]}]}
            if ((kind == 1)); then # pause any node: scheduler, server or worker
                r=$((RANDOM % 7))
                if ((r == 0)); then
                    role=scheduler rank=0
                elif ((r > 3)); then
                    role=worker rank=${live[RANDOM % ${#live[@]}]}
                fi
            fi
        fi
        case $kind in
        1) arg=$((100 + RANDOM % (HB_TIMEOUT / 3 - 100))) ;;
        2)
            # A server is frozen for good (SIGCONT) at most once a job.
            arg=$((RANDOM % 2))
            [[ $role == server && -n $gone ]] && arg=0
            if [[ $role == server ]] && ((arg)); then
                gone=$rank
                mapfile -t servers < <(printf '%s\n' "${servers[@]}" | grep -vx "$rank")
            fi
            ;;
        esac
        [[ $role == worker ]] && ((kind == 0 || kind == 2)) &&
            mapfile -t live < <(printf '%s\n' "${live[@]}" | grep -vx "$rank")
        plan+=("$kind $role $rank $arg")
    done
    if ((job < FROM_JOB)); then
        events=$((events + n))
        continue
    fi
    forget_clocks
    rm -rf "${PIDS:?}"/* "${CK:?}" "$DISK/junk" "$WORK/end"
    SNAP=$WORK/snap$job
    mkdir "$SNAP"
    out="$WORK/job$job.out"
    echo "job $job: $mode, $n events ($lose worker losses last)"
    LOOM_REPLICAS=2 LOOM_HEARTBEAT_MS=250 LOOM_ON_WORKER_FAILURE=continue LOOM_STALL_REPORT_MS=15000 LOOM_VERBOSE="${FAULT_MIX_VERBOSE:-1}" \
        LOOM_CHECKPOINT_DIR="$CK" LOOM_CHECKPOINT_EVERY=$EVERY \
        "$LOOM" run --servers 3 --workers 3 --on-failure wait --on-server-failure restart \
        --heartbeat-timeout $HB_TIMEOUT --timeout 600 --insecure --no-status \
        -- "$PS_CHECK" "$mode" --pid-dir "$PIDS" --clocks 5000 --pace-ms 10 --workers-may-die \
        --save-may-fail --end-file "$WORK/end" >"$out" 2>&1 &
    launcher=$!
    BG_PIDS+=("$launcher")
    snapshotter &
    copier=$!
    BG_PIDS+=("$copier")
    wait_for_files 7 60
    live=(0 1 2)
    declare -A deaths=()
    allowed=() # what loom run may say of the processes killed or frozen
    stopped=""       # ROLE_RANK of each node frozen, declared dead and continued
    what="the start"
    progress 5
    for ((e = 0; e < n; e++)); do
        read -r kind role rank arg <<<"${plan[e]}"
        case $kind in
        0) # kill
            pid=$(pid_of "$role" "$rank")
            what="kill $role $rank"
            echo "  event $events: $what (pid $pid)"
            took=$(($(count "^\[scheduler\] .*server $rank took its ranges back\$") + 1))
            kill -KILL "$pid"
            deaths[$role $rank]=$((${deaths[$role $rank]:-0} + 1))
            allowed+=("$role $rank was killed by signal 9")
            wait_for_lines "$out" "$(died_re "$role" "$rank")" "${deaths[$role $rank]}" 60 "$launcher"
            if [[ $role == server ]]; then
                replaced "$rank" "$pid" "$took"
            else
                mapfile -t live < <(printf '%s\n' "${live[@]}" | grep -vx "$rank")
            fi
            ;;
        1) # pause below the heartbeat timeout
            pid=$(pid_of "$role" "$rank")
            what="pause $role $rank for $arg ms"
            echo "  event $events: $what (pid $pid)"
            kill -STOP "$pid"
            sleep "$(printf '0.%03d' "$arg")" # the pause itself: a deliberate duration, no synchronisation
            kill -CONT "$pid"
            ;;
        2) # freeze until declared dead
            pid=$(pid_of "$role" "$rank")
            what="freeze $role $rank until declared dead, then $( ((arg)) && echo SIGCONT || echo SIGKILL)"
            echo "  event $events: $what (pid $pid)"
            took=$(($(count "^\[scheduler\] .*server $rank took its ranges back\$") + 1))
            kill -STOP "$pid"
            deaths[$role $rank]=$((${deaths[$role $rank]:-0} + 1))
            wait_for_lines "$out" "$(died_re "$role" "$rank")" "${deaths[$role $rank]}" 60 "$launcher"
            if ((arg)); then
                allowed+=("$role $rank exited with status 3")
                stopped+=" ${role}_$rank"
                kill -CONT "$pid"
                # Declared dead, it must never come back: it stops with status 3 by itself.
                wait_for_lines "$out" "^loom run: $role $rank exited with status 3" 1 60 "$launcher"
            else
                allowed+=("$role $rank was killed by signal 9")
                kill -KILL "$pid"
                [[ $role == server ]] && replaced "$rank" "$pid" "$took"
            fi
            [[ $role == worker ]] && mapfile -t live < <(printf '%s\n' "${live[@]}" | grep -vx "$rank")
            ;;
        3) # a full disk
            what="fill the checkpoint disk"
            echo "  event $events: $what"
            nospace=$(count "No space left on device")
            : >"$DISK/fill"
            filler &
            fill_pid=$!
            BG_PIDS+=("$fill_pid")
            wait_for_lines "$out" "No space left on device" $((nospace + 1)) 60 "$launcher"
            rm -f "$DISK/fill"
            wait "$fill_pid"
            rm -f "$DISK/junk"
            freed=$(newest "$CK")
            deadline=$((SECONDS + 60))
            while (($(newest "$CK") <= freed)); do
                kill -0 "$launcher" 2>/dev/null || job_failed "the job ended before a checkpoint committed after the disk had room again"
                ((SECONDS < deadline)) || job_failed "no checkpoint committed within 60 s after the disk had room again (newest: clock $freed)"
                poll_pause 0.02 # a poll: the condition is the manifests
            done
            ;;
        esac
        events=$((events + 1))
        progress 2
    done
    # End the job a margin of clocks after the furthest worker (failover_check --end-file).
    end=0
    for w in "${live[@]}"; do done_clock "$w" && ((DONE > end)) && end=$DONE; done
    end=$((end + 60))
    echo "$end" >"$WORK/end.tmp" && mv "$WORK/end.tmp" "$WORK/end"
    status=0
    wait "$launcher" || status=$?
    kill "$copier" 2>/dev/null
    wait "$copier" 2>/dev/null
    # The job has ended, so nothing is removed any more: copy what the copier has not.
    for m in "$CK"/ckpt-*/MANIFEST; do
        [[ -e $m ]] || continue
        d=${m%/MANIFEST}
        [[ -e $SNAP/${d##*/} ]] || cp -r "$d" "$SNAP/" || job_failed "cannot copy $d"
    done

    for w in "${live[@]}"; do
        grep -q "^\[worker $w\] worker $w: $end clocks, all 1000 keys exact" "$out" ||
            job_failed "worker $w did not end $end clocks with every part exact"
        for v in 0 1 2; do
            [[ " ${live[*]} " == *" $v "* ]] && continue
            grep -q "^\[worker $w\] worker $w: worker $v was lost after clock" "$out" ||
                job_failed "worker $w did not check lost worker $v"
        done
    done
    # Declared dead: exactly the killed and frozen nodes, each as often as it was.
    for role in scheduler server worker; do
        for rank in 0 1 2; do
            [[ $role == scheduler && $rank != 0 ]] && continue
            got=$(count "$(died_re "$role" "$rank")")
            ((got == ${deaths[$role $rank]:-0})) ||
                job_failed "$role $rank was declared dead $got times, but killed or frozen ${deaths[$role $rank]:-0} times (a pause below the heartbeat timeout must not count)"
        done
    done
    allow=$(IFS='|' && echo "${allowed[*]}")
    others=$(grep -E "^loom run: (server|worker|scheduler) .*(exited with status [1-9]|killed by)" "$out" |
        grep -vE "^loom run: (${allow:-^$})")
    [[ -z $others ]] || job_failed "other processes failed: $others"
    # The launcher's summary names as failed only processes that stopped by
    # themselves after being declared dead (killed servers were replaced,
    # killed workers lost), and it exits 0 unless one of those was a worker.
    for who in $(grep -E "^loom run: (also )?failed: " "$out" |
        sed -E 's/^loom run: (also )?failed: ([a-z]+ [0-9]+).*/\2/' | tr ' ' _); do
        [[ " $stopped " == *" $who "* ]] ||
            job_failed "loom run's summary blames ${who/_/ }, which did not fail: $(grep -E "^loom run: (also )?failed: " "$out")"
    done
    want=0
    [[ $stopped == *worker_* ]] && want=1
    ((status == want)) || job_failed "loom run exited with status $status, not $want"

    # Checkpoints: a write that failed for lack of space leaves its clock uncommitted.
    committed=$(grep -oE "checkpoint at clock [0-9]+ committed" "$out" | grep -oE "[0-9]+" | sort -n | uniq)
    nofit=$(grep -E "No space left on device|checkpoint at clock [0-9]+ not (saved|committed|written)" "$out" |
        grep -oE "ckpt-[0-9]+|clock [0-9]+" | grep -oE "[0-9]+" | sed 's/^0*//' | sort -n | uniq)
    for c in $nofit; do
        grep -qx "$c" <<<"$committed" && job_failed "the checkpoint at clock $c was committed although a write of it failed"
    done
    ncommitted=$(grep -c . <<<"$committed")
    ((ncommitted > 0)) || job_failed "no checkpoint was committed"
    missed=$(find "$WORK" -maxdepth 1 -name "snap$job.missed.*" | wc -l)
    copied=$(find "$SNAP" -mindepth 1 -maxdepth 1 -name 'ckpt-*' | wc -l)
    "$PS_CHECK" check "$SNAP" 3 >"$WORK/check.txt" 2>&1 || {
        cat "$WORK/check.txt" >&2
        job_failed "a committed checkpoint is not exactly its cut"
    }
    "$LOOM" checkpoint ls "$SNAP" >"$WORK/ls.txt" 2>&1 || job_failed "loom checkpoint ls: $(cat "$WORK/ls.txt")"
    ok=$(grep -cE "^ *[0-9]+ +ok\$" "$WORK/ls.txt")
    ((ok == copied)) || job_failed "loom checkpoint ls calls $ok of the $copied committed checkpoints ok: $(cat "$WORK/ls.txt")"
    "$LOOM" checkpoint verify "$CK" >/dev/null 2>"$WORK/verify.txt" ||
        job_failed "loom checkpoint verify $CK: $(cat "$WORK/verify.txt")"
    nf=$(grep -c . <<<"$nofit")
    echo "job $job ended after $end clocks ($((SECONDS - start)) s so far): exact; $ncommitted checkpoints committed, $copied of them checked exact ($((ncommitted - copied)) removed before the copier had copied them, $missed of these while it did), $nf failed for lack of space"
    rm -rf "$SNAP" "$WORK"/snap"$job".missed.*
    unset deaths allowed
done
echo "PASS: $job jobs, $events events in $((SECONDS - start)) s, every part exact, every checked checkpoint exact (seed $SEED)"
