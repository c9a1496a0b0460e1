"""A real single-node SLURM cluster in one folder: munged, slurmctld and slurmd of Debian's packages
(`slurmctld slurmd slurm-client munge`), run as root, configured for this machine's CPUs and memory.

tests/test_slurm.py starts one to run the workflow through profiles/slurm against the real scheduler;
docs/guide/cluster.md ("Trying the profile on one machine") starts one the same way:

    sudo .venv/bin/python tests/slurm_node.py start /tmp/augsbert-slurm   # prints: export SLURM_CONF=...
    sudo .venv/bin/python tests/slurm_node.py stop /tmp/augsbert-slurm

Everything the cluster writes stays in its folder: etc/slurm.conf, its own munge key (so /etc/munge is
never read or changed), the munge socket, the controller's state, the node's spool, logs and pid files.
Clients find it through `SLURM_CONF`. slurmd runs in a mount namespace of its own in which the folder's
etc/ is mounted on /etc/slurm, because the plugin's job step drops SLURM_CONF from the environment of the
`srun` it runs inside each job; outside that namespace /etc/slurm is untouched. The daemons listen on two
free ports of 127.0.0.1, so clusters of several test sessions on one machine do not meet. What is set
here, and why:

- accounting off (`accounting_storage/none`), as on many small clusters: `sacct` fails, `squeue` answers;
- no cgroups (`proctrack/linuxproc`, `task/none`): a container often cannot delegate them;
- CPUs are consumable (`CR_Core`), memory is checked per job but not summed, so a few jobs of the test
  workflow (16 GB each, as they are sized for real models) run side by side;
- `KillWait=2`: a job over its time limit is killed 2 s after its SIGTERM, not 30 s;
- `MinJobAge=1800`: finished jobs stay visible to `squeue` for 30 minutes (SLURM's default is 5), which the
  plugin's squeue status needs (at least 2 minutes) and the tests read;
- `partitions`: name -> MaxCPUsPerNode (None: all CPUs); the first one is the default partition. Each
  core may be given to two jobs at once (`OverSubscribe=FORCE:2`), so that jobs that mostly wait (the
  test of time limits sleeps) do not hold up the others on a 2-CPU machine; a job asking more CPUs than
  its partition offers on one node still never starts (pending, reason PartitionConfig).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

PACKAGES = "slurmctld slurmd slurm-client munge"
PROGRAMS = ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "sinfo", "scancel", "scontrol", "unshare")
SBIN = ("/usr/sbin", "/usr/local/sbin", "/sbin")


def unavailable() -> str | None:
    """Why a cluster cannot start here (None if it can)."""
    if os.name != "posix" or os.geteuid() != 0:
        return "a real SLURM cluster needs root (slurmd starts jobs as their users)"
    path = os.pathsep.join([os.environ.get("PATH", ""), *SBIN])
    missing = [p for p in PROGRAMS if shutil.which(p, path=path) is None]
    if missing or not os.path.isdir("/etc/slurm"):
        return f"{', '.join(missing) or '/etc/slurm'} not found: install the Debian packages {PACKAGES} (.ci/run does)"
    # slurmd runs in a mount namespace of its own (see SingleNodeSlurm.start)
    probe = subprocess.run(["unshare", "--mount", "--propagation", "private", "true"], capture_output=True, text=True)
    if probe.returncode != 0:
        return f"no mount namespace here for slurmd (unshare --mount: {probe.stderr.strip()})"
    return None


def free_ports(n: int) -> list[int]:
    sockets = [socket.socket() for _ in range(n)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def machine() -> tuple[int, int]:
    """CPUs this process may use and the memory in MB (as slurmd counts it: MemTotal)."""
    cpus = len(os.sched_getaffinity(0))
    with open("/proc/meminfo") as f:
        total_kb = next(int(line.split()[1]) for line in f if line.startswith("MemTotal:"))
    return cpus, total_kb // 1024


class SingleNodeSlurm:
    """munged + slurmctld + slurmd for one node, in `root` (created if missing, mode 0755: munged wants every
    directory above its socket searchable by all)."""

    NODE = "augsbert-node"

    def __init__(self, root: Path, partitions: dict[str, int | None] | None = None):
        self.root = Path(root).resolve()
        self.partitions = partitions or {"main": None}
        self.cpus, self.memory_mb = machine()
        self.conf = self.root / "etc" / "slurm.conf"
        self.procs: dict[str, subprocess.Popen] = {}
        self.start_s = self.stop_s = None  # seconds the last start() / stop() took
        # every process of this cluster (daemons, job steps, what jobs start) inherits this variable, so that
        # stop() finds whatever is left of it and of nothing else
        self.env = {**os.environ, "SLURM_CONF": str(self.conf), "AUGSBERT_SLURM_NODE": str(self.root),
                    "PATH": os.pathsep.join([os.environ.get("PATH", ""), *SBIN])}

    # -- configuration

    def write_config(self) -> None:
        for sub in ("munge", "run", "state", "spool", "log", "etc"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        self.root.chmod(0o755)
        (self.root / "run").chmod(0o755)  # the munge socket's folder
        (self.root / "munge").chmod(0o700)
        key = self.root / "munge" / "munge.key"
        if not key.exists():
            key.write_bytes(os.urandom(1024))
        key.chmod(0o600)
        ctld_port, node_port = free_ports(2)
        host = socket.gethostname().split(".")[0]
        r = self.root
        lines = [
            "ClusterName=augsbert",
            f"SlurmctldHost={host}(127.0.0.1)",
            f"SlurmctldPort={ctld_port}",
            f"SlurmdPort={node_port}",
            "SlurmUser=root",
            "SlurmdUser=root",
            "AuthType=auth/munge",
            "CredType=cred/munge",
            f"AuthInfo=socket={r / 'run' / 'munge.socket'}",
            f"StateSaveLocation={r / 'state'}",
            f"SlurmdSpoolDir={r / 'spool'}",
            f"SlurmctldPidFile={r / 'run' / 'slurmctld.pid'}",
            f"SlurmdPidFile={r / 'run' / 'slurmd.pid'}",
            f"SlurmctldLogFile={r / 'log' / 'slurmctld.log'}",
            f"SlurmdLogFile={r / 'log' / 'slurmd.log'}",
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none",
            "JobCompType=jobcomp/none",
            "MpiDefault=none",
            "SchedulerType=sched/backfill",
            "SchedulerParameters=bf_interval=1",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core",
            "ReturnToService=2",
            "KillWait=2",
            "OverTimeLimit=0",
            "MinJobAge=1800",
            f"NodeName={self.NODE} NodeHostname={host} NodeAddr=127.0.0.1 CPUs={self.cpus} "
            f"RealMemory={self.memory_mb} State=UNKNOWN",
        ]
        for i, (name, max_cpus) in enumerate(self.partitions.items()):
            limit = f" MaxCPUsPerNode={max_cpus}" if max_cpus else ""
            lines.append(f"PartitionName={name} Nodes={self.NODE} Default={'YES' if i == 0 else 'NO'} "
                         f"MaxTime=INFINITE OverSubscribe=FORCE:2 State=UP{limit}")
        self.conf.write_text("\n".join(lines) + "\n")

    # -- daemons

    def start(self, timeout: float = 60, detach: bool = False) -> None:
        """Start the three daemons and wait until the node is idle; on failure stop what started and raise
        with the daemons' logs. `detach`: the daemons outlive this process (the command line's `start`)."""
        started = time.monotonic()
        self.write_config()
        r = self.root
        commands = {
            "munged": ["munged", "-F", f"--key-file={r / 'munge' / 'munge.key'}",
                       f"--socket={r / 'run' / 'munge.socket'}", f"--pid-file={r / 'run' / 'munged.pid'}",
                       f"--log-file={r / 'log' / 'munged.log'}", f"--seed-file={r / 'munge' / 'munged.seed'}"],
            "slurmctld": ["slurmctld", "-D", "-i", "-f", str(self.conf)],
            # in a mount namespace of its own where /etc/slurm is this folder's etc/: the job steps slurmd starts
            # read the config there (the SLURM plugin's job step drops SLURM_CONF from the environment of the
            # `srun` it runs inside each job), and nothing outside this folder changes
            "slurmd": ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c",
                       'mount --bind "$0" /etc/slurm && exec "$@"', str(self.root / "etc"),
                       "slurmd", "-D", "-f", str(self.conf), "-N", self.NODE],
        }
        try:
            for name, argv in commands.items():
                out = open(r / "log" / f"{name}.out", "ab")
                self.procs[name] = subprocess.Popen(argv, env=self.env, stdout=out, stderr=subprocess.STDOUT,
                                                    stdin=subprocess.DEVNULL, start_new_session=True)
                out.close()
                if name == "munged":
                    self._wait(lambda: (r / "run" / "munge.socket").exists(), 10, "munged's socket")
            self._wait(lambda: self.node_state() == "idle", timeout, "the node to be idle")
            self.start_s = time.monotonic() - started
            if detach:
                for name, proc in self.procs.items():
                    (r / "run" / f"{name}.daemon").write_text(str(proc.pid))
        except BaseException:
            self.stop()
            raise

    def _wait(self, ready, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not ready():
            for name, proc in self.procs.items():
                if proc.poll() is not None:
                    raise RuntimeError(f"{name} exited with {proc.returncode} while waiting for {what}:\n"
                                       + self.logs())
            if time.monotonic() > deadline:
                raise RuntimeError(f"timed out after {timeout:.0f} s waiting for {what}:\n" + self.logs())
            time.sleep(0.1)

    def node_state(self) -> str:
        proc = self.run(["sinfo", "-h", "-n", self.NODE, "-o", "%t"], check=False)
        return proc.stdout.strip() if proc.returncode == 0 else ""

    def run(self, argv: list[str], check: bool = True, timeout: float = 30) -> subprocess.CompletedProcess:
        """A SLURM client command against this cluster."""
        return subprocess.run(argv, env=self.env, capture_output=True, text=True, check=check, timeout=timeout)

    def logs(self, tail: int = 40) -> str:
        parts = []
        for path in sorted((self.root / "log").glob("*")):
            lines = path.read_text(errors="replace").splitlines()[-tail:]
            parts.append(f"--- {path.name}\n" + "\n".join(lines))
        return "\n".join(parts)

    def stop(self, grace: float = 15) -> None:
        """Cancel every job, stop the daemons and kill whatever still carries this cluster's mark (job steps,
        the processes jobs started). Safe to call more than once and after a failed start."""
        started = time.monotonic()
        if self.conf.exists() and self._alive("slurmctld"):
            self.run(["scancel", "--full", "--user", str(os.getuid())], check=False)
            deadline = time.monotonic() + grace
            while time.monotonic() < deadline and self.run(
                    ["squeue", "-h", "-t", "PD,R,CG,S", "-o", "%i"], check=False).stdout.strip():
                time.sleep(0.2)
        for name in ("slurmd", "slurmctld", "munged"):
            self._signal(name, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and any(self._alive(n) for n in ("slurmd", "slurmctld", "munged")):
            time.sleep(0.1)
        for name in ("slurmd", "slurmctld", "munged"):
            self._signal(name, signal.SIGKILL)
        for pid in self.marked_processes():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for proc in self.procs.values():
            try:
                proc.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                pass
        self.procs.clear()
        for name in ("slurmd", "slurmctld", "munged"):
            (self.root / "run" / f"{name}.daemon").unlink(missing_ok=True)
        self.stop_s = time.monotonic() - started

    def _pid(self, name: str) -> int | None:
        if name in self.procs:
            return self.procs[name].pid
        path = self.root / "run" / f"{name}.daemon"
        return int(path.read_text()) if path.exists() else None

    def _alive(self, name: str) -> bool:
        if name in self.procs:
            return self.procs[name].poll() is None
        pid = self._pid(name)
        return pid is not None and pid in self.marked_processes()

    def _signal(self, name: str, sig: int) -> None:
        pid = self._pid(name)
        if pid is not None and self._alive(name):
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass

    def marked_processes(self) -> list[int]:
        """Processes (other than this one) whose environment names this cluster: its daemons, what they started."""
        mark = f"AUGSBERT_SLURM_NODE={self.root}".encode()
        found = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) == os.getpid():
                continue
            try:
                with open(f"/proc/{entry}/environ", "rb") as f:
                    if mark in f.read().split(b"\0"):
                        found.append(int(entry))
            except OSError:  # gone, or not ours to read
                pass
        return found


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in ("start", "stop"):
        print("usage: slurm_node.py start|stop FOLDER", file=sys.stderr)
        return 2
    reason = unavailable()
    if reason:
        print(f"slurm_node.py: {reason}", file=sys.stderr)
        return 1
    cluster = SingleNodeSlurm(Path(argv[1]))
    if argv[0] == "stop":
        cluster.stop()
        return 0
    cluster.start(detach=True)
    print(f"export SLURM_CONF={cluster.conf}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
