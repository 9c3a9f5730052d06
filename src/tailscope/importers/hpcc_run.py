"""Run Debian's `hpcc` (HPC Challenge 1.5, its HPL 2.0 included) for HPL-Light trials, then import them.

hpcc reads `hpccinf.txt` from its working directory (HPL.dat's format plus PTRANS lines) and appends
every run to `hpccoutf.txt` there; it always runs all its tests, HPL last (notes/next-wave.md: N = 4000 takes
19 s on 2 vCPUs, N = 1000 38 s because RandomAccess has a fixed time bound). One call of `run_hpcc` is one
trial (a fresh `mpirun -np P*Q hpcc`); `tailscope import hpl DIR/hpccoutf.txt` stores them all, and
`tailscope analyze --max-q01-drop 0.005` applies the SJTU HPL-Light rule.

Open MPI's launcher binds every interface: on a shared machine run it in a network namespace with only
loopback (`unshare --net`, then `ip link set lo up`): `run_hpcc(..., isolate_network=True)`, as root.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from tailscope.importers import ImportInputError

# hpcc's input: HPL.dat's 31 lines, then the PTRANS lines (hpcc's _hpccinf.txt example).
_HPCCINF = """HPLinpack benchmark input file
Innovative Computing Laboratory, University of Tennessee
HPL.out      output file name (if any)
8            device out (6=stdout,7=stderr,file)
1            # of problems sizes (N)
{n}          Ns
1            # of NBs
{nb}         NBs
0            PMAP process mapping (0=Row-,1=Column-major)
1            # of process grids (P x Q)
{p}          Ps
{q}          Qs
16.0         threshold
1            # of panel fact
2            PFACTs (0=left, 1=Crout, 2=Right)
1            # of recursive stopping criterium
4            NBMINs (>= 1)
1            # of panels in recursion
2            NDIVs
1            # of recursive panel fact.
1            RFACTs (0=left, 1=Crout, 2=Right)
1            # of broadcast
1            BCASTs (0=1rg,1=1rM,2=2rg,3=2rM,4=Lng,5=LnM)
1            # of lookahead depth
1            DEPTHs (>=0)
2            SWAP (0=bin-exch,1=long,2=mix)
64           swapping threshold
0            L1 in (0=transposed,1=no-transposed) form
0            U  in (0=transposed,1=no-transposed) form
1            Equilibration (0=no,1=yes)
8            memory alignment in double (> 0)
##### This line (no. 32) is ignored (it serves as a separator). ######
0                      		Number of additional problem sizes for PTRANS
1200 10000 30000        	values of N
0                       	number of additional blocking sizes for PTRANS
40 9 8 13 13 20 16 32 64       	values of NB
"""


def write_hpccinf(directory: Path, *, n: int, nb: int, p: int, q: int) -> Path:
    path = directory / "hpccinf.txt"
    path.write_text(_HPCCINF.format(n=n, nb=nb, p=p, q=q))
    return path


def run_hpcc(
    directory: Path,
    *,
    p: int,
    q: int,
    isolate_network: bool = False,
    timeout_s: float = 3600,
    cpus: Sequence[int] | None = None,
    env: Mapping[str, str] | None = None,
) -> Path:
    """One hpcc run in `directory` (hpccinf.txt must be there); returns its hpccoutf.txt (appended to).

    `env` is added to this process's environment (e.g. OPENBLAS_NUM_THREADS, OPENBLAS_CORETYPE: the default is
    one BLAS thread per rank). With `cpus`, hpcc runs under `taskset` on those CPUs and Open MPI does not bind
    its ranks (`--bind-to none`), so a rank's BLAS threads spread over the set instead of sharing one core."""
    hpcc, mpirun = shutil.which("hpcc"), shutil.which("mpirun")
    if not hpcc or not mpirun:
        raise ImportInputError("hpcc or mpirun not found (Debian: apt-get install hpcc openmpi-bin)")
    full_env = dict(os.environ)
    full_env.update(env or {})
    full_env.setdefault("OPENBLAS_NUM_THREADS", "1")  # one BLAS thread per MPI rank
    if os.geteuid() == 0:
        full_env.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
        full_env.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    argv = [mpirun, "-np", str(p * q), "--mca", "btl", "self,vader", hpcc]
    if cpus is not None:
        argv = ["taskset", "-c", ",".join(str(c) for c in cpus), *argv[:3], "--bind-to", "none", *argv[3:]]
    if isolate_network:
        argv = ["unshare", "--net", "sh", "-c", 'ip link set lo up && exec "$@"', "sh", *argv]
    proc = subprocess.run(
        argv, cwd=directory, env=full_env, capture_output=True, text=True, timeout=timeout_s, check=False
    )
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or [f"exit {proc.returncode}"]
        raise ImportInputError(f"hpcc in {directory}: exit {proc.returncode}: {tail[0]}")
    return directory / "hpccoutf.txt"
