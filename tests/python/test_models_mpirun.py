"""python.models_mpirun: loom.models in a program started by the real mpirun (Open MPI):
`mpirun -np 4 python3 mpi_models.py`, every rank fitting the same LogisticRegression, makes
one job of a scheduler, a server and two workers; exactly one rank (worker 0's) holds the
fitted model, whose held-out accuracy on the generated set is above 0.8, and the three
others say they hold none. Skipped without Open MPI's mpirun."""
import os
import re
import shutil
import signal
import subprocess
import sys

import harness

mpirun = shutil.which("mpirun")
if not mpirun or b"Open MPI" not in subprocess.run([mpirun, "--version"],
                                                   capture_output=True).stdout:
    harness.skip("no Open MPI mpirun on PATH (install openmpi-bin: scripts/install-deps.sh)")
argv = [mpirun, "--oversubscribe", "-np", "4"]
if os.getuid() == 0:
    argv.append("--allow-run-as-root")
for name in ("LOOM_LIBRARY", "LOOM_CLI", "PYTHONPATH", "PYTHONDONTWRITEBYTECODE"):
    if name in os.environ:
        argv += ["-x", name]
argv += [sys.executable, os.path.join(harness.HERE, "mpi_models.py")]
work = harness.workdir()
# mpirun and its ranks in a process group of their own, killed whole if it overruns.
job = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       cwd=work, start_new_session=True)
try:
    out, err = job.communicate(timeout=240)
except subprocess.TimeoutExpired:
    os.killpg(job.pid, signal.SIGKILL)
    out, err = job.communicate()
    harness.fail(f"mpirun did not end within 240 s:\n{out}\n{err}")
done = subprocess.CompletedProcess(argv, job.returncode, out, err)
# By phrase, not by line: mpirun forwards the ranks' output as it comes, and
# one rank's line may land in the middle of another's (seen under ASan).
fitted = re.findall(r"(?<!not )fitted: accuracy ([0-9.]+)", done.stdout)
if done.returncode or len(fitted) != 1 or done.stdout.count("not fitted on this rank") != 3:
    harness.fail(f"mpirun exited {done.returncode}; output:\n{done.stdout}\n{done.stderr}")
accuracy = float(fitted[0])
print(f"mpirun -np 4: one rank fitted, accuracy {accuracy}; three without a model")
if accuracy < 0.8:
    harness.fail(f"the model fitted under mpirun has accuracy {accuracy}")
