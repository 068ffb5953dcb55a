#!/usr/bin/env bash
# loom train/predict/gen fm (apps/fm) as a user runs them, one case per CTest test:
#   reference   one worker under BSP (two servers) saves exactly the model of
#               fm_reference.py, DiFacto written from the thesis in NumPy
#               (1e-9), with the memory-adaptive threshold and L1 switching
#               V_i off, with every feature's V_i (--threshold 0), and in 3
#               lanes (--threads 3: lanes' gradients from the same model,
#               summed, each lane's own view of the sketch)
#   planted     on `loom gen fm` data with planted interactions fm's test
#               logloss beats lr's (FTRL, same rate) by 0.02; on data without
#               them (--interactions 0) fm is within 0.005 of lr; fm whose
#               threshold no feature passes is lr (test logloss to 1e-5)
#   constraint  click-log-like data (mostly rare features): --threshold 50
#               allocates at least 3x fewer V rows than --threshold 0 and its
#               test logloss is no worse (within 0.002); the model file holds
#               the V rows the run reported, exactly the features in more
#               than 50 training rows (the sketch, 2 workers), and `loom
#               predict fm` gives the test logloss the run reported
#   parts       --data-parts auto (8 parts handed out on demand, 2 workers)
#               against fixed shares on the planted data: test logloss no worse
#               than fixed shares' + 0.005 and not 0.03 better (measured: parts
#               0.392-0.402, shares 0.404-0.411 under SSP(2): parts come out
#               0.004-0.016 better), V rows within 2 % (the sketch counted every row once in
#               the first epoch either way), and fm still beats lr's fixed-share
#               test logloss by 0.02
#   cli         bad flags exit 2 naming the flag, bad model files exit 1 with
#               FILE:LINE, `loom gen fm` is deterministic and --interactions 0
#               is lr's data
# Usage: test_fm.sh LOOM CASE [PYTHON] (PYTHON: one with numpy, default python3)
set -u
LOOM=${1:?loom} CASE=${2:?case} PYTHON=${3:-python3}
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source-path=SCRIPTDIR source=../lib/cli.sh
source "$HERE/../lib/cli.sh"
work_setup fm
cd "$WORK" || exit 1

# metric FILE NAME: NAME's value in the last JSON line of FILE.
metric() { tail -n 1 "$1" | sed -n "s/.*\"$2\": \([-0-9.e+]*\).*/\1/p"; }

# train MODEL ARGS...: `loom train MODEL ARGS...` (bounded), failing the test if it fails.
train() {
    timeout 240 "$LOOM" train "$@" --quiet >out 2>err || fail "loom train $*: exit status $?"
}

# gen_split NAME ARGS...: `loom gen fm ARGS...`, its first 2/3 in NAME.tr, the rest in NAME.te.
gen_split() {
    local name=$1 rows
    shift
    "$LOOM" gen fm --out "$name.all" --quiet "$@" || fail "loom gen fm $*"
    rows=$(wc -l <"$name.all")
    head -n $((rows * 2 / 3)) "$name.all" >"$name.tr"
    tail -n +$((rows * 2 / 3 + 1)) "$name.all" >"$name.te"
}

case $CASE in
reference)
    "$PYTHON" -c 'import numpy' 2>/dev/null || skip "$PYTHON with numpy not found"
    "$LOOM" gen fm --out data.raw --rows 1200 --features 150 --nnz 12 --seed 3 --quiet ||
        fail "loom gen fm"
    # Values other than 1, so that the x_i^2 terms count.
    awk '{ printf "%s", $1; for (i = 2; i <= NF; i++) { split($i, f, ":");
           printf " %s:%g", f[1], (f[1] % 7 + 1) / 4 } print "" }' data.raw >data.svm
    for flags in "--threshold 40 --l1 0.02 --l2 0.01" "--threshold 0 --l1 0 --l2 0" \
        "--threshold 40 --l1 0.02 --l2 0.01 --threads 3"; do
        # shellcheck disable=SC2206 # split into words on purpose
        args=(--dim 4 --lr 0.2 --beta 1 --lr-v 0.05 --l2-v 0.001 --init 0.1 --epochs 2
              --seed 5 --minibatch 40 $flags)
        # --insecure: this also runs under ThreadSanitizer (label threads),
        # where the CURVE thread is not what this checks.
        train fm --train data.svm --workers 1 --servers 2 --consistency bsp "${args[@]}" \
            --model-out m.fm --insecure
        "$PYTHON" "$HERE/fm_reference.py" data.svm m.fm "${args[@]}" >ref.out 2>&1 ||
            { cat ref.out; fail "the model differs from the reference ($flags)"; }
        cat ref.out
        grep -q "V rows 0 " ref.out && fail "no V row was used ($flags): the test checks nothing"
    done
    ;;
planted)
    # The same rows and linear model, with and without interactions; --lr 1 and
    # 6 epochs bring lr close to its best (0.449 at --lr 3, 10 epochs; the
    # planted linear model's is 0.431), so fm's lead is not its speed.
    gen_split on --rows 30000 --features 500 --nnz 15 --seed 11
    gen_split off --rows 30000 --features 500 --nnz 15 --seed 11 --interactions 0
    for d in on off; do
        train fm --train $d.tr --test $d.te --epochs 6 --lr 1 --consistency bsp \
            --metrics fm-$d.json
        train lr --train $d.tr --test $d.te --epochs 6 --lr 1 --consistency bsp --updater ftrl \
            --metrics lr-$d.json
        echo "$d: fm $(metric fm-$d.json test_logloss)  lr $(metric lr-$d.json test_logloss)"
    done
    # fm with no V at all is lr with FTRL: the same test logloss up to the order
    # in which the servers add the two workers' gradients, which moves either
    # one's by up to about 1e-6 from run to run (measured: 0.4557643-0.4557653
    # over ten runs); any V row, or a different w update, moves it by 1e-3.
    train fm --train off.tr --test off.te --epochs 6 --lr 1 --consistency bsp \
        --threshold 1000000 --metrics fm-nov.json
    numeric_check 'fm - lr < 1e-5 && lr - fm < 1e-5' fm="$(metric fm-nov.json test_logloss)" \
        lr="$(metric lr-off.json test_logloss)" || fail "fm without V is not lr"
    numeric_check 'fm < lr - 0.02' fm="$(metric fm-on.json test_logloss)" \
        lr="$(metric lr-on.json test_logloss)" || fail "fm does not beat lr on planted interactions"
    numeric_check 'fm < lr + 0.005' fm="$(metric fm-off.json test_logloss)" \
        lr="$(metric lr-off.json test_logloss)" || fail "fm is worse than lr without interactions"
    ;;
parts)
    gen_split on --rows 30000 --features 500 --nnz 15 --seed 11
    train lr --train on.tr --test on.te --epochs 6 --lr 1 --consistency bsp --updater ftrl \
        --metrics lr.json
    for m in share parts; do
        extra=()
        [[ $m == parts ]] && extra=(--data-parts auto)
        train fm --train on.tr --test on.te --epochs 6 --lr 1 --consistency bsp \
            --metrics fm-$m.json "${extra[@]}"
        echo "$m: test logloss $(metric fm-$m.json test_logloss)  V rows $(metric fm-$m.json v_rows)"
    done
    numeric_check 'p - s < 0.005 && s - p < 0.03' s="$(metric fm-share.json test_logloss)" \
        p="$(metric fm-parts.json test_logloss)" || fail "fm's test logloss with parts is worse than with fixed shares, or far from it"
    numeric_check 'p <= s * 1.02 && p >= s * 0.98' s="$(metric fm-share.json v_rows)" \
        p="$(metric fm-parts.json v_rows)" || fail "fm's V rows differ with parts"
    numeric_check 'fm < lr - 0.02' fm="$(metric fm-parts.json test_logloss)" \
        lr="$(metric lr.json test_logloss)" || fail "fm with parts does not beat lr"
    ;;
constraint)
    gen_split c --rows 45000 --features 60000 --nnz 20 --seed 4
    for t in 0 50; do
        train fm --train c.tr --test c.te --epochs 3 --threshold $t --metrics t$t.json \
            --model-out t$t.fm
        echo "threshold $t: V rows $(metric t$t.json v_rows)  test logloss" \
            "$(metric t$t.json test_logloss)"
    done
    numeric_check 'on * 3 <= off' on="$(metric t50.json v_rows)" off="$(metric t0.json v_rows)" ||
        fail "--threshold 50 does not allocate 3x fewer V rows"
    numeric_check 'on <= off + 0.002' on="$(metric t50.json test_logloss)" \
        off="$(metric t0.json test_logloss)" || fail "--threshold 50 costs test logloss"
    # The saved model's V rows are those reported, and exactly the features in
    # more than 50 training rows: the sketch's counts (its estimates never fall
    # below them, and 4 x 2^20 counters leave no collision here) settle on every
    # worker after the first epoch, and every feature in more rows is in a later
    # minibatch with w_i != 0 (no L1).
    awk 'NR > 1 && $1 % 17 != 0 { print int($1 / 17) }' t50.fm | uniq >vrows
    [[ $(wc -l <vrows) == "$(metric t50.json v_rows)" ]] ||
        fail "t50.fm holds $(wc -l <vrows) V rows, the run reported $(metric t50.json v_rows)"
    awk '{ for (i = 2; i <= NF; i++) { split($i, f, ":"); n[f[1] - 1]++ } }
         END { for (k in n) if (n[k] > 50) print k }' c.tr | sort -n >frequent
    cmp -s vrows frequent ||
        fail "the V rows are not the $(wc -l <frequent) features in more than 50 rows"
    # The saved model predicts as the run evaluated it.
    run predict fm --model t50.fm --data c.te
    [[ $RC == 0 ]] || fail "loom predict fm: exit status $RC"
    numeric_check 'p - r < 1e-6 && r - p < 1e-6' p="$(sed -n 's/.*logloss \([0-9.]*\).*/\1/p' out)" \
        r="$(metric t50.json test_logloss)" || fail "predict fm's logloss is not the run's"
    ;;
cli)
    printf '+1 1:1 2:1\n-1 2:1 3:1\n' >ok.svm
    expect 2 "--train FILE is required" train fm --workers 1
    expect 2 "--dim takes a whole number from 1 to 1024, not '0'" train fm --train ok.svm --dim 0
    expect 2 "--threshold takes a whole number" train fm --train ok.svm --threshold -1
    expect 2 "--lr-v takes a number" train fm --train ok.svm --lr-v 0
    expect 2 "--servers 0: loom train fm keeps its model on the servers" \
        train fm --train ok.svm --servers 0
    expect 2 "with --threshold 0 there is none" \
        train fm --train ok.svm --threshold 0 --sketch-width 100
    expect 2 "unknown flag '--rank'" train fm --train ok.svm --rank 3
    expect 2 "--model M is required" predict fm --data ok.svm
    expect 1 "missing.fm: cannot open" predict fm --model missing.fm --data ok.svm
    expect 2 "--rank takes a whole number from 1 to 64" gen fm --out x --rank 0
    expect 2 "--out FILE is required" gen fm --rows 3

    # A model of 3 features and 2 factors: 3 x 3 + 1 values.
    printf 'loom-fm 1 dim=10 nnz=2 factors=2\n0 0.5\n9 -0.25\n' >good.fm
    run predict fm --model good.fm --data ok.svm
    [[ $RC == 0 ]] || fail "a good model file is refused"
    printf 'loom-fm 1 dim=11 nnz=0 factors=2\n' >bad1.fm
    expect 1 "bad1.fm:1: dim=11 is not features x (factors + 1) + 1" \
        predict fm --model bad1.fm --data ok.svm
    printf 'loom-fm 1 dim=10 nnz=1 factors=0\n0 1\n' >bad2.fm
    expect 1 "bad2.fm:1: factors=0 is not a whole number from 1 to 1024" \
        predict fm --model bad2.fm --data ok.svm
    printf 'loom-fm 1 dim=10 nnz=2 factors=2\n0 0.5\n10 1\n' >bad3.fm
    expect 1 "bad3.fm:3:" predict fm --model bad3.fm --data ok.svm
    printf 'loom-fm 1 dim=10 nnz=2 factors=2\n0 0.5\n' >bad4.fm
    expect 1 "bad4.fm:" predict fm --model bad4.fm --data ok.svm
    printf 'loom-lr 1 dim=3 nnz=0 bias=0\n' >lr.model
    expect 1 "lr.model:1:" predict fm --model lr.model --data ok.svm

    "$LOOM" gen fm --out a.svm --rows 500 --features 300 --seed 9 --quiet || fail "gen fm"
    "$LOOM" gen fm --out b.svm --rows 500 --features 300 --seed 9 --quiet || fail "gen fm"
    cmp -s a.svm b.svm || fail "loom gen fm is not deterministic"
    "$LOOM" gen fm --out c.svm --rows 500 --features 300 --seed 9 --interactions 0 --quiet
    "$LOOM" gen lr --out d.svm --rows 500 --features 300 --seed 9 --quiet
    cmp -s c.svm d.svm || fail "loom gen fm --interactions 0 is not lr's data"
    cmp -s a.svm c.svm && fail "the interactions change no label"
    ;;
*) fail "unknown case $CASE" ;;
esac
echo PASS
