#!/usr/bin/env -S /usr/bin/python3
"""A local Slurm on the test bed (testbed.py; issue 54): Debian's slurmctld
on the first host, one slurmd per host, munge for their credentials, all
inside the hosts' namespaces and configured under the test bed's state
directory (SLURM_CONF), so nothing in /etc is read or written.

    with TestBed(work, hosts=2) as tb, Slurm(tb) as slurm:
        job = slurm.sbatch("h0", ["--nodes=2", "script.sh"], env={...})
        state, exit_code = slurm.wait(job, timeout=300)

One munged serves every host: its socket is a file, which each host's
daemons reach by path, as they would reach their own host's munged. Each
host's TmpFS is its own tmpfs (the holder's), where the PMIx server of
`srun --mpi=pmix` keeps its sockets: hosts sharing one /tmp would remove
each other's. Stopping the test bed kills whatever of Slurm is left, and
testbed.leftovers() names any daemon that escaped.
"""
import os
import signal
import time

from testbed import host_ip, host_name

CONTROLLER = "h0"


class Slurm:
    def __init__(self, tb, cpus_per_host=1):
        self.tb = tb
        self.cpus = cpus_per_host
        self.dir = os.path.join(tb.state, "slurm")
        self.conf = os.path.join(self.dir, "slurm.conf")
        self.sock = os.path.join(self.dir, "munge.socket")

    def env(self, extra=None):
        e = {"SLURM_CONF": self.conf}
        e.update(extra or {})
        return self.tb.env(e)

    def __enter__(self):
        try:
            self.up()
        except BaseException:
            self.down()
            raise
        return self

    def __exit__(self, *exc):
        self.down()
        return False

    def _config(self):
        d = self.dir
        hosts = [host_name(i) for i in range(self.tb.n)]
        nodes = "".join("NodeName=%s NodeAddr=%s CPUs=%d State=UNKNOWN\n"
                        % (h, host_ip(i), self.cpus) for i, h in enumerate(hosts))
        return "\n".join([
            "ClusterName=hctb",
            "SlurmctldHost=%s(%s)" % (CONTROLLER, host_ip(0)),
            "SlurmUser=root",
            # cred_expire: also how long a requeued job waits to start
            # again (Slurm's default, 120 s, would make the test wait).
            "AuthType=auth/munge", "CredType=cred/munge",
            "AuthInfo=socket=%s,cred_expire=10" % self.sock,
            "StateSaveLocation=%s/ctld" % d,
            "SlurmctldPidFile=%s/slurmctld.pid" % d, "SlurmctldLogFile=%s/slurmctld.log" % d,
            # %n: the node's name, so each host's slurmd has its own files.
            "SlurmdSpoolDir=%s/spool-%%n" % d,
            "SlurmdPidFile=%s/slurmd-%%n.pid" % d, "SlurmdLogFile=%s/slurmd-%%n.log" % d,
            "TmpFS=" + self.tb.tmp,
            # No cgroups: the hosts share one kernel's CPUs, and the test
            # bed's hosts have no cgroup tree of their own.
            "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none",
            "SelectType=select/cons_tres", "SelectTypeParameters=CR_Core",
            # Pending jobs (a requeued one) looked at every 2 s, not 60 s.
            "SchedulerType=sched/backfill", "SchedulerParameters=sched_interval=2,bf_interval=2",
            "MpiDefault=none",
            # A node's CPUs as configured, not as hwloc counts them (the
            # hosts share this machine's cores).
            "SlurmdParameters=config_overrides",
            "ReturnToService=2", "JobRequeue=1", "MinJobAge=600",
            nodes.rstrip("\n"),
            "PartitionName=all Nodes=%s Default=YES MaxTime=INFINITE State=UP" % ",".join(hosts),
            ""])

    def up(self):
        d = self.dir
        os.makedirs(os.path.join(d, "ctld"))
        for i in range(self.tb.n):
            os.makedirs(os.path.join(d, "spool-" + host_name(i)))
        key = os.path.join(d, "munge.key")
        fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(os.urandom(128))
        with open(self.conf, "w") as f:
            f.write(self._config())
        # Slurm 22.05 loads a cgroup plugin whatever the proctrack: v1 with
        # automount finds nothing to mount and stays idle.
        with open(os.path.join(d, "cgroup.conf"), "w") as f:
            f.write("CgroupPlugin=cgroup/v1\nCgroupAutomount=yes\n")
        self._start(CONTROLLER, ["munged", "--force", "--socket", self.sock, "--key-file", key,
                                 "--log-file", d + "/munged.log", "--pid-file",
                                 d + "/munged.pid", "--seed-file", d + "/munged.seed"], "munged")
        self._start(CONTROLLER, ["slurmctld"], "slurmctld")
        for i in range(self.tb.n):
            self._start(host_name(i), ["slurmd"], "slurmd on " + host_name(i))
        want = self.tb.n
        for _ in range(300):
            p = self.run(["sinfo", "-h", "-N", "-o", "%N %t"])
            idle = [l for l in p.stdout.split("\n") if l.endswith(" idle")]
            if len(idle) == want:
                return
            time.sleep(0.1)
        raise RuntimeError("Slurm: %d of %d nodes idle after 30 s: %s\n%s"
                           % (len(idle), want, p.stdout.strip(), self.log("slurmctld.log")))

    def _start(self, host, args, what):
        p = self.tb.run(host, args, env=self.env(), capture_output=True, text=True, timeout=60)
        if p.returncode != 0:
            raise RuntimeError("%s did not start: exit %d: %s" % (what, p.returncode,
                                                                  (p.stderr or p.stdout)[-800:]))

    def log(self, name, tail=2000):
        try:
            with open(os.path.join(self.dir, name)) as f:
                return f.read()[-tail:]
        except OSError:
            return "(no %s)" % name

    def run(self, args, host=CONTROLLER, env=None, **kw):
        """A Slurm command (sinfo, sbatch, scancel, scontrol) on `host`."""
        kw.setdefault("capture_output", True)
        kw.setdefault("text", True)
        kw.setdefault("timeout", 60)
        return self.tb.run(host, args, env=self.env(env), **kw)

    def sbatch(self, args, env=None, host=CONTROLLER):
        """Submits a batch job; its id."""
        p = self.run(["sbatch", "--parsable"] + args, host=host, env=env)
        if p.returncode != 0:
            raise RuntimeError("sbatch %s: exit %d: %s" % (" ".join(args), p.returncode,
                                                            p.stderr.strip()))
        return p.stdout.strip().split(";")[0]

    def job(self, job):
        """scontrol's fields of a job (JobState, ExitCode, Restarts, ...)."""
        p = self.run(["scontrol", "-o", "show", "job", job])
        fields = {}
        for item in p.stdout.split():
            k, _, v = item.partition("=")
            fields.setdefault(k, v)
        return fields

    def wait(self, job, timeout, until=("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT",
                                        "NODE_FAIL", "PREEMPTED", "OUT_OF_MEMORY")):
        """Waits for the job to reach a state in `until`: its fields."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            f = self.job(job)
            if f.get("JobState") in until:
                return f
            time.sleep(0.2)
        raise RuntimeError("job %s still %s after %d s\n%s" % (
            job, self.job(job).get("JobState"), timeout, self.log("slurmctld.log")))

    def down(self):
        """Stops the daemons: slurmd, slurmctld, then munged (by their pid
        files; what still runs dies with the test bed's namespaces)."""
        for name in ["slurmd-%s.pid" % host_name(i) for i in range(self.tb.n)] + \
                ["slurmctld.pid", "munged.pid"]:
            try:
                with open(os.path.join(self.dir, name)) as f:
                    pid = int(f.read().strip())
            except (OSError, ValueError):
                continue
            try:
                os.kill(pid, signal.SIGTERM)
            except OSError:
                continue
            for _ in range(100):
                if not alive(pid):
                    break
                time.sleep(0.05)
            else:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass


def alive(pid):
    """A process that has not ended (a zombie has)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
