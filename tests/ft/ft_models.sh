# shellcheck shell=bash
# The jobs of the tests that checkpoint, kill and resume (test_ft_resume.sh,
# test_ft_restart.sh; sourced after cli_lib.sh, in the test's work directory),
# and `newest`, which every checkpointing test uses.

# shellcheck disable=SC2034 # read by the scripts that source this file
EVERY=5 # clocks between checkpoints

# ft_model_job MODEL: generate MODEL's data into ./data and set ARGS to a
# one-worker, two-server BSP `loom train MODEL` of hundreds of clocks (long
# enough for several checkpoints to commit before it ends).
ft_model_job() {
    case $1 in
    lr)
        run gen lr --out data --rows 20000 --features 5000 --nnz 10 --quiet
        # --bandwidth: paced pushes and pulls cut and resume like unpaced ones.
        ARGS=(train lr --train data --updater adagrad --epochs 3 --minibatch 100 --bandwidth 200)
        ;;
    mf)
        run gen mf --out data --users 1000 --items 2000 --ratings 100000 --quiet
        # --steps 2: a checkpoint is cut after a clock's last step.
        ARGS=(train mf --train data --epochs 20 --syncs 20 --steps 2 --eval-every 5)
        ;;
    lda)
        run gen lda --out data --docs 2000 --vocab-size 1000 --topics 10 --doc-length 80 --quiet
        ARGS=(train lda --train data --topics 10 --iterations 60 --syncs 10 --eval-every 12)
        ;;
    *) fail "unknown model $1" ;;
    esac
    [[ $RC == 0 ]] || fail "gen $1: exit status $RC"
    ARGS+=(--workers 1 --servers 2 --consistency bsp --quiet --insecure --no-status)
}

# newest DIR: the clock of the newest committed checkpoint in DIR (0: none yet).
newest() {
    local dir=$1 m c=0
    for m in "$dir"/ckpt-*/MANIFEST; do
        [[ -e $m ]] || continue
        m=${m#"$dir"/ckpt-}
        m=${m%%/*}
        ((10#$m > c)) && c=$((10#$m))
    done
    echo "$c"
}
